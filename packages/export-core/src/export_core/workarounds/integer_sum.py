"""Integer sums as the last element of a running sum, so the runtimes add in the integer type.

``torch.sum`` of an integer tensor adds in the integer type and wraps past its range (BLT's
rolling n-gram hash sums ``token * prime ** position`` in int64). ONNX Runtime's ``ReduceSum``
and ExecuTorch's portable ``sum.IntList_out`` on int64 go through floating point: past 2**53 the
low bits are lost, and past the range the result saturates, so the hashes (and every embedding
looked up by them) come out silently wrong. Their running sums (``CumSum``, ``cumsum.out``) add in
the integer type. The capture rewrites each ``aten.sum`` (``default``, ``dim_IntList``) of an
int32 / int64 tensor as, per reduced axis, a ``cumsum`` and its last element (``keepdim``
kept), where every reduced axis is known to be non-empty (a sum over a possibly empty axis is
left alone: padding it would pin the sizes). Boolean sums (mask counts, which cannot pass
2**53) and floating point sums are left alone. Fixed once at capture, for both backends.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ..fixes import call_before
from ..registry import register_fx_node_fix

__all__ = ["exact_integer_sum"]

_aten = torch.ops.aten

_INTEGERS = (torch.int32, torch.int64)
"""Input dtypes whose sums can pass 2**53 (bool and small integer inputs cannot, in practice)."""

_UPSTREAM = "https://github.com/llvm/torch-mlir/pull/3894"
"""The same class of fault: integer arithmetic that torch computes in the integer type, lowered
through floating point, mismatches once it passes the float's exact range."""


@register_fx_node_fix(
    "dynamo",
    _aten.sum.default,
    _aten.sum.dim_IntList,
    stage="capture_node_fixes",
    reason=(
        "integer sums wrap in torch (BLT's rolling hash) but ONNX Runtime's ReduceSum and "
        "ExecuTorch's sum.IntList_out add int64 through floating point (low bits lost past "
        "2**53); each becomes the last element of a cumsum, which adds in the integer type"
    ),
    upstream=_UPSTREAM,
)
def exact_integer_sum(node: torch.fx.Node) -> bool:
    """Replace ``aten.sum(x)`` / ``aten.sum.dim_IntList(x, dims, keepdim=False, dtype=None)`` of
    an int32 / int64 ``x`` by ``cumsum`` over each reduced axis and the last element: the same
    shape, dtype and wrapped values.

    Returns:
        True when the node was replaced; sums of other dtypes, over an axis that may be empty,
        or with an argument without a fake value, are left alone.

    Source: https://github.com/llvm/torch-mlir/pull/3894 (integer arithmetic lowered through
        floating point)
    """
    x = node.args[0]
    out = node.meta.get("val")
    if (not isinstance(x, torch.fx.Node) or not isinstance(x.meta.get("val"), torch.Tensor)
            or not isinstance(out, torch.Tensor) or x.meta["val"].dtype not in _INTEGERS
            or out.dtype.is_floating_point):
        return False
    rank = x.meta["val"].dim()
    if node.target == _aten.sum.default:
        dims, keepdim = list(range(rank)), False
        dtype = node.kwargs.get("dtype")
    else:
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        keepdim = node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
        dtype = node.kwargs.get("dtype")
        dims = list(range(rank)) if not dims else [d % rank for d in dims]
    sizes = x.meta["val"].shape
    if rank == 0 or not all(statically_known_true(sizes[d] >= 1) for d in dims):
        return False

    def insert(target: Any, *args: Any, **kwargs: Any) -> torch.fx.Node:
        return call_before(node, target, *args, **kwargs)

    value = x if dtype is None or dtype == x.meta["val"].dtype else insert(
        _aten._to_copy.default, x, dtype=dtype)
    for d in sorted(set(dims), reverse=True):
        running = insert(_aten.cumsum.default, value, d)
        if keepdim:
            value = insert(_aten.slice.Tensor, running, d, -1, 9223372036854775807)
        else:
            value = insert(_aten.select.int, running, d, -1)
            rank -= 1
    if value.meta["val"].dtype != out.dtype:
        value = insert(_aten._to_copy.default, value, dtype=out.dtype)
    node.replace_all_uses_with(value)
    node.graph.erase_node(node)
    return True
