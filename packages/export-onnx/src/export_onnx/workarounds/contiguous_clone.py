"""FX node fix: ``contiguous()`` kept as an explicit copy, so a later ``view`` stays valid.

``x.contiguous()`` is captured as ``aten.contiguous`` (a composite op). ``torch.onnx`` decomposes
it while re-tracing the program, and on the layout that trace sees it is a no-op: the CPU kernel
behind ``scaled_dot_product_attention`` returns ``(N, H, L, E)`` laid out as ``(N, L, H, E)``, so
attention code's ``out.transpose(1, 2).contiguous()`` is already contiguous and the call vanishes.
``torch.onnx``'s type-promotion pass then runs the decomposed graph again on fake tensors with the
operator's own layout (a plain ``(N, H, L, E)``); the transposed output is not contiguous there,
and the ``view`` that merges the heads fails: ``Cannot view a tensor with shape [s0, s1, 4, 8] and
strides (32*s1, 8, 8*s1, 1) as a tensor with shape (s0, s1, 32)``. T5, mT5, UMT5, Whisper-style
speech encoders (Parakeet, wav2vec2-BERT, ...) and SAM 3 hit it on every dynamic export.

The fix rewrites ``contiguous(x, memory_format=f)`` as ``clone(x, memory_format=f)``: a clone is
never dropped, its output is contiguous on every trace, and in ONNX it is an ``Identity`` that
the optimizer removes.

Source: https://github.com/pytorch/pytorch/issues/141107
"""

from __future__ import annotations

import torch

from export_core.registry import register_fx_node_fix

__all__ = ["keep_contiguous_as_clone"]

_aten = torch.ops.aten


@register_fx_node_fix(
    "onnx",
    _aten.contiguous.default,
    reason="torch.onnx's decomposition drops a contiguous() that its trace's layout made a no-op "
    "(SDPA's CPU layout); its type-promotion re-trace then sees the operator's own layout and the "
    "view after it fails ('Cannot view a tensor with shape ... and strides ...')",
    upstream="https://github.com/pytorch/pytorch/issues/141107",
)
def keep_contiguous_as_clone(node: torch.fx.Node) -> bool:
    """Replace ``aten.contiguous(x, memory_format=f)`` with ``aten.clone(x, memory_format=f)``.

    Args:
        node: an ``aten.contiguous.default`` call on any tensor (any dtype and rank; ``f`` is
            ``torch.contiguous_format`` unless the model asked for another format).

    Returns:
        True (every such node is rewritten).

    Source: https://github.com/pytorch/pytorch/issues/141107
    """
    memory_format = node.kwargs.get("memory_format", torch.contiguous_format)
    with node.graph.inserting_before(node):
        clone = node.graph.call_function(_aten.clone.default, (node.args[0],),
                                         {"memory_format": memory_format})
    clone.meta.update(node.meta)
    node.replace_all_uses_with(clone)
    node.graph.erase_node(node)
    return True
