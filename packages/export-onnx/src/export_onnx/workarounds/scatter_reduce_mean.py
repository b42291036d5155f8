"""ONNX translation: ``scatter_reduce(..., reduce="mean")``.

ONNX ``ScatterElements`` has no ``mean`` reduction, and TorchLib's translation of
``aten.scatter_reduce.two`` maps ``"mean"`` to ``reduction="none"``: the export succeeds and ONNX
Runtime returns the last value scattered into each slot instead of the mean (GNN mean
aggregation; a silent wrong result that the exporter's validation catches as a failure).

The mean is two ``add`` scatters, the values and a count, and a division:
``out[i] = (self[i] * include_self + Σ src) / (include_self + count)``; a slot that receives
nothing keeps ``self``. Integer tensors divide with floor rounding, as eager does. The other
reductions (``sum``, ``prod``, ``amax``, ``amin``) keep TorchLib's translation, given the part
of ``src`` that eager reads: TorchLib passes a ``src`` larger than ``index`` (which eager allows)
to ``ScatterElements``, which ONNX Runtime rejects ("Indices vs updates dimensions differs").

Source: https://github.com/pytorch/pytorch/issues/101535
"""

from __future__ import annotations

import onnx_ir as ir
import torch
from onnxscript import opset18 as op
from onnxscript.function_libs.torch_lib.ops.core import (
    aten_scatter_reduce as torchlib_scatter_reduce,
)
from onnxscript.onnx_types import TensorType

from ..translations import register_onnx_translation

__all__ = ["aten_scatter_reduce_with_mean"]

_FLOATING = {ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16}


def _filled(like: TensorType, shape_of: TensorType, value: int) -> TensorType:
    """A tensor shaped like ``shape_of``, of ``like``'s dtype, filled with ``value``."""
    return op.ConstantOfShape(op.Shape(shape_of), value=ir.tensor([value], dtype=like.dtype))


def _corner(src: TensorType, index: TensorType, rank: int) -> TensorType:
    """``src[:index.shape[0], :index.shape[1], ...]``: eager reads only that part of ``src``."""
    return op.Slice(src, op.Constant(value_ints=[0] * rank), op.Shape(index),
                    op.Constant(value_ints=list(range(rank))))


@register_onnx_translation(
    torch.ops.aten.scatter_reduce.two,
    reason="TorchLib lowers scatter_reduce(reduce='mean') to ScatterElements(reduction='none'): "
    "ONNX Runtime returns the last scattered value, not the mean; and it passes a src larger "
    "than index, which ONNX Runtime rejects",
    upstream="https://github.com/pytorch/pytorch/issues/101535",
)
def aten_scatter_reduce_with_mean(
    self: TensorType, dim: int, index: TensorType, src: TensorType, reduce: str,
    include_self: bool = True,
) -> TensorType:
    """``aten::scatter_reduce.two``, ``mean`` as scatter-adds and a division.

    Args:
        self: the destination ``(..., n, ...)`` (``n`` at ``dim``), a real dtype.
        dim: the scattered axis.
        index: int64, the same rank as ``self``; only ``src``'s ``index.shape`` corner is read.
        src: the values.
        reduce: ``"mean"``; any other reduction goes to TorchLib's translation, with ``src``
            cut to ``index``'s shape.
        include_self: whether ``self``'s value counts at the slots that receive values.

    Returns:
        A tensor shaped and typed like ``self``.

    Source: https://github.com/pytorch/pytorch/issues/101535
    """
    rank = len(self.shape)
    if rank and reduce != "mean":
        # ScatterElements takes updates shaped like the indices: src's index.shape corner
        return torchlib_scatter_reduce(self, dim, index, _corner(src, index, rank), reduce,
                                       include_self=include_self)
    if reduce != "mean":
        return torchlib_scatter_reduce(self, dim, index, src, reduce, include_self=include_self)
    scalar = rank == 0
    if scalar:
        flat = op.Constant(value_ints=[-1])
        self, index, src = op.Reshape(self, flat), op.Reshape(index, flat), op.Reshape(src, flat)
        rank, dim = 1, 0
    dim = dim % rank
    src = _corner(src, index, rank)
    zeros, ones = _filled(self, self, 0), _filled(self, self, 1)
    ones_src = _filled(self, index, 1)
    if include_self:
        total = op.ScatterElements(self, index, src, axis=dim, reduction="add")
        count = op.ScatterElements(ones, index, ones_src, axis=dim, reduction="add")
    else:
        received = op.ScatterElements(zeros, index, ones_src, axis=dim, reduction="add")
        touched = op.Greater(received, zeros)
        total = op.ScatterElements(op.Where(touched, zeros, self), index, src, axis=dim,
                                   reduction="add")
        count = op.Where(touched, received, ones)
    if self.dtype in _FLOATING:
        out = op.Div(total, count)
    else:  # eager divides integers with floor rounding
        wide = ir.DataType.DOUBLE
        out = op.Cast(op.Floor(op.Div(op.Cast(total, to=wide), op.Cast(count, to=wide))),
                      to=self.dtype)
    if scalar:
        out = op.Reshape(out, op.Constant(value_ints=[]))
    return out
