"""A model that returns Python ints beside its tensors (MaskFormer-Swin's
``hidden_states_spatial_dimensions``): with dynamic axes the ints are ``SymInt`` s during the
capture and were returned as extra program outputs, so the artifact had more outputs than the
model has tensors and every validation failed ("artifact returned 12 outputs, eager 2"). The
numbers are left out of the captured outputs; the tensors are compared at two shapes."""

from __future__ import annotations

import pytest
import torch

import export_executorch
import export_onnx
from export_core.exporter import canonical_output


class WithSizes(torch.nn.Module):
    """``x (batch, seq, 4) -> (y (batch, seq, 3), ((seq, 4), seq / 2), y.sum(-1))``."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, tuple, torch.Tensor]:
        y = self.proj(x)
        return y, ((x.shape[1], x.shape[2]), x.shape[1] / 2), y.sum(-1)


def _sets() -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    return [{"x": torch.randn(2, 5, 4, generator=g)}, {"x": torch.randn(1, 9, 4, generator=g)}]


@pytest.mark.parametrize("exporter", [export_onnx, export_executorch], ids=["onnx", "executorch"])
def test_sizes_among_the_outputs_are_no_artifact_outputs(exporter) -> None:
    first, second = _sets()
    result = exporter.export(WithSizes().eval(), first, validation_inputs=[second])
    report = result.report
    assert report["validation"]["passed"] is True and len(report["validation"]["checks"]) == 2
    assert len(report["outputs"]) == 2


def test_canonical_output_keeps_tensors_and_structure() -> None:
    t = torch.ones(2)
    out = canonical_output((t, (3, 1.5), {"a": t, "n": 7, "flag": True}))
    assert out[0] is t and out[1] == (None, None) and out[2] == {"a": t, "n": None, "flag": None}
