"""FX node fix: a ``view`` of an attention output that ExecuTorch's SDPA decomposition breaks.

The CPU kernel behind ``scaled_dot_product_attention`` returns ``(N, H, L, E)`` laid out as
``(N, L, H, E)``, so model code that transposes the output back to ``(N, L, H, E)`` and merges
the heads gets a contiguous tensor; ``contiguous()`` calls vanish from the captured graph and a
later ``view`` (GPT-2's ``Conv1D``: ``x.view(-1, x.size(-1))``) is recorded as valid.
``to_edge_transform_and_lower`` then decomposes SDPA with torch's decomposition, which lays the
output out as ``(L, N, H, E)`` (the ``nn.MultiheadAttention`` layout). Re-tracing the recorded
``view`` on that layout fails: ``Cannot view a tensor with shape [s0, s1, 32] and strides
(32, 32*s0, 1) as a tensor with shape (s0*s1, 32)``.

The fix gives such a ``view`` a contiguous input: ``view(x, shape)`` becomes
``view(clone(x, memory_format=contiguous_format), shape)``, only where ``x`` derives from an SDPA
output through shape-only ops (``view``, ``reshape``, ``transpose``, ``permute``, ...). The clone
is one copy of the attention output per layer.

Source: https://github.com/pytorch/pytorch/issues/136543
"""

from __future__ import annotations

import operator

import torch

from export_core.registry import register_fx_node_fix

__all__ = ["clone_before_view_of_attention"]

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


def _from_attention(node: torch.fx.Node, depth: int = 8) -> bool:
    """Whether ``node`` is an SDPA output reached through at most ``depth`` shape-only ops."""
    for _ in range(depth):
        if node.op != "call_function":
            return False
        if node.target is operator.getitem:
            node = node.args[0]
            continue
        if node.target in _SDPA:
            return True
        if node.target not in _SHAPE_ONLY:
            return False
        node = node.args[0]
    return False


@register_fx_node_fix(
    "executorch",
    _aten.view.default,
    reason="ExecuTorch decomposes SDPA into a (L, N, H, E) layout, so a view of the attention "
    "output that was valid at capture cannot be re-traced during to_edge (GPT-2's Conv1D)",
    upstream="https://github.com/pytorch/pytorch/issues/136543",
)
def clone_before_view_of_attention(node: torch.fx.Node) -> bool:
    """Insert a contiguous ``clone`` between an attention output and a ``view`` of it.

    Args:
        node: an ``aten.view.default(x, shape)`` call; ``x`` a float tensor, e.g.
            ``(batch, seq, hidden)`` merged from ``(batch, seq, heads, head_dim)``.

    Returns:
        True when a clone was inserted (``x`` derives from an SDPA output through shape-only
        ops and is not already a clone).

    Source: https://github.com/pytorch/pytorch/issues/136543
    """
    source = node.args[0]
    if not isinstance(source, torch.fx.Node) or not _from_attention(source):
        return False
    graph = node.graph
    with graph.inserting_before(node):
        clone = graph.call_function(
            _aten.clone.default, (source,), {"memory_format": torch.contiguous_format}
        )
    val = source.meta.get("val")
    if isinstance(val, torch.Tensor):
        clone.meta["val"] = val.clone(memory_format=torch.contiguous_format)
    for key in ("stack_trace", "nn_module_stack", "source_fn_stack", "torch_fn"):
        if key in node.meta:
            clone.meta[key] = node.meta[key]
    node.replace_input_with(source, clone)
    return True
