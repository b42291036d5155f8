"""The ExecuTorch patch on ``ReplaceViewCopyWithViewPass``'s ``_is_view_copy``: a ``view_copy``
its base's planned storage cannot take stays a copy.

- Shape dynamism differs from the base's: ``to_executorch`` raised ``_ViewSpec is incompatible
  with its base on creation``. On real model code (PVT's and ViTDet's position-embedding
  reshapes), compared with eager in the ExecuTorch runtime at three batch sizes, batch 1 among
  them; without the patch ``to_executorch`` fails.
- Upper-bound size above the base's (each size bounded on its own: a fixed row split into
  ``n`` chunks of ``64 // n``): the view overran the arena and the program did not load (0x21).
"""

from __future__ import annotations

import pytest
import torch

import export_executorch
from export_core import LoweringError, RuntimeLoadError
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


class SplitRows(torch.nn.Module):
    """``x`` ``(batch, seq)`` float32 -> ``(batch, n)``: a 64-wide row per sample viewed as ``n =
    ceil(seq / 8)`` chunks of ``64 // n`` and summed per chunk. Bounded on their own, ``n`` (8 at
    seq 64) and ``64 // n`` (64 at seq 8) give the view 8 times its base's planned size."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = (x.shape[1] + 7) // 8
        rows = torch.arange(64, dtype=torch.float32).expand(x.shape[0], 64) * x[:, :1]
        return (rows.view(x.shape[0], n, 64 // n) * 2).sum(-1)


def _rows(batch: int, seq: int, seed: int) -> tuple[torch.Tensor]:
    return (torch.randn(batch, seq, generator=torch.Generator().manual_seed(seed)),)


@pytest.mark.parametrize("backend", ["portable", "xnnpack"])
def test_a_view_larger_than_its_base_at_the_bounds_stays_a_copy(backend: str) -> None:
    report = export_executorch.export(
        SplitRows().eval(), _rows(2, 16, 0), backend=backend, max_seq=64,
        validation_inputs=[_rows(3, 32, 1), _rows(1, 64, 2)],
    ).report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["0"] for c in report["validation"]["checks"]] == [[2, 16], [3, 32], [1, 64]]
    assert PATCH in report["patches"]["fired"]


def test_without_the_patch_the_larger_view_overruns_the_arena() -> None:
    with withheld("executorch", PATCH), pytest.raises(RuntimeLoadError, match="0x:21"):
        export_executorch.export(SplitRows().eval(), _rows(2, 16, 0), backend="portable",
                                 max_seq=64, validation_inputs=[_rows(3, 32, 1)])
