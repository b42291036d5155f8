"""FX node fix: an uninitialised tensor of a symbolic size, which ExecuTorch's dim-order pass
specialises to the example's size.

``to_edge`` rewrites ``aten.empty.memory_format`` (what ``new_empty`` becomes) into
``dim_order_ops._empty_dim_order``, whose ``size`` is ``int[]``, not ``SymInt[]``: calling it
with a symbolic size converts every symbol to an int, which adds the guards ``Eq(s0, 2)``,
``Eq(s1, 8)`` and pins the program's inputs to the example's shape. Lowering succeeds and the
``.pte`` then refuses every other batch or length ("Attempted to resize a bounded tensor with a
maximum capacity of 16 elements to 36", 0x10). Multi-head latent attention (DeepSeek-V3,
MiniCPM3, Kimi-K2.5, GLM-4-MoE-Lite, ...) builds its keys with
``k_pass.new_empty((batch, heads, seq, dim))`` and hits it in every layer.

The fix gives such a node a value instead: ``new_empty`` / ``empty`` with a symbolic size become
``full(size, 0)`` of the same dtype and device (the contents of an empty tensor are unspecified,
so zeros are a valid value; the cost is one fill). An empty tensor of a static size is left
alone.

Source: https://github.com/pytorch/executorch/pull/7168 (the pass that made ``empty`` the
dim-order op with an ``int[]`` size)
"""

from __future__ import annotations

from typing import Any

import torch

from export_core.registry import register_fx_node_fix

from ..stages import BACKEND

__all__ = ["symbolic_empty_as_zeros"]

_aten = torch.ops.aten


def _symbolic(size: Any) -> bool:
    """Whether a size list holds a symbolic entry (an FX node or a SymInt)."""
    return isinstance(size, list | tuple) and any(
        isinstance(s, torch.fx.Node | torch.SymInt) for s in size)


@register_fx_node_fix(
    BACKEND,
    _aten.new_empty.default,
    _aten.empty.memory_format,
    reason="to_edge turns empty into _empty_dim_order, whose int[] size specialises a symbolic "
    "size to the example's: the program then rejects every other batch or length (multi-head "
    "latent attention's new_empty)",
    upstream="https://github.com/pytorch/executorch/pull/7168",
)
def symbolic_empty_as_zeros(node: torch.fx.Node) -> bool:
    """Replace ``new_empty(x, size)`` / ``empty(size)`` with a symbolic size by ``full(size, 0)``.

    Args:
        node: an ``aten.new_empty.default(x, size, *, dtype, layout, device, pin_memory)`` or
            ``aten.empty.memory_format(size, *, dtype, layout, device, pin_memory,
            memory_format)`` call.

    Returns:
        True when the node was replaced (a symbolic size, and for ``empty`` no memory format
        other than contiguous).

    Source: https://github.com/pytorch/executorch/pull/7168
    """
    kwargs = dict(node.kwargs)
    if node.target is _aten.new_empty.default:
        source, size = node.args[0], node.args[1]
        val = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
        if not isinstance(val, torch.Tensor):
            return False
        kwargs.setdefault("dtype", val.dtype)
        kwargs.setdefault("device", val.device)
    else:
        size = node.args[0]
        if kwargs.pop("memory_format", None) not in (None, torch.contiguous_format):
            return False
    if not _symbolic(size):
        return False
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    graph = node.graph
    with graph.inserting_before(node):
        full = graph.call_function(_aten.full.default, (list(size), 0), kwargs)
    full.meta.update(node.meta)
    node.replace_all_uses_with(full)
    graph.erase_node(node)
    return True
