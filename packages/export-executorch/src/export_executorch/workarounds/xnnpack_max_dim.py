"""ExecuTorch patch: XNNPACK's partitioner delegates ``max.dim`` reductions its serializer rejects.

``MaxDimConfig.check_constraints`` admits every ``max.dim`` of a 4-d float tensor whose indices
are unused, but XNNPACK implements only the reduction over the spatial axes of an NCHW tensor
with ``keepdim=True``: its serializer (``MaxDim`` / ``MaxDimIndices`` in
``executorch.backends.xnnpack.operators.op_max_dim``, which sees the node as ``amax``) raises
"amax.default only supports dim == 2 or dim == 3" or "... only supports keep_dim == True" inside
``to_edge_transform_and_lower``, and the whole lowering fails (GPT-OSS's router, Hiera's
pooling, MiMo-V2-Flash). The patch makes the partitioner check what the serializer checks: such a
node stays outside the delegate and runs on the portable kernels.

Source: https://github.com/pytorch/executorch/issues/11449
"""

from __future__ import annotations

from typing import Any

import torch

from export_core.patching import PatchSession
from export_core.registry import register_patch

from .partitioner_checks import CONFIGS, rejecting, xnnpack_patch_name

__all__ = ["max_dim_as_xnnpack_serializes_it", "xnnpack_serializes_max_dim"]

_TARGET = f"{CONFIGS}.node_configs.MaxDimConfig.check_constraints"
_NAME = xnnpack_patch_name("node_configs.MaxDimConfig")


def xnnpack_serializes_max_dim(node: torch.fx.Node) -> bool:
    """Whether XNNPACK's serializer takes this ``max.dim(x, dim, keepdim)`` node: ``keepdim``
    true and ``dim`` literally 2 or 3 (the serializer does not normalise ``-1`` to 3)."""
    args = list(node.args) + [node.kwargs.get("keepdim", False)] * (3 - len(node.args))
    dim, keepdim = args[1], args[2]
    return bool(keepdim) and dim in (2, 3)


@register_patch(
    "executorch.xnnpack",
    _TARGET,
    stage="executorch_patches",
    reason="the XNNPACK partitioner delegates max.dim over any axis of a 4-d tensor, but its "
    "serializer takes only dim 2 or 3 with keepdim=True, so lowering fails ('amax.default only "
    "supports dim == 2 or dim == 3')",
    upstream="https://github.com/pytorch/executorch/issues/11449",
)
def max_dim_as_xnnpack_serializes_it(original: Any, session: PatchSession) -> Any:
    """Wrap ``MaxDimConfig.check_constraints(self, node, ep) -> bool`` to answer ``False`` for a
    ``max.dim`` that :func:`xnnpack_serializes_max_dim` refuses; marks the patch fired only then.

    Source: https://github.com/pytorch/executorch/issues/11449
    """
    return rejecting(original, lambda node: not xnnpack_serializes_max_dim(node), session, _NAME)
