"""FX node fix: attention in ops XNNPACK delegates, so its score-sized work stays in the delegate.

XNNPACK's partitioner has no config for ``scaled_dot_product_attention``, so the edge lowering
decomposes it with torch's math decomposition. That decomposition guards fully masked rows with
``_safe_softmax``: ``eq(scores, -inf)``, ``logical_not``, ``any``, ``logical_not`` and ``where``
over the ``(N, H, L, S)`` scores, none of which XNNPACK delegates; it also expands a boolean mask
to the scores with a ``where``, scales each operand with ``mul.Scalar`` (XNNPACK delegates
``mul.Tensor`` only) and expands each operand to its own shape (``expand_copy``, a copy). On the
embedded default (6 layers) those were 120 portable kernels; without them the program runs a
quarter faster (ETDump: 12.3 ms to 9.3 ms per call on a (3, 22) batch).

The fix replaces each attention node (in place, no re-trace) by another decomposition of the
same function, for the operands it covers (floating point, no dropout, rank >= 3, key and value
with the query's batch dims once grouped-query heads are repeated):

* scores ``bmm(q * scale, k^T)`` on ``(N*H, L, E)`` reshapes, no ``expand``;
* a boolean mask becomes the additive mask ``where(mask, 0, lowest)`` on the mask's own shape
  (``(N, 1, L, S)`` for a padding mask), ``lowest`` a finite minimum (float32's); a float mask is
  clamped to it. A finite minimum keeps a fully masked row a finite softmax instead of NaN;
* that row is then zeroed by a mask-sized factor, ``any(mask, -1)`` (``any(mask != -inf, -1)``
  for a float mask), multiplied into the probabilities: the value ``_safe_softmax`` gives it.
  Other rows are unchanged: ``exp(lowest + s - max)`` underflows to 0 as ``exp(-inf)`` does.

Everything score-sized (``bmm``, ``add``, ``_softmax``, ``mul``) is delegated; the mask-sized
``where`` / ``any`` run on portable kernels. The result is laid out as the attention node's value
was (the CPU kernel's ``(N, L, H, E)`` memory order), so the views the capture resolved on it
stay valid. Operands it does not cover keep torch's decomposition; portable-only backends are
left alone (the same kernels would run either way).

Source: https://github.com/pytorch/executorch/issues/4461 (XNNPACK has no attention op; the
lowering gets torch's math decomposition)
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from export_core.fixes import call_before
from export_core.registry import register_fx_node_fix

from .view_after_sdpa import Op, in_kernel_layout, kernel_layout

__all__ = ["attention_for_xnnpack", "attention_in_delegated_ops", "covers"]

_aten = torch.ops.aten
_SDPA = _aten.scaled_dot_product_attention.default
_ARGS = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
_DEFAULTS = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None,
             "enable_gqa": False}


def _eager(target: Any, *args: Any, **kwargs: Any) -> Any:
    return target(*args, **kwargs)


def _val(x: Any) -> Any:
    """The tensor behind ``x``: its fake value for an FX node, ``x`` itself otherwise."""
    return x.meta["val"] if isinstance(x, torch.fx.Node) else x


def _size(x: Any, dim: int, op: Op) -> Any:
    """``x.size(dim)``: an int when static, else a ``sym_size`` (node, under the node fix)."""
    size = _val(x).shape[dim]
    return size if isinstance(size, int) else op(_aten.sym_size.int, x, dim)


def _same_sizes(a: Any, b: Any) -> bool:
    """Whether two size sequences are equal without a guard (symbolic: the same expression)."""
    return len(a) == len(b) and all(statically_known_true(x == y) for x, y in zip(a, b))


def _group(x: torch.Tensor, heads: Any) -> int | None:
    """How often grouped-query attention repeats each of ``x``'s heads (dim -3) to reach
    ``heads``; None when the head counts are not static multiples."""
    groups = x.shape[-3]
    if not isinstance(heads, int) or not isinstance(groups, int) or groups <= 0 or heads % groups:
        return None
    return heads // groups


def covers(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
           attn_mask: torch.Tensor | None, dropout_p: float, is_causal: bool,
           enable_gqa: bool) -> bool:
    """Whether :func:`attention_for_xnnpack` takes these operands (tensors or fake values)."""
    if (dropout_p != 0.0 or query.dim() < 3 or not query.dtype.is_floating_point
            or not isinstance(query.shape[-1], int) or key.dim() != query.dim()
            or value.dim() != query.dim() or (is_causal and attn_mask is not None)
            or (attn_mask is not None and attn_mask.dim() > query.dim())):
        return False
    batch = tuple(query.shape[:-2])
    if enable_gqa:
        if query.dim() < 4 or _group(key, query.shape[-3]) is None or _group(
                value, query.shape[-3]) is None:
            return False
        batch = batch[:-1]
        return (_same_sizes(tuple(key.shape[:-3]), batch)
                and _same_sizes(tuple(value.shape[:-3]), batch))
    return _same_sizes(tuple(key.shape[:-2]), batch) and _same_sizes(tuple(value.shape[:-2]), batch)


def _additive_mask(mask: Any, dtype: torch.dtype, op: Op) -> tuple[Any, Any]:
    """``(additive mask, row keep factor)`` of a boolean or float ``attn_mask``.

    The additive mask has ``mask``'s shape, ``0`` where a query attends and ``lowest`` where it
    does not (a float mask: its values, ``-inf`` raised to ``lowest``), ``lowest`` the finite
    minimum of ``dtype`` or of float32, whichever is closer to 0 (``where`` builds it in float32);
    the keep factor has that shape with the last dim 1: ``1`` for a row that attends to some key,
    ``0`` for a row masked throughout (zeroed after the softmax, as ``_safe_softmax`` does).
    """
    lowest = max(torch.finfo(dtype).min, torch.finfo(torch.float32).min)
    if _val(mask).dtype == torch.bool:
        attends = mask
        additive = op(_aten.where.Scalar, mask, 0.0, lowest)
    else:
        attends = op(_aten.ne.Scalar, mask, float("-inf"))
        additive = op(_aten.clamp.default, mask, lowest)
    if _val(additive).dtype != dtype:
        additive = op(_aten.to.dtype, additive, dtype)
    keep = op(_aten.to.dtype, op(_aten.any.dim, attends, -1, True), dtype)
    return additive, keep


def attention_for_xnnpack(
    query: Any,
    key: Any,
    value: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    op: Op | None = None,
) -> Any:
    """``scaled_dot_product_attention`` in ops XNNPACK delegates (see the module docstring).

    Args:
        query: ``(*batch, L, E)``, floating point, ``batch`` one dim or more (``(N, H)`` for
            multi-head attention), ``E`` static.
        key: ``(*batch, S, E)``; with ``enable_gqa``, ``(N, H_kv, S, E)``, ``H`` a multiple of
            ``H_kv``.
        value: ``(*batch, S, Ev)`` (grouped as ``key``).
        attn_mask: boolean (True: attend) or additive float, broadcastable to
            ``(*batch, L, S)``; ``None``: no mask.
        dropout_p: 0 (inference).
        is_causal: a lower-triangular (top-left aligned) mask; ``attn_mask`` is then ``None``.
        scale: the scores' factor; ``None``: ``1 / sqrt(E)``.
        enable_gqa: repeat the key / value heads to the query's.
        op: ``op(target, *args, **kwargs)`` applies an ATen overload; default: call it (eager
            tensors). The node fix passes one that inserts graph nodes.

    Returns:
        ``(*batch, L, Ev)``, contiguous, ``query``'s dtype: torch's result, with a fully masked
        row 0 as ``_safe_softmax`` makes it.

    Raises:
        ValueError: operands :func:`covers` refuses.
    """
    op = op or _eager
    q, k, v = _val(query), _val(key), _val(value)
    mask = _val(attn_mask) if attn_mask is not None else None
    if not covers(q, k, v, mask, dropout_p, is_causal, enable_gqa):
        raise ValueError("attention_for_xnnpack does not cover these operands")
    rank = q.dim()
    if enable_gqa:
        key_group, value_group = _group(k, q.shape[-3]), _group(v, q.shape[-3])
        if key_group != 1:
            key = op(_aten.repeat_interleave.self_int, key, key_group, -3)
        if value_group != 1:
            value = op(_aten.repeat_interleave.self_int, value, value_group, -3)
    width, value_width = q.shape[-1], v.shape[-1]
    length, source = _size(query, -2, op), _size(key, -2, op)
    batch = [_size(query, d, op) for d in range(rank - 2)]
    factor = scale if scale is not None else 1.0 / math.sqrt(width)
    additive = keep = None
    if is_causal:  # tril: query i attends to keys 0..i; none is masked throughout
        rows = op(_aten.unsqueeze.default, op(_aten.arange.default, length), -1)
        attn_mask = op(_aten.ge.Tensor, rows, op(_aten.arange.default, source))
        additive, _ = _additive_mask(attn_mask, q.dtype, op)
    elif attn_mask is not None:
        additive, keep = _additive_mask(attn_mask, q.dtype, op)
    scaled = op(_aten.mul.Tensor, query, factor)
    keys_t = op(_aten.transpose.int, key, -2, -1)
    scores = op(_aten.bmm.default, op(_aten.reshape.default, scaled, [-1, length, width]),
                op(_aten.reshape.default, keys_t, [-1, width, source]))
    scores = op(_aten.view.default, scores, [*batch, length, source])
    if additive is not None:
        scores = op(_aten.add.Tensor, scores, additive)
    probs = op(_aten._softmax.default, scores, -1, False)
    if keep is not None:
        probs = op(_aten.mul.Tensor, probs, keep)
    out = op(_aten.bmm.default, op(_aten.reshape.default, probs, [-1, length, source]),
             op(_aten.reshape.default, value, [-1, source, value_width]))
    return op(_aten.view.default, out, [*batch, length, value_width])


@register_fx_node_fix(
    "executorch.xnnpack",
    _SDPA,
    reason="XNNPACK has no attention op, and torch's decomposition of it guards fully masked "
    "rows with eq / any / logical_not / where over the (N, H, L, S) scores and copies each "
    "operand with expand, ops the XNNPACK partitioner leaves to portable kernels (a quarter of "
    "a BERT's run time); attention becomes bmm / add / softmax / mul, a masked row zeroed by a "
    "mask-sized factor",
    upstream="https://github.com/pytorch/executorch/issues/4461",
)
def attention_in_delegated_ops(node: torch.fx.Node) -> bool:
    """Replace ``aten.scaled_dot_product_attention.default`` by the nodes of
    :func:`attention_for_xnnpack` (in place: no re-trace; each new node has the fake value of its
    call), laid out as the node's value was.

    Args:
        node: an attention call; ``query`` ``(*batch, L, E)``, ``key`` ``(*batch, S, E)``,
            ``value`` ``(*batch, S, Ev)``, float.

    Returns:
        True when the node was replaced; False for operands :func:`covers` refuses or an output
        layout other than contiguous or the CPU kernel's (torch's decomposition stays).

    Source: https://github.com/pytorch/executorch/issues/4461
    """
    bound = dict(_DEFAULTS, **dict(zip(_ARGS, node.args)), **node.kwargs)
    operands = [bound.get(name) for name in ("query", "key", "value")]
    want = node.meta.get("val")
    if not isinstance(want, torch.Tensor) or not all(
            isinstance(x, torch.fx.Node) and isinstance(x.meta.get("val"), torch.Tensor)
            for x in operands):
        return False
    mask = bound["attn_mask"]
    if mask is not None and not (isinstance(mask, torch.fx.Node)
                                 and isinstance(mask.meta.get("val"), torch.Tensor)):
        return False
    q, k, v = (_val(x) for x in operands)
    if not covers(q, k, v, _val(mask) if mask is not None else None, bound["dropout_p"],
                  bound["is_causal"], bound["enable_gqa"]):
        return False
    kernel = kernel_layout(want)
    if kernel is None:
        return False

    def op(target: Any, *args: Any, **kwargs: Any) -> torch.fx.Node:
        return call_before(node, target, *args, **kwargs)

    out = attention_for_xnnpack(*operands, mask, bound["dropout_p"], bound["is_causal"],
                                bound["scale"], bound["enable_gqa"], op=op)
    if kernel:
        out = in_kernel_layout(out, op)
    node.replace_all_uses_with(out)
    node.graph.erase_node(node)
    return True
