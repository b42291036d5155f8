"""FX node fix: ExecuTorch's ``constant_pad_nd`` kernel refuses negative padding.

In PyTorch a negative entry of a constant pad crops that side: ``nn.ZeroPad2d((0, 0, 1, -1))``
shifts a sequence one step to the right and drops its last position (RWKV's ``time_shift``, the
token shift of every RWKV block). ExecuTorch's portable ``constant_pad_nd.out`` checks
``pad[i] >= 0`` and fails at run time ("Padding values must be non-negative, but got pad[3] =
-1"), at every input shape; XNNPACK does not take the op either.

The fix rewrites a constant pad with negative integer entries into the crop (an ``aten.slice``
per negative side) followed by the same pad with those entries set to 0, which is what PyTorch
computes. Pads of symbolic sizes are left alone (their sign is not known when exporting).

Source: https://github.com/pytorch/executorch/issues/12456 (negative padding in a constant pad
fails to export for XNNPACK)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from export_core.fixes import call_before
from export_core.registry import register_fx_node_fix

from ..stages import BACKEND

__all__ = ["crop_negative_padding", "split_padding"]

_aten = torch.ops.aten
_TO_THE_END = 2**63 - 1


def split_padding(pad: Sequence[int], ndim: int) -> tuple[list[tuple[int, int, int]], list[int]]:
    """The crops and the non-negative padding equal to a constant pad with negative entries.

    Args:
        pad: ``(last_begin, last_end, second_last_begin, second_last_end, ...)`` as
            ``F.pad`` takes it (ints, any sign, even length ``<= 2 * ndim``).
        ndim: rank of the padded tensor.

    Returns:
        ``(crops, padding)``: ``crops`` as ``(dim, start, end)`` arguments of
        ``aten.slice.Tensor`` (``end`` negative: counted from the end; ``2**63 - 1``: to the end),
        to apply before ``padding``, which is ``pad`` with every negative entry set to 0.
    """
    crops: list[tuple[int, int, int]] = []
    for i in range(len(pad) // 2):
        begin, end = pad[2 * i], pad[2 * i + 1]
        if begin < 0 or end < 0:
            crops.append((ndim - 1 - i, max(-begin, 0), end if end < 0 else _TO_THE_END))
    return crops, [max(p, 0) for p in pad]


def _constant_pad(node: torch.fx.Node) -> tuple[torch.fx.Node, list[int], object] | None:
    """``(input, pad, value)`` of a constant pad node with int padding, else ``None``."""
    args = list(node.args) + [None] * 4
    kwargs = node.kwargs
    x = args[0]
    pad = args[1] if args[1] is not None else kwargs.get("pad")
    if node.target == _aten.pad.default:
        mode = args[2] if args[2] is not None else kwargs.get("mode", "constant")
        if mode != "constant":
            return None
        value = args[3] if args[3] is not None else kwargs.get("value")
    else:
        value = args[2] if args[2] is not None else kwargs.get("value", 0)
    if not isinstance(x, torch.fx.Node) or "val" not in x.meta:
        return None
    if not isinstance(pad, list | tuple) or not all(type(p) is int for p in pad):
        return None
    return x, list(pad), value


@register_fx_node_fix(
    BACKEND,
    _aten.constant_pad_nd.default,
    _aten.pad.default,
    reason="ExecuTorch's constant_pad_nd kernel rejects negative padding, which PyTorch runs as a "
    "crop (nn.ZeroPad2d((0, 0, 1, -1)): RWKV's token shift); the crop becomes a slice and the "
    "pad keeps its non-negative entries",
    upstream="https://github.com/pytorch/executorch/issues/12456",
)
def crop_negative_padding(node: torch.fx.Node) -> bool:
    """Replace a constant pad with negative int entries by slices and a non-negative pad.

    Args:
        node: ``aten.constant_pad_nd.default(x, pad, value)`` or ``aten.pad.default(x, pad,
            mode="constant", value)``; ``x`` any shape and dtype.

    Returns:
        True when the node was replaced (some entry of ``pad`` is a negative int); other modes,
        symbolic or non-negative padding are left alone.

    Source: https://github.com/pytorch/executorch/issues/12456
    """
    parsed = _constant_pad(node)
    if parsed is None:
        return False
    x, pad, value = parsed
    if all(p >= 0 for p in pad):
        return False
    crops, padding = split_padding(pad, x.meta["val"].dim())
    out: torch.fx.Node = x
    for dim, start, end in crops:
        out = call_before(node, _aten.slice.Tensor, out, dim, start, end)
    fill = 0.0 if value is None else value
    # The result is the original node's value; computing it again under the fake mode would
    # specialize every size (constant_pad_nd's fake kernel guards on them outside a trace).
    with node.graph.inserting_before(node):
        out = node.graph.call_function(_aten.constant_pad_nd.default, (out, padding, fill))
    out.meta.update(node.meta)
    node.replace_all_uses_with(out)
    node.graph.erase_node(node)
    return True
