"""ONNX patch: outputs of the program that are constants, not tensors, are left out.

A model may return Python numbers beside its tensors (MaskFormer's Swin backbone returns the
spatial sizes of each stage's hidden states). Where they do not depend on a dynamic axis (a
static capture, or sizes of static axes), ``torch.export`` records them as constant outputs: the
program's output node lists an ``int`` where a tensor output lists an FX node. The translation
of the output node (``torch.onnx``'s ``_handle_output_node``) skips a ``None`` output but reads
``.name`` of every other one: ``AttributeError: 'int' object has no attribute 'name'``, and the
program does not translate.

The artifact's outputs are the model's tensors only (the exporter names and validates tensor
leaves), so the patch gives the translation the output node with every constant output replaced
by ``None``, which it already skips, and puts the node's arguments back afterwards.

Upstream: constant *inputs* are omitted from the ONNX graph since
https://github.com/pytorch/pytorch/pull/157734; constant outputs are not, and no PyTorch issue
tracks them (``_handle_output_node`` in ``torch/onnx/_internal/exporter/_core.py``).
"""

from __future__ import annotations

from typing import Any

import torch

from export_core.patching import MARKS_OWN_FIRING, PatchSession
from export_core.registry import register_patch

from ..stages import BACKEND

__all__ = ["OUTPUT_NODE_TARGET", "constant_outputs_left_out"]

OUTPUT_NODE_TARGET = "torch.onnx._internal.exporter._core._handle_output_node"
"""The translation of a graph's output node (torch 2.13)."""


def _without_constants(outputs: Any) -> tuple[Any, bool]:
    """The output node's first argument with every entry that is not an FX node as ``None``,
    and whether there was one."""
    if not isinstance(outputs, tuple | list):
        return outputs, False
    kept = [o if o is None or isinstance(o, torch.fx.Node) else None for o in outputs]
    changed = any(a is not b for a, b in zip(kept, outputs, strict=True))
    return type(outputs)(kept), changed


@register_patch(
    BACKEND,
    OUTPUT_NODE_TARGET,
    stage="onnx_patches",
    reason="the output node's translation reads .name of every output but None, so a constant "
    "output (a Python int the model returns beside its tensors, e.g. MaskFormer-Swin's stage "
    "sizes) fails with \"'int' object has no attribute 'name'\"; constants are passed as None, "
    "which it skips (the artifact's outputs are the tensors)",
    upstream="https://github.com/pytorch/pytorch/pull/157734",
)
def constant_outputs_left_out(original: Any, session: PatchSession) -> Any:
    """Wrap ``_handle_output_node(node, node_name_to_values, graph_like)``: while the original
    runs, ``node.args[0]`` (the outputs, FX nodes or constants) has its constants replaced by
    ``None``; marked fired when there was one.

    Source: https://github.com/pytorch/pytorch/pull/157734 (the same for constant inputs)
    """
    name = f"{BACKEND}:{OUTPUT_NODE_TARGET}"

    def _handle_output_node(node: Any, *args: Any, **kwargs: Any) -> Any:
        outputs, changed = _without_constants(node.args[0] if node.args else None)
        if not changed:
            return original(node, *args, **kwargs)
        session.mark_fired(name)
        saved = node.args
        node.args = (outputs, *saved[1:])
        try:
            return original(node, *args, **kwargs)
        finally:
            node.args = saved

    setattr(_handle_output_node, MARKS_OWN_FIRING, True)
    return _handle_output_node
