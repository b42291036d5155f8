"""ONNX patch: ``torch.onnx``'s type-promotion pass re-runs the program with gradients off.

Before translating, ``torch.onnx`` re-runs the decomposed program on fake tensors to insert
explicit type promotions (``InsertTypePromotion``). That re-run happens with grad mode on, and
the fake parameters require grad, so every value computed from a parameter requires grad too.
``scaled_dot_product_attention`` picks its CPU backend by its inputs: with an attention mask that
requires grad (a float bias computed from weights: LayoutLMv3's relative-position biases) it
takes the math path, which returns a contiguous ``(N, H, L, E)``; the capture (inference, no
grad) took the fused CPU kernel, whose output is laid out as ``(N, L, H, E)``, and resolved the
``reshape`` / ``view`` calls after it on that layout. The re-run then fails on the first of them:
``Cannot view a tensor with shape [N, L, 4, 16] and strides (64*L, 16, 16*L, 1) as a tensor
with shape (N, L, 64)``.

An exported model is an inference program: the patch runs the pass under ``torch.no_grad()``,
so the re-run sees the layouts the capture saw. Values and dtypes are unchanged (grad mode only
decides autograd bookkeeping and that backend choice). It counts as fired when the re-run holds
an SDPA whose floating-point mask requires grad, the case where grad mode changes the layout.

Source: https://github.com/pytorch/pytorch/issues/141107
"""

from __future__ import annotations

from typing import Any

import torch

from export_core.patching import MARKS_OWN_FIRING, PatchSession
from export_core.registry import register_patch

from ..stages import BACKEND

__all__ = ["TYPE_PROMOTION_RUN_TARGET", "type_promotion_without_grad"]

TYPE_PROMOTION_RUN_TARGET = "torch.onnx._internal.fx.passes.type_promotion.InsertTypePromotion._run"
"""The type-promotion pass's fake-tensor re-run of one graph module (called per subgraph)."""

_ATTENTION = {
    torch.ops.aten.scaled_dot_product_attention.default,
}
_NO_GRAD = {torch.ops.aten.detach.default}
"""Ops whose output never requires grad."""


def _mask_needs_grad(graph_module: torch.fx.GraphModule) -> bool:
    """Whether ``graph_module`` calls SDPA with a floating-point ``attn_mask`` that would
    require grad in the re-run: one computed from a placeholder whose fake value requires grad
    (a parameter of a model that was not frozen; the recorded intermediate values do not say)."""
    needs_grad: set[torch.fx.Node] = set()
    for node in graph_module.graph.nodes:
        value = node.meta.get("val")
        floating = isinstance(value, torch.Tensor) and value.is_floating_point()
        if node.op == "placeholder":
            if floating and value.requires_grad:
                needs_grad.add(node)
        elif (floating and node.target not in _NO_GRAD
              and any(arg in needs_grad for arg in node.all_input_nodes)):
            needs_grad.add(node)
        if node.op == "call_function" and node.target in _ATTENTION:
            mask = node.args[3] if len(node.args) > 3 else node.kwargs.get("attn_mask")
            if mask in needs_grad:
                return True
    return False


@register_patch(
    BACKEND,
    TYPE_PROMOTION_RUN_TARGET,
    stage="onnx_patches",
    reason="torch.onnx's type-promotion pass re-runs the program with grad mode on; an SDPA "
    "whose mask requires grad (a float bias made from weights: LayoutLMv3) then takes the math "
    "path and lays its output out unlike the capture, and the view after it fails ('Cannot "
    "view a tensor with shape ... and strides ...'); the pass runs under no_grad",
    upstream="https://github.com/pytorch/pytorch/issues/141107",
)
def type_promotion_without_grad(original: Any, session: PatchSession) -> Any:
    """Replace ``InsertTypePromotion._run(self) -> GraphModule`` (the fake-tensor re-run of
    ``self.module``) with the same run under ``torch.no_grad()``.

    Source: https://github.com/pytorch/pytorch/issues/141107
    """
    name = f"{BACKEND}:{TYPE_PROMOTION_RUN_TARGET}"

    def _run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if torch.is_grad_enabled() and _mask_needs_grad(self.module):
            session.mark_fired(name)
        with torch.no_grad():
            return original(self, *args, **kwargs)

    setattr(_run, MARKS_OWN_FIRING, True)
    return _run
