"""ONNX translation: floor division of symbolic sizes (``operator.floordiv`` on ``SymInt``).

Shape arithmetic in a traced graph is ``operator.floordiv(a, b)`` on ``SymInt`` s. TorchLib
lowers it to ONNX ``Div``, which truncates toward zero on integers, so any negative operand is
off by one: the ceil-division idiom ``-(-n // 4)`` gives ``n // 4`` instead of
``ceil(n / 4)`` and the artifact silently produces the wrong length. Python floors::

    -10 // 4 == -3      # ONNX Div: -2
    10 // -4 == -3      # ONNX Div: -2

With ONNX ``Mod`` (``fmod=0``: the result takes the divisor's sign, as Python's ``%``),
``a - a % b`` is an exact multiple of ``b``, so ``Div(a - a % b, b)`` is the floored quotient for
every sign combination. ``operator.mod`` itself is already lowered to that ``Mod`` and is right.

Source: https://github.com/microsoft/onnxscript/pull/2592
"""

from __future__ import annotations

import operator

from onnxscript import opset18 as op
from onnxscript.onnx_types import TensorType

from ..translations import register_onnx_translation

__all__ = ["operator_floordiv"]


def _as_value(x: TensorType | int | float) -> TensorType:
    if isinstance(x, bool | int):
        return op.Constant(value_int=int(x))
    if isinstance(x, float):
        return op.Constant(value_float=x)
    return x


@register_onnx_translation(
    operator.floordiv,
    reason="TorchLib lowers SymInt floor division to ONNX Div, which truncates toward zero, so "
    "negative operands (the ceil-division idiom -(-n // k)) give wrong sizes.",
    upstream="https://github.com/microsoft/onnxscript/pull/2592",
)
def operator_floordiv(self: TensorType, other: TensorType) -> TensorType:
    """``self // other`` on symbolic sizes, rounding toward negative infinity.

    Args:
        self: the dividend, a 0-d int64 (``SymInt``) or float (``SymFloat``) value or a number.
        other: the divisor, likewise.

    Returns:
        A 0-d value of the same type: ``floor(self / other)``.

    Source: https://github.com/microsoft/onnxscript/pull/2592
    """
    a, b = _as_value(self), _as_value(other)
    if a.dtype is not None and a.dtype.is_floating_point():
        return op.Floor(op.Div(a, op.CastLike(b, a)))
    return op.Div(op.Sub(a, op.Mod(a, b)), b)
