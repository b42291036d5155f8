"""The capture patches ``selective_scan_as_scan`` (Mamba, Falcon-Mamba, Jamba, Zamba),
``rglru_scan_as_scan`` (RecurrentGemma) and ``rwkv_wkv_as_scan`` (RWKV): the recurrences as a
``scan`` over time.

The replacements equal the models' own loops in eager (every option of the selective scan, the
RG-LRU with and without an initial state and resets, the WKV attention with and without a state);
the models export through the public API
and match eager at three shapes, batch 1 among them, on both backends; without the patch the
sequence axis is pinned."""

from __future__ import annotations

import importlib

import pytest
import torch

import export_executorch
import export_onnx
from export_core import ExportError
from export_core.registry import withheld
from export_core.workarounds.recurrence_scan import rg_lru_scan, selective_scan, wkv_scan
from export_sweep.zoo.build import build_tiny_model

MAMBA = "dynamo:transformers.models.mamba.modeling_mamba.mamba_selective_scan"
RGLRU = "dynamo:transformers.models.recurrent_gemma.modeling_recurrent_gemma.RecurrentGemmaRglru._rnn_scan"
RWKV = "dynamo:transformers.models.rwkv.modeling_rwkv.rwkv_linear_attention_cpu"


def _reference_selective_scan():
    """The model's own (sequential) selective scan, its kernel fallback left out."""
    module = importlib.import_module("transformers.models.mamba.modeling_mamba")
    function = module.mamba_selective_scan
    return getattr(function, "__wrapped__", function)


@pytest.mark.parametrize("options", [
    {},
    {"delta_softplus": True},
    {"D": True, "z": True, "delta_bias": True, "delta_softplus": True},
    {"D": True, "return_last_state": True},
], ids=["plain", "softplus", "gated", "last_state"])
def test_selective_scan_equals_the_loop(options: dict) -> None:
    g = torch.Generator().manual_seed(0)
    batch, inner, state, seq = 2, 6, 4, 9
    args = (torch.randn(batch, inner, seq, generator=g), torch.rand(batch, inner, seq, generator=g),
            -torch.rand(inner, state, generator=g) * 2, torch.randn(batch, state, seq, generator=g),
            torch.randn(batch, state, seq, generator=g))
    kwargs = {
        "D": torch.randn(inner, generator=g) if options.get("D") else None,
        "z": torch.randn(batch, inner, seq, generator=g) if options.get("z") else None,
        "delta_bias": torch.randn(inner, generator=g) if options.get("delta_bias") else None,
        "delta_softplus": options.get("delta_softplus", False),
        "return_last_state": options.get("return_last_state", False),
    }
    want = _reference_selective_scan()(*args, **kwargs)
    got = selective_scan(*args, **kwargs)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("initial", [False, True], ids=["zeros", "given"])
def test_rg_lru_scan_equals_the_loop(initial: bool) -> None:
    module = importlib.import_module("transformers.models.recurrent_gemma.modeling_recurrent_gemma")
    g = torch.Generator().manual_seed(0)
    x, a = torch.randn(2, 7, 5, generator=g), torch.rand(2, 7, 5, generator=g)
    reset = torch.zeros(2, 7, 1, dtype=torch.bool)
    reset[:, 0], reset[1, 4] = True, True
    h0 = torch.randn(2, 5, generator=g) if initial else None
    want = module.RecurrentGemmaRglru._rnn_scan(None, x, a, reset, h0)
    got = rg_lru_scan(None, x, a, reset, h0)
    for w, o in zip(want, got, strict=True):
        torch.testing.assert_close(o, w)


@pytest.mark.parametrize("initial", [False, True], ids=["no_state", "state"])
@pytest.mark.parametrize("return_state", [False, True])
def test_wkv_scan_equals_the_loop(initial: bool, return_state: bool) -> None:
    module = importlib.import_module("transformers.models.rwkv.modeling_rwkv")
    g = torch.Generator().manual_seed(0)
    decay, first = torch.randn(6, generator=g), torch.randn(6, generator=g)
    key, value = torch.randn(2, 9, 6, generator=g) * 3, torch.randn(2, 9, 6, generator=g)
    state = ([torch.randn(2, 6, generator=g), torch.rand(2, 6, generator=g) + 0.5,
              torch.randn(2, 6, generator=g)] if initial else None)

    def copy() -> list[torch.Tensor] | None:
        return [t.clone() for t in state] if state is not None else None

    want = module.rwkv_linear_attention_cpu(decay, first, key, value, copy(), return_state)
    got = wkv_scan(decay, first, key, value, copy(), return_state)
    torch.testing.assert_close(got[0], want[0])
    assert (got[1] is None) == (want[1] is None) == (not initial and not return_state)
    for o, w in zip(got[1] or (), want[1] or (), strict=True):
        torch.testing.assert_close(o, w)


def _ids(batch: int, seq: int, seed: int) -> dict[str, torch.Tensor]:
    ids = torch.randint(3, 90, (batch, seq), generator=torch.Generator().manual_seed(seed))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


VALIDATION = [_ids(3, 12, 1), _ids(1, 5, 2)]


@pytest.mark.parametrize(("model_type", "patch"),
                         [("mamba", MAMBA), ("recurrent_gemma", RGLRU), ("rwkv", RWKV)])
@pytest.mark.parametrize("exporter", [
    export_onnx,
    pytest.param(export_executorch, marks=pytest.mark.slow),  # about 20 s each; -m slow
], ids=["onnx", "executorch"])
def test_state_space_model_takes_any_length(model_type: str, patch: str, exporter) -> None:
    result = exporter.export(build_tiny_model(model_type).model, _ids(2, 8, 0),
                             validation_inputs=VALIDATION)
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["input_ids"] for c in report["validation"]["checks"]] == [
        [2, 8], [3, 12], [1, 5]]
    assert patch in report["patches"]["fired"]


@pytest.mark.parametrize(("model_type", "patch"), [("mamba", MAMBA), ("rwkv", RWKV)])
def test_without_the_patch_the_sequence_is_pinned(model_type: str, patch: str) -> None:
    """Documents the unrolled loops: when this stops failing, the patch can go."""
    with withheld("dynamo", patch), pytest.raises(ExportError, match="invalid dimensions"):
        export_onnx.export(build_tiny_model(model_type).model, _ids(2, 8, 0),
                           validation_inputs=VALIDATION[:1])
