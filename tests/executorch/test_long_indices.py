"""The FX node fix ``long_scatter_indices``: ``scatter_add`` over an int32 index (as GLM-5-Next
builds its top-k attention mask) lowers, the index cast to int64 for the edge dialect, and
matches eager in the ExecuTorch runtime at three shapes, batch 1 among them; without the fix the
edge verifier rejects the program."""

from __future__ import annotations

import pytest
import torch

import export_executorch
from export_core import LoweringError
from export_core.registry import withheld

FIX = "long_scatter_indices"


class TopKMask(torch.nn.Module):
    """``scores`` ``(batch, queries, keys)`` float32 -> ``(batch, queries, keys)`` float32: the
    scores where a key is among the query's top 3 (counted with ``scatter_add`` and the in-place
    ``scatter_add_`` over the int32 top-k indices), else -1e4."""

    def forward(self, scores: torch.Tensor) -> torch.Tensor:
        top = scores.topk(3, dim=-1).indices.to(torch.int32)
        hits = torch.zeros(scores.shape, dtype=torch.int32).scatter_add(
            -1, top, torch.ones(top.shape, dtype=torch.int32))
        counts = torch.zeros(scores.shape, dtype=torch.int32)
        counts.scatter_add_(-1, top, torch.ones(top.shape, dtype=torch.int32))  # in place
        return torch.where(hits + counts > 1, scores, torch.full_like(scores, -1e4))


def _scores(batch: int, keys: int, seed: int) -> tuple[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, 4, keys, generator=g),)


@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_int32_scatter_indices_lower_and_match_eager(backend) -> None:
    result = export_executorch.export(TopKMask().eval(), _scores(2, 8, 0), backend=backend,
                                      validation_inputs=[_scores(3, 6, 1), _scores(1, 5, 2)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["0"] for c in report["validation"]["checks"]] == [
        [2, 4, 8], [3, 4, 6], [1, 4, 5]]
    assert FIX in report["fixes"]["applied"]


def test_without_the_fix_the_edge_verifier_rejects_the_index() -> None:
    with withheld("executorch", FIX), pytest.raises(LoweringError, match="mismatched dtypes"):
        export_executorch.export(TopKMask().eval(), _scores(2, 8, 0), validate=False)
