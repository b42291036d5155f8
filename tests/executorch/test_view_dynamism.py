"""The ExecuTorch patch on ``ReplaceViewCopyWithViewPass``'s ``_is_view_copy``: a ``view_copy``
whose shape dynamism differs from its base's stays a copy, so ``to_executorch`` no longer raises
``_ViewSpec is incompatible with its base on creation``. On real model code (PVT's and ViTDet's
position-embedding reshapes), compared with eager in the ExecuTorch runtime at three batch sizes,
batch 1 among them; without the patch ``to_executorch`` fails."""

from __future__ import annotations

import pytest
import torch

import export_executorch
from export_core import LoweringError
from export_core.registry import withheld
from export_executorch.workarounds.view_dynamism import TARGET
from export_sweep.zoo.build import build_tiny_model

PATCH = f"executorch:{TARGET}"


def _images(batch: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"pixel_values": torch.randn(batch, 3, 32, 32, generator=g)}


@pytest.mark.parametrize("model_type", ["pvt", "vitdet"])
def test_static_table_reshaped_symbolically_runs(model_type: str) -> None:
    result = export_executorch.export(build_tiny_model(model_type).model, _images(2, 0),
                                      validation_inputs=[_images(3, 1), _images(1, 2)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["pixel_values"][0] for c in report["validation"]["checks"]] == [2, 3, 1]
    assert PATCH in report["patches"]["fired"]


def test_without_the_patch_to_executorch_fails() -> None:
    """Documents the view pass's dynamism check: when this stops failing, the patch can go."""
    with withheld("executorch", PATCH), pytest.raises(LoweringError, match="_ViewSpec is incompatible"):
        export_executorch.export(build_tiny_model("pvt").model, _images(2, 0))


def test_a_model_without_such_a_view_does_not_fire_it() -> None:
    report = export_executorch.export(torch.nn.Linear(8, 4).eval(), (torch.randn(2, 8),)).report
    assert PATCH not in report["patches"]["fired"]
