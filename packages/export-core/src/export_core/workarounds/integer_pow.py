"""Integer ``pow`` as exact multiplications (wrapping like torch's) in ops both backends run.

``torch.pow`` on integer tensors multiplies in the integer type, so a result past the type's
range wraps modulo ``2**bits`` (BLT's rolling n-gram hash raises 10-digit primes to the powers
``0..group_size-1`` in int64 and keeps the wrapped value). ONNX Runtime's and ExecuTorch's
integer ``Pow`` go through floating point instead, which loses the low bits once the result
passes 2**53 and saturates past the range: the hashes, and every embedding looked up by them,
differ (torch-mlir#3894 describes the same mismatch). The capture replaces each integer ``pow``
by square-and-multiply over the exponent's bits: ``mul`` / ``where`` / floor division by 2 /
``remainder``, which wrap as torch does on both backends. Fixed once at capture, for both.
Floating point ``pow`` is left alone.
"""

from __future__ import annotations

from typing import Any

import torch

from ..fixes import call_before
from ..registry import register_fx_node_fix

__all__ = ["exact_integer_pow", "integer_pow_by_squaring"]

_aten = torch.ops.aten

_UPSTREAM = "https://github.com/llvm/torch-mlir/pull/3894"
"""torch computes integer ``pow`` in the integer type; runtimes that compute it in floating point
mismatch once it overflows."""


def _exponent_bits(dtype: torch.dtype) -> int:
    """How many bits of a non-negative exponent of ``dtype`` can be set."""
    info = torch.iinfo(dtype)
    return int(info.max).bit_length()


def _arange_bound(exponent: Any) -> int | None:
    """The largest value of an exponent made by ``aten.arange`` with int bounds (``prime **
    arange(n)``: BLT's hash), else ``None``."""
    if not isinstance(exponent, torch.fx.Node) or exponent.op != "call_function":
        return None
    args = exponent.args
    if exponent.target == _aten.arange.default and isinstance(args[0], int):
        start, end, step = 0, args[0], 1
    elif exponent.target in (_aten.arange.start, _aten.arange.start_step) and all(
            isinstance(a, int) for a in args):
        start, end, step = args[0], args[1], (args[2] if len(args) > 2 else 1)
    else:
        return None
    values = range(start, end, step)
    return max(values) if values else 0


def integer_pow_by_squaring(base: Any, exponent: Any, dtype: torch.dtype, op: Any = None,
                            max_exponent: int | None = None) -> Any:
    """``base ** exponent`` in integer ``dtype``, wrapping as torch does, by square-and-multiply.

    Args:
        base: an integer tensor (or FX node) or a Python int.
        exponent: an integer tensor (or FX node) with non-negative values (torch refuses negative
            integer powers), or a non-negative Python int.
        dtype: the result's integer dtype.
        op: ``op(target, *args)`` applies an ATen overload; default: call it (eager). The
            capture fix passes one that inserts graph nodes.
        max_exponent: the largest value a tensor exponent takes, when known (fewer bits to
            visit); default: any value of ``dtype``.

    Returns:
        The broadcast of ``base`` and ``exponent``, in ``dtype``. A tensor exponent costs one
        ``remainder``, ``eq``, ``where``, floor division and two ``mul`` per bit visited.

    Source: https://github.com/llvm/torch-mlir/pull/3894
    """
    call = op or (lambda target, *args, **kwargs: target(*args, **kwargs))
    bits = _exponent_bits(dtype)
    if max_exponent is not None:
        bits = max(1, min(bits, max_exponent.bit_length()))
    if isinstance(exponent, int):
        result, square, e = None, base, exponent
        while e:
            if e & 1:
                result = square if result is None else call(_aten.mul.Tensor, result, square)
            e >>= 1
            if e:
                square = call(_aten.mul.Tensor, square, square)
        if result is None:  # x ** 0 == 1
            return call(_aten.add.Tensor, call(_aten.mul.Tensor, base, 0), 1)
        return result
    if isinstance(base, int):
        # the powers base ** (2 ** k) wrapped to dtype, known now
        info = torch.iinfo(dtype)
        modulus, squares, value = 1 << info.bits, [], base
        for _ in range(bits):
            wrapped = value % modulus
            squares.append(wrapped - modulus if wrapped > info.max else wrapped)
            value = wrapped * wrapped
    result = call(_aten.add.Tensor, call(_aten.mul.Tensor, exponent, 0), 1)  # ones, its shape
    if not isinstance(base, int):
        square = base
    e = exponent
    for k in range(bits):
        bit_set = call(_aten.eq.Scalar, call(_aten.remainder.Scalar, e, 2), 1)
        factor = squares[k] if isinstance(base, int) else square
        result = call(_aten.where.self, bit_set, call(_aten.mul.Tensor, result, factor), result)
        if k + 1 < bits:
            e = call(_aten.div.Tensor_mode, e, 2, rounding_mode="floor")
            if not isinstance(base, int):
                square = call(_aten.mul.Tensor, square, square)
    return result


def _integer_result(node: torch.fx.Node) -> torch.dtype | None:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor) and not val.dtype.is_floating_point \
            and not val.dtype.is_complex and val.dtype != torch.bool:
        return val.dtype
    return None


@register_fx_node_fix(
    "dynamo",
    _aten.pow.Tensor_Tensor,
    _aten.pow.Tensor_Scalar,
    _aten.pow.Scalar,
    stage="capture_node_fixes",
    reason=(
        "integer pow wraps in torch (BLT's rolling hash) but ONNX Runtime and ExecuTorch compute "
        "it in floating point (low bits lost past 2**53, saturated past the range); it becomes "
        "square-and-multiply in integer mul / where / floor division, which wrap as torch does"
    ),
    upstream=_UPSTREAM,
)
def exact_integer_pow(node: torch.fx.Node) -> bool:
    """Replace an integer ``aten.pow`` (``Tensor_Tensor``, ``Tensor_Scalar`` with an int
    exponent, ``Scalar`` with an int base) by the nodes of :func:`integer_pow_by_squaring`.

    Args:
        node: an ``aten.pow`` call whose result is an integer tensor (any shape).

    Returns:
        True when the node was replaced; floating point, complex and bool results, and
        arguments without fake values, are left alone.

    Source: https://github.com/llvm/torch-mlir/pull/3894
    """
    dtype = _integer_result(node)
    if dtype is None or len(node.args) != 2 or node.kwargs:
        return False
    base, exponent = node.args
    for arg in (base, exponent):
        if isinstance(arg, torch.fx.Node):
            if "val" not in arg.meta:
                return False
        elif not isinstance(arg, int) or isinstance(arg, bool):
            return False
    if isinstance(exponent, int) and exponent < 0:
        return False  # torch refuses it; leave the error to the runtime as torch would raise

    def insert(target: Any, *args: Any, **kwargs: Any) -> torch.fx.Node:
        return call_before(node, target, *args, **kwargs)

    def as_dtype(arg: Any) -> Any:
        if isinstance(arg, torch.fx.Node) and arg.meta["val"].dtype != dtype:
            return insert(_aten._to_copy.default, arg, dtype=dtype)
        return arg

    result = integer_pow_by_squaring(as_dtype(base), as_dtype(exponent), dtype, insert,
                                     max_exponent=_arange_bound(exponent))
    node.replace_all_uses_with(result)
    node.graph.erase_node(node)
    return True
