"""The capture patch ``mask_tokens_expanded``: V-JEPA 2's predictor takes its target tokens'
count from the target masks' shapes, not from ``target_mask[0].max() + 1`` (a size read from
tensor data, which ExecuTorch plans below the patch count: the first input already fails
``execute``). Compared with eager in ONNX Runtime and in ExecuTorch at three shapes, batch 1 and
another frame count and image size among them."""

from __future__ import annotations

import pytest
import torch

import export_executorch
import export_onnx
from export_core.errors import RuntimeLoadError
from export_core.registry import withheld
from export_core.workarounds.vjepa2_mask_tokens import VJEPA2_EMBEDDINGS_FORWARD
from export_sweep.zoo.build import build_tiny_model

PATCH = f"dynamo:{VJEPA2_EMBEDDINGS_FORWARD}"


def _model() -> torch.nn.Module:
    """The zoo's tiny V-JEPA 2 (2 encoder and 2 predictor layers, patches of 4 pixels, tubelets
    of 2 frames) with clips of 16 frames: 8 * 8 * 8 = 512 patches at 32 x 32, which ExecuTorch
    plans at 16 without the patch."""
    def clip_of_sixteen(config, cls) -> None:
        config.frames_per_clip = 16

    return build_tiny_model("vjepa2", configure=clip_of_sixteen).model.eval()


def _video(batch: int, frames: int, size: int, seed: int) -> dict[str, torch.Tensor]:
    """``pixel_values_videos`` ``(batch, frames, 3, size, size)`` float32."""
    g = torch.Generator().manual_seed(seed)
    return {"pixel_values_videos": torch.randn(batch, frames, 3, size, size, generator=g)}


EXAMPLE = _video(2, 16, 32, 0)
VALIDATION = [_video(3, 4, 16, 1), _video(1, 8, 24, 2)]


@pytest.mark.parametrize("exporter", [export_onnx, export_executorch], ids=["onnx", "executorch"])
def test_vjepa2_predictor_exports(exporter) -> None:
    result = exporter.export(_model(), EXAMPLE, validation_inputs=VALIDATION)
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["pixel_values_videos"] for c in report["validation"]["checks"]] == [
        [2, 16, 3, 32, 32], [3, 4, 3, 16, 16], [1, 8, 3, 24, 24]]
    assert PATCH in report["patches"]["fired"]


def test_without_the_patch_executorch_plans_too_little() -> None:
    """Documents the model code's data-dependent repeat: when this stops failing, the patch can
    go."""
    with withheld("dynamo", VJEPA2_EMBEDDINGS_FORWARD), pytest.raises(
            RuntimeLoadError, match="resize a bounded tensor"):
        export_executorch.export(_model(), EXAMPLE)
