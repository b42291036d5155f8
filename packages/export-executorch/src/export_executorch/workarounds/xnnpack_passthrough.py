"""ExecuTorch patches: XNNPACK's partitioner delegates no-op clones that its own passes remove,
leaving the delegate an output twice or an input as an output.

``CloneConfig`` and ``CloneDimOrderConfig`` admit every ``clone`` / ``_clone_dim_order`` that
keeps the dim order; XNNPACK's ``RemoveRedundantCopyPass`` then drops them inside the partition.
When the clone's input is itself a partition output (it has users outside the delegate: a
``reshape`` of a permuted tensor that another op also reads, pe_audio, RecurrentGemma) the
delegate's outputs become ``[x, x]``; when the input is a graph input the output is that input.
Preprocessing rejects both: "Output node '...' is already in the inputs. This is likely due to
pass through arguments, which are not supported in XNNPACK Delegate", and the whole lowering
fails. The patches keep such a clone (its input has other users, or is a placeholder) on the
portable kernels: one copy, as in eager.

Source: https://github.com/pytorch/executorch/issues/19152
"""

from __future__ import annotations

from typing import Any

import torch

from export_core.patching import PatchSession
from export_core.registry import register_patch

from .partitioner_checks import CONFIGS, rejecting, xnnpack_patch_name

__all__ = ["clone_dim_order_not_a_passthrough", "clone_not_a_passthrough", "may_pass_through"]

_CONFIGS = f"{CONFIGS}.generic_node_configs"


def may_pass_through(node: torch.fx.Node) -> bool:
    """Whether removing the no-op clone ``node`` could make its input a delegate output twice
    or a pass-through: the input is a placeholder or has users besides ``node``."""
    source = node.args[0] if node.args else None
    if not isinstance(source, torch.fx.Node):
        return False
    return source.op == "placeholder" or len(source.users) > 1


_REASON = (
    "the XNNPACK partitioner delegates dim-order-preserving clones that XNNPACK's "
    "RemoveRedundantCopyPass removes; when the clone's input is also a delegate output or a "
    "graph input, the delegate outputs a value twice or passes an input through, and lowering "
    "fails ('Output node ... is already in the inputs')"
)


@register_patch(
    "executorch.xnnpack",
    f"{_CONFIGS}.CloneDimOrderConfig.check_constraints",
    stage="executorch_patches",
    reason=_REASON,
    upstream="https://github.com/pytorch/executorch/issues/19152",
)
def clone_dim_order_not_a_passthrough(original: Any, session: PatchSession) -> Any:
    """Wrap ``CloneDimOrderConfig.check_constraints(self, node, ep) -> bool`` to answer
    ``False`` for a ``_clone_dim_order`` that :func:`may_pass_through`; marks the patch fired
    only then.

    Source: https://github.com/pytorch/executorch/issues/19152
    """
    return rejecting(original, may_pass_through, session,
                     xnnpack_patch_name("generic_node_configs.CloneDimOrderConfig"))


@register_patch(
    "executorch.xnnpack",
    f"{_CONFIGS}.CloneConfig.check_constraints",
    stage="executorch_patches",
    reason=_REASON,
    upstream="https://github.com/pytorch/executorch/issues/19152",
)
def clone_not_a_passthrough(original: Any, session: PatchSession) -> Any:
    """Wrap ``CloneConfig.check_constraints(self, node, ep) -> bool`` to answer ``False`` for a
    ``clone`` that :func:`may_pass_through`; marks the patch fired only then.

    Source: https://github.com/pytorch/executorch/issues/19152
    """
    return rejecting(original, may_pass_through, session,
                     xnnpack_patch_name("generic_node_configs.CloneConfig"))
