"""Running extrema (``cummax`` / ``cummin``) and set membership (``isin``) in plain comparisons.

Grounding DINO's text masks find each token's previous and next delimiter with
``torch.cummax`` / ``torch.cummin`` over the sequence and the delimiters with ``torch.isin``.
None of the three survives both backends: ``aten.cummax`` / ``aten.cummin`` are not Core ATen
(ExecuTorch lowering: ``SpecViolationError``) and have no ONNX function; ``aten.isin`` is
decomposed by both lowerings into ``sort`` + ``searchsorted`` (no ONNX function for
``searchsorted``, no ExecuTorch kernel for ``sort``).

At capture each becomes comparisons, ``where`` and reductions, which both backends run:

- ``cummax(x, dim)`` / ``cummin``: the extremum over a lower-triangular mask of the ``(n, n)``
  pairs along ``dim``, and its index as the last position ``j <= i`` that holds it (``torch``
  keeps the later index on ties). Memory: ``n`` times the input's.
- ``isin(elements, test_elements)``: ``(elements[..., None] == test_elements.flatten()).any(-1)``
  (``invert`` negates it), ``torch``'s own form for short ``test_elements``.

NaN inputs are not propagated the way ``torch.cummax`` does (a NaN is never the maximum here).

Source: https://github.com/pytorch/pytorch/issues/158113 (ops outside the Core ATen opset fail
ExecuTorch lowering; cummax / cummin have no decomposition into it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..fixes import call_before
from ..registry import register_fx_node_fix

__all__ = ["cumulative_extremum", "cumulative_extremum_as_comparisons", "isin_as_comparisons",
           "membership"]

_aten = torch.ops.aten
_UPSTREAM = "https://github.com/pytorch/pytorch/issues/158113"


def _lowest(dtype: torch.dtype, largest: bool) -> float | int | bool:
    """The value no element loses to: ``-inf`` / ``min`` for a maximum, ``+inf`` / ``max`` for
    a minimum."""
    if dtype == torch.bool:
        return not largest
    if dtype.is_floating_point:
        return float("-inf") if largest else float("inf")
    info = torch.iinfo(dtype)
    return info.min if largest else info.max


def cumulative_extremum(
    x: Any, dim: int, largest: bool, op: Callable[..., Any] | None = None,
) -> tuple[Any, Any]:
    """``torch.cummax`` (``largest``) or ``torch.cummin`` of ``x`` along ``dim``.

    Args:
        x: a tensor of any shape with ``n`` at ``dim`` (or an FX node, with ``op``).
        dim: the axis (negative counts from the end).
        largest: maximum (``True``) or minimum.
        op: ``op(target, *args)`` applies an ATen overload; default: call it (eager). The
            capture fix passes one that inserts graph nodes.

    Returns:
        ``(values, indices)``: the shape of ``x``, ``x``'s dtype and int64, equal to
        ``torch.cummax`` / ``torch.cummin`` for inputs without NaN.

    Source: https://github.com/pytorch/pytorch/issues/158113
    """
    call = op or (lambda target, *args: target(*args))
    val = x.meta["val"] if isinstance(x, torch.fx.Node) else x
    rank = max(val.dim(), 1)
    dim = dim % rank
    n = call(_aten.sym_size.int, x, dim)
    positions = call(_aten.arange.default, n)
    # earlier[i, j] = j <= i, shaped (n_i, n_j, 1, ...) to broadcast at (dim, dim + 1)
    earlier = call(_aten.le.Tensor, call(_aten.unsqueeze.default, positions, 0),
                   call(_aten.unsqueeze.default, positions, 1))
    index = positions
    for _ in range(rank - dim - 1):  # trailing axes (no view: its sizes would be graph nodes)
        earlier = call(_aten.unsqueeze.default, earlier, -1)
        index = call(_aten.unsqueeze.default, index, -1)
    pairs = call(_aten.unsqueeze.default, x, dim)  # x_j along dim + 1
    masked = call(_aten.where.ScalarOther, earlier, pairs, _lowest(val.dtype, largest))
    reduce = _aten.amax.default if largest else _aten.amin.default
    values = call(reduce, masked, [dim + 1])
    holds = call(_aten.logical_and.default, earlier,
                 call(_aten.eq.Tensor, pairs, call(_aten.unsqueeze.default, values, dim + 1)))
    indices = call(_aten.amax.default, call(_aten.where.ScalarOther, holds, index, -1), [dim + 1])
    return values, indices


def membership(elements: Any, test_elements: Any, invert: bool,
               op: Callable[..., Any] | None = None) -> Any:
    """``torch.isin(elements, test_elements, invert=invert)`` as an equality and an ``any``.

    Args:
        elements: a tensor of any shape (or an FX node, with ``op``).
        test_elements: a tensor of any shape, the values looked for.
        invert: negate the result.
        op: as :func:`cumulative_extremum`.

    Returns:
        A ``torch.bool`` tensor shaped like ``elements``.
    """
    call = op or (lambda target, *args: target(*args))
    flat = call(_aten.view.default, test_elements, [-1])
    found = call(_aten.any.dim, call(_aten.eq.Tensor, call(_aten.unsqueeze.default, elements, -1),
                                     flat), -1)
    return call(_aten.logical_not.default, found) if invert else found


def _insert(node: torch.fx.Node) -> Callable[..., Any]:
    return lambda target, *args: call_before(node, target, *args)


@register_fx_node_fix(
    "dynamo",
    _aten.cummax.default, _aten.cummin.default,
    stage="capture_node_fixes",
    reason=(
        "cummax / cummin are not Core ATen (ExecuTorch lowering fails) and have no ONNX "
        "function (translation fails); each becomes the extremum over a lower-triangular mask "
        "of the pairs along its axis"
    ),
    upstream=_UPSTREAM,
)
def cumulative_extremum_as_comparisons(node: torch.fx.Node) -> bool:
    """Replace ``aten.cummax(x, dim)`` / ``aten.cummin`` by the nodes of
    :func:`cumulative_extremum` (its ``getitem`` users read the new values and indices).

    Returns:
        True when the node was replaced (``x`` is a node with a fake value).

    Source: https://github.com/pytorch/pytorch/issues/158113
    """
    x, dim = node.args[0], node.args[1]
    if not isinstance(x, torch.fx.Node) or "val" not in x.meta or not isinstance(dim, int):
        return False
    if any(user.op != "call_function" or getattr(user.target, "__name__", "") != "getitem"
           for user in node.users):
        return False
    values, indices = cumulative_extremum(x, dim, node.target == _aten.cummax.default,
                                          _insert(node))
    for user in list(node.users):
        user.replace_all_uses_with(values if user.args[1] == 0 else indices)
        node.graph.erase_node(user)
    node.graph.erase_node(node)
    return True


@register_fx_node_fix(
    "dynamo",
    _aten.isin.Tensor_Tensor,
    stage="capture_node_fixes",
    reason=(
        "both lowerings decompose isin into sort + searchsorted (no ONNX function for "
        "searchsorted: translation fails; no ExecuTorch kernel for sort); it becomes an equality "
        "against every test element and an any"
    ),
    upstream=_UPSTREAM,
)
def isin_as_comparisons(node: torch.fx.Node) -> bool:
    """Replace ``aten.isin.Tensor_Tensor(elements, test_elements, assume_unique=False,
    invert=False)`` by the nodes of :func:`membership`.

    Returns:
        True when the node was replaced.
    """
    elements, test_elements = node.args[0], node.args[1]
    if not all(isinstance(a, torch.fx.Node) and "val" in a.meta for a in (elements, test_elements)):
        return False
    invert = bool(node.kwargs.get("invert", node.args[3] if len(node.args) > 3 else False))
    result = membership(elements, test_elements, invert, _insert(node))
    node.replace_all_uses_with(result)
    node.graph.erase_node(node)
    return True
