"""The capture fix ``exact_integer_sum``: torch sums int64 in the integer type (wrapping; BLT's
rolling hash), ONNX Runtime's ``ReduceSum`` and ExecuTorch's ``sum.IntList_out`` go through
floating point. A ``cumsum`` and its last element match torch bit for bit, for every form of
``sum`` (one axis, all axes, ``keepdim``, ``dtype``), on both backends at three shapes; boolean
and float sums are left alone; without the fix the artifacts differ."""

from __future__ import annotations

import pytest
import torch

import export_executorch
import export_onnx
from export_core import ValidationError
from export_core.registry import withheld

PRIME = 9576890767


class Sums(torch.nn.Module):
    """``ids (batch, seq)`` int64 -> five sums of ``ids * PRIME ** position`` (int64, past 2**63)
    and a mask count, each as float32 of their low 24 bits (exactly representable)."""

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, ...]:
        weighted = ids[..., None] * (torch.tensor(PRIME) ** torch.arange(8))
        sums = (weighted.sum(-1), weighted.sum(), weighted.sum((0, 2), keepdim=True),
                weighted.int().sum(1, dtype=torch.int64), (ids > 100).sum(-1))
        return tuple((s & ((1 << 24) - 1)).float() for s in sums)


def _ids(batch: int, seq: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"ids": torch.randint(0, 260, (batch, seq), generator=g)}


@pytest.mark.parametrize("export", [export_onnx.export, export_executorch.export],
                         ids=["onnx", "executorch"])
def test_integer_sums_export_and_match_eager(export) -> None:
    result = export(Sums().eval(), _ids(2, 8, 0), validation_inputs=[_ids(3, 12, 1), _ids(1, 5, 2)])
    assert result.report["validation"]["passed"] is True
    assert len(result.report["validation"]["checks"]) >= 3
    assert "exact_integer_sum" in result.report["fixes"]["applied"]


def test_float_and_boolean_sums_are_left_alone() -> None:
    class Counts(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return x.sum(-1), (x > 0).sum(-1)

    result = export_onnx.export(Counts().eval(), {"x": torch.randn(2, 5)},
                                validation_inputs=[{"x": torch.randn(4, 7)}])
    assert "exact_integer_sum" not in result.report["fixes"]["applied"]


def test_without_the_fix_the_artifact_differs() -> None:
    with withheld("dynamo", "exact_integer_sum"), pytest.raises(ValidationError, match="differs"):
        export_onnx.export(Sums().eval(), _ids(2, 8, 0), validation_inputs=[_ids(3, 12, 1)])
