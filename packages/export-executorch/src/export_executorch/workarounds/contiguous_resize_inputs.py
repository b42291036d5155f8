"""FX node fix: image resizes read a contiguous input, so no channels-last tensor reaches a
portable kernel.

In eager PyTorch an ``interpolate`` keeps the memory format its input suggests: position
embeddings laid out ``(1, h, w, dim)`` and permuted to ``(1, dim, h, w)`` (DINOv2-style
``interpolate_pos_encoding``: Pixio) are channels-last strided, so the resized tensor is too.
The lowering's decomposition of ``upsample_*`` reproduces that with a final
``clone(memory_format=channels_last)``, which ExecuTorch turns into a ``_clone_dim_order`` to
``(0, 2, 3, 1)``. The tensor's next consumer is an op whose portable kernel requires its input
and output in one dim order (``permute_copy``, ``view_copy``, ``add``), and the program fails at
run time ("2 input tensors have different dim orders", error 0x12).

The fix gives each resize whose input is channels-last strided a contiguous copy of it
(``clone(memory_format=torch.contiguous_format)``): the same values, and a resized tensor in
the contiguous order every portable kernel takes.

Source: https://github.com/pytorch/executorch/issues/12914 (portable kernels: first-class
support for the channels-last dim order, open)
"""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from export_core.fixes import call_before
from export_core.registry import register_fx_node_fix

from ..stages import BACKEND

__all__ = ["RESIZE_OPS", "contiguous_resize_inputs"]

_aten = torch.ops.aten

RESIZE_OPS = (
    _aten.upsample_nearest2d, _aten.upsample_nearest3d, _aten._upsample_nearest_exact2d,
    _aten._upsample_nearest_exact3d, _aten.upsample_bilinear2d, _aten.upsample_trilinear3d,
    _aten.upsample_bicubic2d, _aten._upsample_bilinear2d_aa, _aten._upsample_bicubic2d_aa,
)
"""The 2-d and 3-d resizes (every overload): their decompositions keep the input's suggested
memory format. The 1-d ones take 3-d tensors, which have no channels-last format."""

_CHANNELS_LAST = {4: torch.channels_last, 5: torch.channels_last_3d}


@register_fx_node_fix(
    BACKEND,
    *RESIZE_OPS,
    reason="a resize keeps its input's channels-last layout (position embeddings permuted from "
    "(1, h, w, dim): Pixio), and the portable kernel of the next op refuses inputs and outputs "
    "of different dim orders at run time; the resize reads a contiguous copy",
    upstream="https://github.com/pytorch/executorch/issues/12914",
)
def contiguous_resize_inputs(node: torch.fx.Node) -> bool:
    """Give ``upsample_*(input, ...)`` a contiguous copy of ``input`` where ``input`` is
    channels-last strided and not contiguous.

    Args:
        node: the resize; ``input`` ``(batch, channels, h, w)`` or ``(batch, channels, d, h, w)``,
            any floating dtype.

    Returns:
        True when a ``clone(input, memory_format=torch.contiguous_format)`` now feeds the
        resize; False for a contiguous input, one that is not channels-last either, or one whose
        layout depends on sizes read from tensor data.

    Source: https://github.com/pytorch/executorch/issues/12914
    """
    source = node.args[0] if node.args else node.kwargs.get("input")
    if not isinstance(source, torch.fx.Node):
        return False
    val = source.meta.get("val")
    layout = _CHANNELS_LAST.get(val.dim()) if isinstance(val, torch.Tensor) else None
    if layout is None:
        return False
    try:
        if val.is_contiguous() or not val.is_contiguous(memory_format=layout):
            return False
    except GuardOnDataDependentSymNode:
        return False  # strides of sizes read from tensor data: the layout is not decidable
    copy = call_before(node, _aten.clone.default, source, memory_format=torch.contiguous_format)
    if node.args:
        node.update_arg(0, copy)
    else:
        node.update_kwarg("input", copy)
    return True
