"""The ONNX IR fix ``fix_ir_orphan_initializers``: the onnxscript rewriter fuses
``Min(Max(x, lo), hi)`` into ``Clip`` with initializers named after ``x``; two such clamps of one
input overwrote each other's constants and the model did not load. Exported through the public
API and compared with eager in ONNX Runtime at three shapes, batch 1 among them; one half fails
without the fix."""

from __future__ import annotations

import pytest
import torch

import export_onnx
from export_core import ExportError
from export_core.registry import withheld

FIX = "fix_ir_orphan_initializers"


class _TwoRanges(torch.nn.Module):
    """``forward(x)``: ``x`` ``(batch, n)`` float32 clamped to two ranges with ``minimum`` /
    ``maximum`` against constants (each pair becomes one ``Clip``), combined."""

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.dtype = dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.to(self.dtype)
        lo1, hi1 = torch.tensor(-1.0, dtype=self.dtype), torch.tensor(1.0, dtype=self.dtype)
        lo2, hi2 = torch.tensor(-0.5, dtype=self.dtype), torch.tensor(2.0, dtype=self.dtype)
        wide = torch.maximum(torch.minimum(x, hi2), lo2)
        narrow = torch.minimum(torch.maximum(x, lo1), hi1)
        return (narrow + 2 * wide).float()


def _x(batch: int, n: int, seed: int) -> tuple[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return (3 * torch.randn(batch, n, generator=g),)


VALIDATION = [_x(4, 9, 1), _x(1, 3, 2)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["float32", "float64"])
def test_two_clamps_of_one_input_load_and_match(dtype: torch.dtype) -> None:
    result = export_onnx.export(_TwoRanges(dtype), _x(2, 5, 0), validation_inputs=VALIDATION)
    assert result.report["validation"]["passed"] is True
    assert len(result.report["validation"]["checks"]) == 3
    assert FIX in result.report["fixes"]["applied"]
    graph = result.program.model_proto.graph
    assert [n.op_type for n in graph.node].count("Clip") == 2
    produced = {o for n in graph.node for o in n.output}
    known = produced | {i.name for i in graph.initializer} | {i.name for i in graph.input}
    assert all(i in known for n in graph.node for i in n.input if i)


def test_one_clamp_needs_no_fix() -> None:
    class _One(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.minimum(torch.maximum(x, torch.tensor(-1.0)), torch.tensor(1.0))

    result = export_onnx.export(_One(), _x(2, 5, 0), validation_inputs=VALIDATION)
    assert result.report["validation"]["passed"] is True
    assert FIX not in result.report["fixes"]["applied"]


def test_without_the_fix_the_model_does_not_load() -> None:
    """Documents onnxscript#2945: when this stops failing, the fix can go."""
    with withheld("onnx", FIX), pytest.raises(ExportError, match="is not a graph input"):
        export_onnx.export(_TwoRanges(), _x(2, 5, 0), validation_inputs=VALIDATION)
