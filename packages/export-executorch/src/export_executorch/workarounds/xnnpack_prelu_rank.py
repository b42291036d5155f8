"""FX node fix: XNNPACK lowers ``prelu`` only on 4-D (image) inputs.

XNNPACK's PReLU is a channels-last operator, and ExecuTorch's XNNPACK layout pass
(``ChannelsLastTaggedReshapePass``) converts the input of every ``prelu`` it delegates to NHWC.
The partitioner delegates a ``prelu`` of any rank, but the layout pass converts only 4-D
tensors, so a ``prelu`` on a sequence ``(batch, seq, hidden)`` (DAB-DETR's decoder MLPs,
``activation_function="prelu"``) or a matrix fails lowering: ``AssertionError: Attempting to
convert non-NHWC compatible node to NHWC``.

The fix rewrites each ``prelu(x, weight)`` whose ``x`` is not 4-D as
``clamp(x, min=0) + clamp(x, max=0) * weight`` with ``weight`` viewed along the channel axis
(axis 1; one shared slope for inputs of rank below 2, as torch defines it). XNNPACK delegates
``clamp``, ``mul`` and ``add``; the values are those of torch's ``prelu`` (``x`` where
``x >= 0``, ``weight * x`` elsewhere). 4-D inputs keep XNNPACK's own PReLU. The portable
kernels run ``prelu`` of every rank, so the fix is registered for XNNPACK only.

Source: https://github.com/pytorch/executorch/issues/17559 (XNNPACK's PReLU path; its
use-after-free fix, executorch#21480, does not cover the rank)
"""

from __future__ import annotations

import torch

from export_core.fixes import call_before
from export_core.registry import register_fx_node_fix

__all__ = ["prelu_off_images_as_clamps"]

_aten = torch.ops.aten


@register_fx_node_fix(
    "executorch.xnnpack",
    _aten.prelu.default,
    _aten._prelu_kernel.default,
    reason="XNNPACK's layout pass converts the input of every delegated prelu to NHWC but can "
    "only convert 4-D tensors, so a prelu on a sequence (DAB-DETR's decoder MLPs) fails "
    "lowering ('Attempting to convert non-NHWC compatible node to NHWC'); prelu of another "
    "rank becomes clamp / mul / add",
    upstream="https://github.com/pytorch/executorch/issues/17559",
)
def prelu_off_images_as_clamps(node: torch.fx.Node) -> bool:
    """Replace ``aten.prelu(x, weight)`` / ``aten._prelu_kernel(x, weight)`` of a non-4-D ``x``
    by ``clamp(x, min=0) + clamp(x, max=0) * weight.view(1, C, 1, ...)``.

    Args:
        node: a ``prelu`` call; ``x`` ``(batch, C, ...)`` of any floating dtype, or of rank 0 /
            1 (one slope); ``weight`` ``(C,)`` or ``(1,)``.

    Returns:
        True when the node was replaced (``x`` is not 4-D); 4-D inputs are left to XNNPACK.

    Source: https://github.com/pytorch/executorch/issues/17559
    """
    x, weight = node.args[0], node.args[1]
    if not (isinstance(x, torch.fx.Node) and isinstance(weight, torch.fx.Node)):
        return False
    value, slopes = x.meta.get("val"), weight.meta.get("val")
    if not isinstance(value, torch.Tensor) or not isinstance(slopes, torch.Tensor) \
            or value.dim() == 4:
        return False
    shape = [1] * value.dim()
    if value.dim() >= 2:
        shape[1] = slopes.numel()
    positive = call_before(node, _aten.clamp.default, x, 0.0)
    negative = call_before(node, _aten.clamp.default, x, None, 0.0)
    slope = call_before(node, _aten.view.default, weight, shape)
    scaled = call_before(node, _aten.mul.Tensor, negative, slope)
    out = call_before(node, _aten.add.Tensor, positive, scaled)
    node.replace_all_uses_with(out)
    node.graph.erase_node(node)
    return True
