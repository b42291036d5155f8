"""ONNX translation: scaled dot-product attention whose mask hides every key of a query row.

Eager ``F.scaled_dot_product_attention`` returns 0 for a query row whose mask hides every key
(a ``-inf`` additive mask row, or an all-``False`` boolean mask row): its softmax is "safe".
The TorchLib translation gives NaN for the ``-inf`` float mask (ONNX ``Softmax`` of an all-``-inf``
row), and for the boolean mask it substitutes the dtype's lowest finite value for ``-inf``, so
the row becomes a uniform average of ``value`` instead of 0. It also rejects ``is_causal`` with
an ``attn_mask``, which eager combines.

This translation follows eager's math kernel::

    scores = (q * sqrt(scale)) @ (k * sqrt(scale)).T             # [..., L, S]
    scores = scores + mask          (float mask)
    scores = where(mask, scores, -inf)  (bool mask; True = attend)
    scores = where(causal, scores, -inf)  (is_causal; causal = tril(ones(L, S)))
    weights = softmax(scores) with rows whose max is -inf set to 0
    out = weights @ v                                              # [..., L, Ev]

with ``q: [..., Hq, L, E]``, ``k: [..., Hk, S, E]``, ``v: [..., Hk, S, Ev]``; under
``enable_gqa`` ``k`` and ``v`` are repeated ``Hq // Hk`` times along the head axis.

Source: https://github.com/microsoft/onnxscript/pull/2479
"""

from __future__ import annotations

import math

import onnx_ir as ir
import torch
from onnxscript import opset18 as op
from onnxscript.onnx_types import TensorType

from ..translations import register_onnx_translation

__all__ = ["aten_scaled_dot_product_attention"]


def _swap_last_two(rank: int) -> list[int]:
    return [*range(rank - 2), rank - 1, rank - 2]


def _repeat_heads(x: TensorType, groups: TensorType) -> TensorType:
    """``x.repeat_interleave(groups, dim=-3)``: ``[..., H, S, E]`` -> ``[..., H * groups, S, E]``."""
    tiled = op.Expand(
        op.Unsqueeze(x, [-3]),
        op.Concat(op.Shape(x, end=-2), groups, op.Shape(x, start=-2), axis=0),
    )
    heads = op.Concat(
        op.Shape(x, end=-3), op.Constant(value_ints=[-1]), op.Shape(x, start=-2), axis=0
    )
    return op.Reshape(tiled, heads)


@register_onnx_translation(
    torch.ops.aten.scaled_dot_product_attention.default,
    reason="TorchLib's SDPA gives NaN (float -inf mask) or a uniform average (bool mask) for a "
    "query row that masks every key, where eager returns 0.",
    upstream="https://github.com/microsoft/onnxscript/pull/2479",
)
def aten_scaled_dot_product_attention(
    query: TensorType,
    key: TensorType,
    value: TensorType,
    attn_mask: TensorType | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> TensorType:
    """``aten::scaled_dot_product_attention`` with eager's safe softmax.

    Args:
        query: ``[..., Hq, L, E]``, float.
        key: ``[..., Hk, S, E]``.
        value: ``[..., Hk, S, Ev]``.
        attn_mask: broadcastable to ``[..., Hq, L, S]``; bool (True = attend) or additive float.
        dropout_p: ignored: the graph is for inference, where dropout is the identity.
        is_causal: also mask keys after the query position (``tril(ones(L, S))``).
        scale: softmax scale; ``1 / sqrt(E)`` when None.
        enable_gqa: repeat ``key`` / ``value`` heads to ``Hq`` (grouped-query attention).

    Returns:
        ``[..., Hq, L, Ev]``; rows whose keys are all masked are 0.

    Source: https://github.com/microsoft/onnxscript/pull/2479
    """
    dtype, key_rank = query.dtype, len(key.shape)
    if enable_gqa:
        groups = op.Div(op.Shape(query, start=-3, end=-2), op.Shape(key, start=-3, end=-2))
        key, value = _repeat_heads(key, groups), _repeat_heads(value, groups)

    if scale is None:
        embed = query.shape[-1] if query.shape is not None else None
        if isinstance(embed, int):
            root = op.Constant(value=ir.tensor(math.sqrt(1.0 / math.sqrt(embed)), dtype=dtype))
        else:
            embed = op.CastLike(op.Shape(query, start=-1), query)
            root = op.Sqrt(op.Reciprocal(op.Sqrt(embed)))
    else:
        root = op.Constant(value=ir.tensor(math.sqrt(scale), dtype=dtype))
    key_t = op.Transpose(key, perm=_swap_last_two(key_rank))
    scores = op.MatMul(op.Mul(query, root), op.Mul(key_t, root))

    neg_inf = op.Constant(value=ir.tensor(-math.inf, dtype=dtype))
    if attn_mask is not None:
        if attn_mask.dtype == ir.DataType.BOOL:
            scores = op.Where(attn_mask, scores, neg_inf)
        else:
            scores = op.Add(scores, attn_mask)
    if is_causal:
        rows = op.Unsqueeze(op.Range(0, op.Squeeze(op.Shape(query, start=-2, end=-1)), 1), [-1])
        cols = op.Range(0, op.Squeeze(op.Shape(key, start=-2, end=-1)), 1)
        scores = op.Where(op.LessOrEqual(cols, rows), scores, neg_inf)

    weights = op.Softmax(scores, axis=-1)
    fully_masked = op.IsInf(op.ReduceMax(scores, [-1], keepdims=1), detect_positive=0)
    weights = op.Where(fully_masked, op.Constant(value=ir.tensor(0.0, dtype=dtype)), weights)
    return op.MatMul(weights, value)
