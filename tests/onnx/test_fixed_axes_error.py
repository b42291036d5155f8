"""An input set that does not fit an axis the ONNX artifact fixed gets an error naming the input,
the axis, its size and the artifact's (ONNX Runtime's own first line names none of them)."""

from __future__ import annotations

import pytest
import torch

import export_onnx
from export_core import RuntimeLoadError


class Branch(torch.nn.Module):
    """``(batch, width)`` -> the same shape, by a branch on ``width == 8``: the capture takes the
    example's branch and makes the second axis static (8)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2 if x.shape[1] == 8 else x - 1


def test_a_fixed_axis_is_named_with_both_sizes() -> None:
    with pytest.raises(RuntimeLoadError) as err:
        export_onnx.export(Branch().eval(), (torch.randn(3, 8),),
                           validation_inputs=[(torch.randn(2, 6),)])
    message = str(err.value)
    assert "invalid dimensions for input x of shape (2, 6)" in message
    assert "axis 1 is 6, the artifact fixes it to 8" in message


def test_an_input_within_the_dynamic_axes_runs() -> None:
    result = export_onnx.export(Branch().eval(), (torch.randn(3, 8),),
                                validation_inputs=[(torch.randn(1, 8),), (torch.randn(5, 8),)])
    assert result.report["validation"]["passed"] is True
