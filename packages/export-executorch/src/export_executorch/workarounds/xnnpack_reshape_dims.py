"""ExecuTorch patches: XNNPACK's partitioner delegates nodes that need a ``static_reshape`` with
two dynamic dimensions, which its serializer then rejects.

XNNPACK's ``static_reshape`` supports one dynamic dimension. The serializer checks it
(``UnsqueezeVisitor`` / ``SqueezeVisitor`` in ``executorch.backends.xnnpack.operators``) only
after partitioning, inside ``to_edge_transform_and_lower``, so one bad node fails the whole
lowering with "XNNPACK reshape only supports 1 dynamic dimension". Two partitioner configs admit
such nodes as soon as batch and sequence are both dynamic:

- ``ConvolutionConfig`` admits 1-d convolutions. XNNPACK runs them as 2-d convolutions: its
  ``Conv1dUnsqueezePass`` wraps each one in ``unsqueeze`` / ``squeeze`` nodes, and an input
  ``(batch, channels, time)`` becomes ``(batch, channels, time, 1)`` — two dynamic dimensions.
  Every wav2vec2-style audio encoder (wav2vec2, HuBERT, WavLM, SEW, UniSpeech, ...) starts with
  such a convolution stack.
- ``UnsqueezeCopyConfig`` (ExecuTorch 1.5) admits every ``unsqueeze`` on the trailing dimension,
  e.g. a padding mask ``(batch, seq)`` made ``(batch, seq, 1)``.
- ``BatchNormConfig`` admits a ``BatchNorm1d`` on ``(batch, channels, time)``. XNNPACK's
  ``DecomposeBatchNorm`` turns it into a depthwise 1-d convolution, which ``Conv1dUnsqueezePass``
  then wraps as above. Conformer convolution modules (Parakeet, Canary, SeamlessM4T, LASR,
  wav2vec2-conformer) end in one.

The patches make the partitioner check what the serializer checks: such a node stays outside the
delegate and runs on the portable kernels; a static or one-dynamic-dimension node is delegated
as before.

Source:
    https://github.com/pytorch/executorch/issues/11449 (static_reshape's dynamism limit for the
    squeeze / unsqueeze used by conv1d) and https://github.com/pytorch/executorch/pull/19261
    (the unsqueeze config, trailing-dimension check only)
"""

from __future__ import annotations

from typing import Any

import torch

from export_core.patching import PatchSession
from export_core.registry import register_patch

from .partitioner_checks import CONFIGS, rejecting, xnnpack_patch_name

__all__ = [
    "MAX_DYNAMIC_DIMS",
    "batch_norm_1d_with_one_dynamic_dim",
    "conv1d_inputs_with_one_dynamic_dim",
    "dynamic_dims",
    "unsqueeze_with_one_dynamic_dim",
]

MAX_DYNAMIC_DIMS = 1
"""Dynamic dimensions XNNPACK ``static_reshape`` supports."""

_CONFIGS = CONFIGS


def dynamic_dims(node: Any) -> int:
    """The number of symbolic dimensions of ``node``'s value (``meta["val"]``); 0 when it has
    none or is not an FX node."""
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    shape = getattr(val, "shape", ())
    return sum(1 for d in shape if isinstance(d, torch.SymInt) and d.node.expr.free_symbols)


def _is_conv1d(node: torch.fx.Node) -> bool:
    weight = node.args[1] if len(node.args) > 1 else None
    val = weight.meta.get("val") if isinstance(weight, torch.fx.Node) else None
    return getattr(val, "dim", lambda: 0)() == 3


@register_patch(
    "executorch.xnnpack",
    f"{_CONFIGS}.gemm_configs.ConvolutionConfig.check_constraints",
    stage="executorch_patches",
    reason="the XNNPACK partitioner delegates 1-d convolutions whose input has two dynamic "
    "dimensions; XNNPACK runs them as 2-d convolutions behind an unsqueeze that static_reshape "
    "cannot serialize, so lowering fails ('XNNPACK reshape only supports 1 dynamic dimension')",
    upstream="https://github.com/pytorch/executorch/issues/11449",
)
def conv1d_inputs_with_one_dynamic_dim(original: Any, session: PatchSession) -> Any:
    """Wrap ``ConvolutionConfig.check_constraints(self, node, ep) -> bool`` to answer ``False``
    for a 1-d convolution (weight ``(out_channels, in_channels, kernel)``) whose input
    ``(batch, channels, time)`` has more than :data:`MAX_DYNAMIC_DIMS` symbolic dimensions.

    Source:
        https://github.com/pytorch/executorch/issues/11449
    """
    return rejecting(
        original, lambda node: _is_conv1d(node) and dynamic_dims(node.args[0]) > MAX_DYNAMIC_DIMS,
        session, xnnpack_patch_name("gemm_configs.ConvolutionConfig"),
    )


@register_patch(
    "executorch.xnnpack",
    f"{_CONFIGS}.generic_node_configs.UnsqueezeCopyConfig.check_constraints",
    stage="executorch_patches",
    reason="the XNNPACK partitioner delegates unsqueeze_copy with two or more dynamic output "
    "dimensions, which XNNPACK static_reshape cannot serialize, so lowering fails ('XNNPACK "
    "reshape only supports 1 dynamic dimension')",
    upstream="https://github.com/pytorch/executorch/pull/19261",
)
def unsqueeze_with_one_dynamic_dim(original: Any, session: PatchSession) -> Any:
    """Wrap ``UnsqueezeCopyConfig.check_constraints(self, node, ep) -> bool`` to answer
    ``False`` for an ``unsqueeze_copy`` whose output has more than :data:`MAX_DYNAMIC_DIMS`
    symbolic dimensions.

    Source:
        https://github.com/pytorch/executorch/pull/19261
    """
    return rejecting(original, lambda node: dynamic_dims(node) > MAX_DYNAMIC_DIMS, session,
                      xnnpack_patch_name("generic_node_configs.UnsqueezeCopyConfig"))


@register_patch(
    "executorch.xnnpack",
    f"{_CONFIGS}.node_configs.BatchNormConfig.check_constraints",
    stage="executorch_patches",
    reason="the XNNPACK partitioner delegates BatchNorm1d on (batch, channels, time) with two "
    "dynamic dimensions; XNNPACK decomposes it into a 1-d convolution behind an unsqueeze that "
    "static_reshape cannot serialize, so lowering fails ('XNNPACK reshape only supports 1 "
    "dynamic dimension')",
    upstream="https://github.com/pytorch/executorch/issues/11449",
)
def batch_norm_1d_with_one_dynamic_dim(original: Any, session: PatchSession) -> Any:
    """Wrap ``BatchNormConfig.check_constraints(self, node, ep) -> bool`` to answer ``False``
    for a batch norm whose input ``(batch, channels)`` or ``(batch, channels, time)`` has more
    than :data:`MAX_DYNAMIC_DIMS` symbolic dimensions (its decomposition is a 1-d convolution,
    run as a 2-d one behind an ``unsqueeze``). A 4-d ``BatchNorm2d`` input is not affected.

    Source:
        https://github.com/pytorch/executorch/issues/11449
    """

    def needs_wide_reshape(node: torch.fx.Node) -> bool:
        source = node.args[0] if node.args else None
        val = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
        return getattr(val, "dim", lambda: 4)() < 4 and dynamic_dims(source) > MAX_DYNAMIC_DIMS

    return rejecting(original, needs_wide_reshape, session, xnnpack_patch_name("node_configs.BatchNormConfig"))
