"""ONNX translation: stable ``sort`` / ``argsort``.

``torch.sort(x, stable=True)`` and ``torch.argsort(x, stable=True)`` trace to
``aten.sort.stable`` (``argsort.stable`` decomposes to it), which TorchLib does not translate:
``DispatchError: No ONNX function found for aten.sort.stable``.

ONNX ``TopK`` with ``k`` = the size of the sorted axis and ``sorted=1`` is a stable sort: the
spec breaks ties by the lower index first, for ``largest=1`` (descending) as well as
``largest=0`` (ascending), which is exactly PyTorch's stable order; ONNX Runtime (CPU) honours
it at every size and dtype measured here, and orders NaN like PyTorch (largest). ``TopK`` has no
kernel for ``bool`` / ``bfloat16`` / unsigned 16-64 bit inputs, so those are sorted through an
exactly representable wider type and the values cast back.

Source: https://github.com/pytorch/pytorch/issues/95613
"""

from __future__ import annotations

import onnx_ir as ir
import torch
from onnxscript import opset18 as op
from onnxscript.onnx_types import INT64, TensorType

from ..translations import register_onnx_translation

__all__ = ["aten_sort_stable"]

_SORTABLE_AS = {
    ir.DataType.BOOL: ir.DataType.UINT8,
    ir.DataType.BFLOAT16: ir.DataType.FLOAT,
    ir.DataType.UINT16: ir.DataType.INT32,
    ir.DataType.UINT32: ir.DataType.INT64,
}
"""Input dtypes ONNX Runtime's ``TopK`` lacks, and the type they are sorted as."""


@register_onnx_translation(
    torch.ops.aten.sort.stable,
    reason="aten.sort.stable (torch.sort / torch.argsort with stable=True) has no TorchLib "
    "translation.",
    upstream="https://github.com/pytorch/pytorch/issues/95613",
)
def aten_sort_stable(
    self: TensorType, stable: bool = True, dim: int = -1, descending: bool = False
) -> tuple[TensorType, INT64]:
    """``aten::sort.stable`` as a full-length ``TopK``.

    Args:
        self: ``[..., n, ...]`` with the sorted axis ``n`` at ``dim``; any real or bool dtype.
        stable: ignored: ``TopK`` is stable.
        dim: the axis to sort along (negative counts from the end).
        descending: largest first when True.

    Returns:
        ``(values, indices)``, both shaped like ``self``; ``indices`` is int64; equal elements
        keep their input order.

    Source: https://github.com/pytorch/pytorch/issues/95613
    """
    rank = len(self.shape)
    if rank == 0:
        return op.Identity(self), op.Constant(value=ir.tensor(0, dtype=ir.DataType.INT64))
    dim = dim % rank
    dtype = self.dtype
    keys = op.Cast(self, to=_SORTABLE_AS[dtype]) if dtype in _SORTABLE_AS else self
    n = op.Shape(self, start=dim, end=dim + 1)
    values, indices = op.TopK(keys, n, axis=dim, largest=descending, sorted=True)
    if dtype in _SORTABLE_AS:
        values = op.Cast(values, to=dtype)
    return values, indices
