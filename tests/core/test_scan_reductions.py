"""The capture node fixes ``cumulative_extremum_as_comparisons`` (``cummax`` / ``cummin``) and
``isin_as_comparisons``: both lowerings fail on these ops (not Core ATen, no ONNX function, or
a ``sort`` + ``searchsorted`` decomposition). The replacements equal ``torch`` in eager over
dtypes, axes and ties; a Grounding-DINO-style delimiter mask exports through the public API and
matches eager at three shapes, batch 1 among them, on both backends; without the fixes ExecuTorch
lowering fails."""

from __future__ import annotations

import pytest
import torch

import export_executorch
import export_onnx
from export_core import LoweringError
from export_core.registry import withheld
from export_core.workarounds.scan_reductions import cumulative_extremum, membership

CUMULATIVE = "cumulative_extremum_as_comparisons"
ISIN = "isin_as_comparisons"


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("largest", [True, False], ids=["cummax", "cummin"])
def test_cumulative_extremum_equals_torch(dtype: torch.dtype, dim: int, largest: bool) -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-3, 4, (4, 6, 3), generator=g)  # small range: many ties
    x = x.to(dtype) if dtype != torch.bool else x > 0
    want = torch.cummax(x, dim) if largest else torch.cummin(x, dim)
    values, indices = cumulative_extremum(x, dim, largest)
    torch.testing.assert_close(values, want.values)
    torch.testing.assert_close(indices, want.indices)


@pytest.mark.parametrize("invert", [False, True])
def test_membership_equals_isin(invert: bool) -> None:
    g = torch.Generator().manual_seed(0)
    x, test = torch.randint(0, 9, (3, 7), generator=g), torch.tensor([[1, 4], [8, 4]])
    torch.testing.assert_close(membership(x, test, invert), torch.isin(x, test, invert=invert))


class _DelimiterPositions(torch.nn.Module):
    """``forward(input_ids)`` ``(batch, seq)`` int64 -> each token's distance from the previous
    delimiter and the position of the next one, ``(batch, seq)`` int64 each (Grounding DINO's
    text-mask arithmetic: ``isin``, ``cummax``, ``cummin``)."""

    def forward(self, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        special = torch.isin(input_ids, torch.tensor([1, 2]))
        positions = torch.arange(input_ids.shape[1]).unsqueeze(0).expand(input_ids.shape[0], -1)
        previous = torch.cummax(torch.where(special, positions, torch.full_like(positions, -1)),
                                dim=1).values
        following = torch.where(special, positions, torch.full_like(positions, input_ids.shape[1]))
        following = torch.cummin(following.flip(1), dim=1).values.flip(1)
        return positions - previous, following


def _ids(batch: int, seq: int, seed: int) -> tuple[torch.Tensor]:
    return (torch.randint(0, 5, (batch, seq), generator=torch.Generator().manual_seed(seed)),)


@pytest.mark.parametrize("exporter", [export_onnx, export_executorch], ids=["onnx", "executorch"])
def test_delimiter_positions_take_any_shape(exporter) -> None:
    result = exporter.export(_DelimiterPositions().eval(), _ids(2, 8, 0),
                             validation_inputs=[_ids(3, 12, 1), _ids(1, 5, 2)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["0"] for c in report["validation"]["checks"]] == [[2, 8], [3, 12], [1, 5]]
    assert {CUMULATIVE, ISIN} <= set(report["fixes"]["applied"])


def test_without_the_fix_executorch_lowering_fails() -> None:
    """Documents ``cummax`` outside Core ATen: when this stops failing, the fix can go."""
    with withheld("dynamo", CUMULATIVE), pytest.raises(LoweringError, match="cummax"):
        export_executorch.export(_DelimiterPositions().eval(), _ids(2, 8, 0))
