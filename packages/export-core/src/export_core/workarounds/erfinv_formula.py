"""``aten.erfinv`` as a rational approximation in ops both backends run.

``torch.erfinv`` (and ``Normal.icdf``, which calls it: Gemma 3n's activation sparsity takes the
normal quantile of its target sparsity) has no ONNX operator or ``torch.onnx`` function
(translation: ``DispatchError: No ONNX function found for prims.erf_inv``) and is not Core ATen
(ExecuTorch lowering: ``SpecViolationError: aten.erfinv.default``). The capture replaces each
``aten.erfinv`` node by M. Giles' single-precision approximation ("Approximating the erfinv
function", GPU Computing Gems, 2011): with ``w = -log((1 - x) * (1 + x))``, a degree-8
polynomial in ``w - 2.5`` for ``w < 5`` and in ``sqrt(w) - 3`` otherwise, times ``x``; ``+-inf``
at ``x = +-1`` and NaN outside ``[-1, 1]``, as ``torch.erfinv``. Over ``[-1, 1]`` in float32 the
largest error against a float64 ``erfinv`` is 2.7e-7 relative (``torch.erfinv`` in float32:
1.2e-7 absolute). Fixed once at capture, for both backends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..fixes import call_before
from ..registry import register_fx_node_fix

__all__ = ["erfinv_approximation", "erfinv_as_polynomial"]

_aten = torch.ops.aten

_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
            -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
"""Coefficients in ``w - 2.5`` for ``w < 5``, highest degree first (Giles 2011)."""
_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
         -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)
"""Coefficients in ``sqrt(w) - 3`` for ``w >= 5``, highest degree first (Giles 2011)."""

_UPSTREAM = "https://github.com/pytorch/pytorch/issues/104392"
"""Special functions without an ONNX operator fail ``torch.onnx`` (``erfc`` there; ``erfinv`` is
in the same state, and ExecuTorch's Core ATen opset lacks it too)."""


def erfinv_approximation(x: Any, op: Callable[..., Any] | None = None) -> Any:
    """Giles' approximation of ``erfinv(x)``, element-wise.

    Args:
        x: a floating tensor of any shape (or an FX node, with ``op``).
        op: ``op(target, *args)`` applies an ATen overload; default: call it (eager). The
            capture fix passes one that inserts graph nodes.

    Returns:
        ``erfinv(x)``, the shape and dtype of ``x``: ``+-inf`` at ``+-1``, NaN outside
        ``[-1, 1]``.

    Source: M. Giles, "Approximating the erfinv function" (2011); the ops it avoids:
        https://github.com/pytorch/pytorch/issues/104392
    """
    call = op or (lambda target, *args: target(*args))
    mul, add = _aten.mul.Tensor, _aten.add.Tensor

    def polynomial(t: Any, coefficients: tuple[float, ...]) -> Any:
        p = call(add, call(mul, t, coefficients[0]), coefficients[1])
        for c in coefficients[2:]:
            p = call(add, call(mul, p, t), c)
        return p

    one_minus_x = call(add, call(_aten.neg.default, x), 1.0)
    w = call(_aten.neg.default, call(_aten.log.default, call(mul, one_minus_x, call(add, x, 1.0))))
    central = polynomial(call(_aten.sub.Tensor, w, 2.5), _CENTRAL)
    tail = polynomial(call(_aten.sub.Tensor, call(_aten.sqrt.default, w), 3.0), _TAIL)
    value = call(mul, call(_aten.where.self, call(_aten.lt.Scalar, w, 5.0), central, tail), x)
    # at x = +-1, w = inf and the tail polynomial's sign is that of its leading term
    edge = call(_aten.eq.Scalar, call(_aten.abs.default, x), 1.0)
    return call(_aten.where.self, edge, call(mul, x, float("inf")), value)


@register_fx_node_fix(
    "dynamo",
    _aten.erfinv.default,
    stage="capture_node_fixes",
    reason=(
        "erfinv (Normal.icdf: Gemma 3n's activation sparsity) has no ONNX function (translation "
        "fails) and is not Core ATen (ExecuTorch lowering fails); it becomes Giles' rational "
        "approximation (log, sqrt, polynomials, where: 2.7e-7 relative in float32)"
    ),
    upstream=_UPSTREAM,
)
def erfinv_as_polynomial(node: torch.fx.Node) -> bool:
    """Replace ``aten.erfinv.default(x)`` by the nodes of :func:`erfinv_approximation`.

    Args:
        node: an ``aten.erfinv.default`` call; ``x`` a floating tensor of any shape.

    Returns:
        True when the node was replaced (``x`` is a node with a fake value).

    Source: https://github.com/pytorch/pytorch/issues/104392
    """
    (x,) = node.args
    if not isinstance(x, torch.fx.Node) or "val" not in x.meta:
        return False
    result = erfinv_approximation(x, lambda target, *args: call_before(node, target, *args))
    node.replace_all_uses_with(result)
    node.graph.erase_node(node)
    return True
