"""The capture patch ``broadcast_mask_expansion``: an attention mask built from a custom mask
function (transformers switches to ``torch.vmap`` for those) is built by broadcasting the index
grids, so no functorch call is left in the exported program.

The broadcast expansion is compared element for element with transformers' own vmap expansion
for every mask function and overlay ``masking_utils`` ships, at two sizes; Gemma 4's audio
encoder (a sliding-window ``and_mask_function``) is exported through the public API and compared
with eager at three shapes, batch 1 among them, on both backends; one half fails without it."""

from __future__ import annotations

import pytest
import torch
from transformers import masking_utils as mu

import export_executorch
import export_onnx
from export_core import ExportError
from export_core.registry import withheld
from export_core.workarounds.mask_broadcast import expand_by_broadcasting
from export_sweep.zoo.build import build_tiny_model

PATCH = "dynamo:transformers.masking_utils._vmap_expansion_sdpa"


def _mask_functions(batch: int, kv: int) -> dict[str, object]:
    """transformers' mask functions and overlays, those over tensors built for ``batch`` x ``kv``."""
    g = torch.Generator().manual_seed(batch * 100 + kv)
    padding = torch.rand(batch, kv, generator=g) > 0.3
    blocks = torch.randint(-1, 3, (batch, kv), generator=g)
    packed = torch.sort(torch.randint(0, 3, (batch, kv), generator=g), dim=-1).values
    left = torch.randint(0, 3, (batch,), generator=g)
    return {
        "causal": mu.causal_mask_function,
        "sliding_causal": mu.sliding_window_causal_mask_function(3),
        "sliding_bidirectional": mu.sliding_window_bidirectional_mask_function(2),
        "chunked_causal": mu.chunked_causal_mask_function(4, left),
        "padding": mu.padding_mask_function(padding),
        "packed": mu.packed_sequence_mask_function(packed),
        "blockwise_or_causal": mu.or_masks(mu.causal_mask_function, mu.blockwise_overlay(blocks)),
        "and_of_three": mu.and_masks(mu.causal_mask_function, mu.sliding_window_overlay(4),
                                     mu.padding_mask_function(padding)),
    }


@pytest.mark.parametrize("sizes", [(2, 1, 7, 7), (1, 2, 5, 9)], ids=["square", "offset"])
def test_broadcast_equals_vmap(sizes: tuple[int, int, int, int]) -> None:
    batch, heads, q, kv = sizes
    ranges = (torch.arange(batch), torch.arange(heads), torch.arange(q) + (kv - q),
              torch.arange(kv))
    for name, fn in _mask_functions(batch, kv).items():
        with mu.TransformGetItemToIndex():
            expected = mu._vmap_expansion_sdpa(fn)(*ranges)
        got = expand_by_broadcasting(fn)(*ranges)
        assert got.dtype == torch.bool and got.shape == (batch, heads, q, kv), name
        assert torch.equal(got, expected), name


def _features(batch: int, frames: int, seed: int) -> dict[str, torch.Tensor]:
    """``input_features`` ``(batch, frames, 64)`` float32 log-mel frames."""
    g = torch.Generator().manual_seed(seed)
    return {"input_features": torch.randn(batch, frames, 64, generator=g)}


VALIDATION = [_features(3, 32, 1), _features(1, 32, 2)]


@pytest.mark.parametrize("exporter", [
    export_onnx,
    pytest.param(export_executorch, marks=pytest.mark.slow),  # about 50 s; -m slow
], ids=["onnx", "executorch"])
def test_gemma4_audio_encoder_matches_eager(exporter) -> None:
    result = exporter.export(build_tiny_model("gemma4_audio").model, _features(2, 32, 0),
                             validation_inputs=VALIDATION)
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["input_features"][0] for c in report["validation"]["checks"]] == [2, 3, 1]
    assert PATCH in report["patches"]["fired"]


def test_without_the_patch_onnx_translation_fails() -> None:
    """Documents vmap in exported programs: when this stops failing, the patch can go."""
    with withheld("dynamo", PATCH), pytest.raises(ExportError, match="vmapped"):
        export_onnx.export(build_tiny_model("gemma4_audio").model, _features(2, 32, 0),
                           validation_inputs=VALIDATION)
