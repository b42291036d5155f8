"""FX node fix: views of an attention output that ExecuTorch's SDPA decomposition breaks.

The CPU kernel behind ``scaled_dot_product_attention`` returns ``(N, H, L, E)`` laid out as
``(N, L, H, E)``. The captured graph's views are resolved on that layout: ``contiguous()``
calls vanish (GPT-2's ``transpose(1, 2).contiguous().view(-1, hidden)``), and ``reshape`` calls
become ``view`` where that layout allows one (ViViT's ``reshape`` / ``transpose`` / ``reshape``
after a re-trace such as the program fix ``decompose_missing_kernels``).
``to_edge_transform_and_lower`` first decomposes everything but SDPA on that layout, then
decomposes SDPA with torch's decomposition, which lays its output out otherwise; re-tracing a
recorded ``view`` then fails: ``Cannot view a tensor with shape [s0, s1, 4, 4] and strides (16,
16*s0, 4, 1) as a tensor with shape (s0*s1, 16)``.

The fix pins the layout the graph was captured with: the SDPA output is copied into that layout
(``transpose(1, 2)``, a contiguous ``clone``, ``transpose(1, 2)`` for the CPU kernel's layout; a
contiguous ``clone`` for a contiguous one), so every view of it stays valid whatever layout the
decomposition produces. It acts only on an SDPA output that reaches a ``view`` through shape-only
ops (``view``, ``reshape``, ``transpose``, ``permute``, ...): one copy per attention layer.
(Placing a contiguous ``clone`` before the ``view`` instead changes the layout later views of
the same chain see, and breaks them.)

Source: https://github.com/pytorch/pytorch/issues/136543
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch

from export_core.fixes import call_after
from export_core.registry import register_fx_node_fix

__all__ = ["in_kernel_layout", "kernel_layout", "pin_attention_layout_for_views"]

_aten = torch.ops.aten

_SDPA = {
    _aten.scaled_dot_product_attention.default,
    _aten._scaled_dot_product_flash_attention_for_cpu.default,
}
_SHAPE_ONLY = {
    _aten.view.default,
    _aten.reshape.default,
    _aten._unsafe_view.default,
    _aten.transpose.int,
    _aten.permute.default,
    _aten.unsqueeze.default,
    _aten.squeeze.dim,
    _aten.flatten.using_ints,
    _aten.unflatten.int,
}
Op = Callable[..., Any]
"""``op(target, *args, **kwargs)``: inserts a node calling ``target`` (or calls it eagerly)."""
_PINNED = "export_executorch.attention_layout_pinned"
"""``node.meta`` key set on an SDPA output whose layout this fix pinned."""


def _attention_output(node: torch.fx.Node, depth: int = 8) -> torch.fx.Node | None:
    """The SDPA output (the SDPA node, or its ``getitem(…, 0)`` for the CPU kernel's tuple) that
    ``node`` derives from through at most ``depth`` shape-only ops; None if it does not."""
    for _ in range(depth):
        if node.op != "call_function":
            return None
        if node.target is operator.getitem:
            source = node.args[0]
            if isinstance(source, torch.fx.Node) and source.target in _SDPA:
                return node
            node = source
            continue
        if node.target in _SDPA:
            return node
        if node.target not in _SHAPE_ONLY:
            return None
        node = node.args[0]
    return None


def kernel_layout(value: torch.Tensor) -> bool | None:
    """Whether ``value`` (an attention output ``(N, H, L, E)``) has the CPU kernel's
    ``(N, L, H, E)`` memory order (True) or is contiguous (False); None for another layout."""
    if value.is_contiguous():
        return False
    if value.dim() == 4 and value.transpose(1, 2).is_contiguous():
        return True
    return None


def in_kernel_layout(x: Any, op: Op) -> Any:
    """``x`` ``(N, H, L, E)`` copied into the CPU kernel's ``(N, L, H, E)`` memory order (same
    shape): ``transpose(1, 2)``, a contiguous ``clone``, ``transpose(1, 2)``, each through
    ``op(target, *args, **kwargs)`` (a node inserter, or eager)."""
    swapped = op(_aten.transpose.int, x, 1, 2)
    copied = op(_aten.clone.default, swapped, memory_format=torch.contiguous_format)
    return op(_aten.transpose.int, copied, 1, 2)


def _pin_layout(output: torch.fx.Node) -> bool:
    """Copy ``output`` (an SDPA output ``(N, H, L, E)``) into the layout it was captured with;
    False when that layout is neither the CPU kernel's nor contiguous (left as it is)."""
    val = output.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dim() != 4:
        return False
    kernel = kernel_layout(val)
    if kernel is None:
        return False
    users = list(output.users)
    last = output

    def op(target: Any, *args: Any, **kwargs: Any) -> torch.fx.Node:
        nonlocal last
        last = call_after(last, target, *args, **kwargs)
        return last

    if kernel:
        pinned = in_kernel_layout(output, op)
    else:
        pinned = op(_aten.clone.default, output, memory_format=torch.contiguous_format)
    for user in users:
        user.replace_input_with(output, pinned)
    output.meta[_PINNED] = True
    return True


@register_fx_node_fix(
    "executorch",
    _aten.view.default,
    reason="ExecuTorch decomposes SDPA into another layout than the one the captured views of "
    "its output were resolved on, so re-tracing such a view during to_edge fails (GPT-2's "
    "Conv1D, ViViT after a re-trace)",
    upstream="https://github.com/pytorch/pytorch/issues/136543",
)
def pin_attention_layout_for_views(node: torch.fx.Node) -> bool:
    """Pin the captured layout of the SDPA output that the ``view`` ``node`` derives from.

    Args:
        node: an ``aten.view.default(x, shape)`` call; ``x`` a float tensor, e.g.
            ``(batch, seq, heads, head_dim)`` to be merged into ``(batch, seq, hidden)``.

    Returns:
        True when this call pinned a layout (``x`` derives from an SDPA output ``(batch, heads,
        seq, head_dim)`` through shape-only ops, and that output was not pinned yet).

    Source: https://github.com/pytorch/pytorch/issues/136543
    """
    source = node.args[0]
    output = _attention_output(source) if isinstance(source, torch.fx.Node) else None
    if output is None or output.meta.get(_PINNED):
        return False
    return _pin_layout(output)
