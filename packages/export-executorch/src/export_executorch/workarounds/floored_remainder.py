"""FX node fix: integer ``remainder`` as ``a - floor_divide(a, b) * b``, the sign of the divisor.

``torch.remainder`` (Python's ``%``) gives a result with the sign of the divisor:
``-20 % 7 == 1``. ExecuTorch's portable ``remainder.Scalar_out`` / ``remainder.Tensor_out``
kernels return C's truncated remainder for integer tensors (``-6``, the sign of the dividend;
floating point tensors are right), so a program that takes ``%`` of a negative integer (a
wrapped hash, a relative position) runs without error and returns wrong values. The fix
rewrites each integer ``remainder`` as ``a - div(a, b, rounding_mode="floor") * b``, whose
floor division the portable kernels compute as torch does. The same fault was fixed in
torch-mlir's lowering (llvm/torch-mlir#3581).

Source: https://github.com/llvm/torch-mlir/pull/3581 (``remainder`` lowered to a C-style
modulus; ExecuTorch's portable kernel has the same behaviour, no upstream issue found)
"""

from __future__ import annotations

import torch

from export_core.fixes import call_before
from export_core.registry import register_fx_node_fix

from ..stages import BACKEND

__all__ = ["floored_integer_remainder"]

_aten = torch.ops.aten


@register_fx_node_fix(
    BACKEND,
    _aten.remainder.Scalar,
    _aten.remainder.Tensor,
    reason="the portable remainder kernels return C's truncated remainder for integers (the "
    "sign of the dividend; torch: the sign of the divisor), silently wrong for negative "
    "operands; integer remainder becomes a - floor_divide(a, b) * b",
    upstream="https://github.com/llvm/torch-mlir/pull/3581",
)
def floored_integer_remainder(node: torch.fx.Node) -> bool:
    """Replace an integer ``aten.remainder.Scalar`` / ``.Tensor`` by ``a - div(a, b,
    rounding_mode="floor") * b`` (same shape and integer dtype as the node's result).

    Returns:
        True when the node was replaced; floating point results are left alone.

    Source: https://github.com/llvm/torch-mlir/pull/3581
    """
    val = node.meta.get("val")
    if (not isinstance(val, torch.Tensor) or val.dtype.is_floating_point or val.dtype.is_complex
            or val.dtype == torch.bool or len(node.args) != 2 or node.kwargs):
        return False
    a, b = node.args
    if not isinstance(a, torch.fx.Node) or "val" not in a.meta:
        return False
    if isinstance(b, torch.fx.Node) and not isinstance(b.meta.get("val"), torch.Tensor):
        return False  # a symbolic-int divisor: leave it
    quotient = call_before(node, _aten.div.Tensor_mode, a, b, rounding_mode="floor")
    result = call_before(node, _aten.sub.Tensor, a, call_before(node, _aten.mul.Tensor, quotient, b))
    if result.meta["val"].dtype != val.dtype:
        result = call_before(node, _aten._to_copy.default, result, dtype=val.dtype)
    node.replace_all_uses_with(result)
    node.graph.erase_node(node)
    return True
