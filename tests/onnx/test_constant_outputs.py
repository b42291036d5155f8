"""The ONNX patch ``constant_outputs_left_out``: a model that returns Python numbers beside its
tensors (sizes of static axes, as MaskFormer's Swin backbone returns its stages' sizes)
translates, with the tensors as the artifact's outputs. Compared with eager in ONNX Runtime at
three shapes, batch 1 among them."""

from __future__ import annotations

import pytest
import torch

import export_onnx
from export_core import ExportError
from export_core.registry import withheld
from export_onnx.workarounds.constant_outputs import OUTPUT_NODE_TARGET

PATCH = f"onnx:{OUTPUT_NODE_TARGET}"


class _Stages(torch.nn.Module):
    """``x`` ``(batch, seq, 8)`` float32 -> ``(hidden (batch, seq, 8), (8, 4), pooled (batch,
    4))``: the stage sizes are Python ints of the static feature axis and the projection."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int], torch.Tensor]:
        hidden = torch.tanh(x)
        pooled = self.proj(hidden.mean(1))
        return hidden, (hidden.shape[-1], pooled.shape[-1]), pooled


def _x(batch: int, seq: int, seed: int) -> tuple[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, seq, 8, generator=g),)


def test_constant_outputs_are_left_out_of_the_artifact() -> None:
    result = export_onnx.export(_Stages().eval(), _x(2, 5, 0),
                                validation_inputs=[_x(3, 7, 1), _x(1, 2, 2)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert len(report["validation"]["checks"]) == 3
    assert len(report["outputs"]) == 2  # the two tensors
    assert [o.name for o in result.program.model_proto.graph.output] == report["outputs"]
    assert PATCH in report["patches"]["fired"]


def test_without_the_patch_a_constant_output_does_not_translate() -> None:
    with withheld("onnx", OUTPUT_NODE_TARGET), pytest.raises(ExportError, match="has no attribute 'name'"):
        export_onnx.export(_Stages().eval(), _x(2, 5, 0))
