"""ExecuTorch patch: the edge dtype validator specialises the batch of list-returning ops.

``EdgeOpArgValidator.call_function`` (run by the edge verifier inside
``to_edge_transform_and_lower``) iterates ``node.meta["val"]`` once per schema return. For an op
whose single return is ``Tensor[]`` (``split_with_sizes_copy``, ``split_copy``, ``unbind_copy``,
what ``chunk`` lowers to) the value *is* the list, so the iterator yields its first tensor and the
validator calls ``range(len(tensor))``: ``len`` of a tensor is its first dimension, a ``SymInt``,
and ``range`` turns it into a guard ``Eq(s0, <example size>)``. The program's batch is silently
specialised to the example batch, and the ``.pte`` then rejects every other batch at run time
(``op_arange: resize ... capacity 2 ... 0x12``). Phi-3's fused ``gate_up_proj.chunk(2)`` hits it.

The patch hands the validator the value the way it expects it for such ops, ``[list]``, for the
duration of the call.

The fault is in ``exir/verification/arg_validator.py`` (``call_function``: ``ret_iter`` over a
list-valued ``meta["val"]``). No upstream issue reports the validator itself yet; the link is the
pull request that made ``split_with_sizes_copy`` support dynamic shapes, which the validator's
guard undoes.

Source: https://github.com/pytorch/executorch/pull/3152
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from export_core.registry import register_patch

__all__ = ["validate_list_returns_whole"]

_UPSTREAM = "https://github.com/pytorch/executorch/pull/3152"


def _returns_one_tensor_list(target: Any) -> bool:
    schema = getattr(target, "_schema", None)
    returns = getattr(schema, "returns", None)
    return bool(returns) and len(returns) == 1 and returns[0].type == torch.ListType.ofTensors()


@register_patch(
    "executorch",
    "executorch.exir.verification.arg_validator.EdgeOpArgValidator.call_function",
    stage="executorch_patches",
    reason="the edge verifier takes len() of the first tensor returned by a Tensor[]-returning "
    "op (split/chunk), which guards the symbolic batch to its example size and makes the "
    "program reject every other batch at run time",
    upstream=_UPSTREAM,
)
def validate_list_returns_whole(original: Any) -> Any:
    """Wrap ``EdgeOpArgValidator.call_function`` so a ``Tensor[]`` return is seen as one list.

    Args:
        original: ``EdgeOpArgValidator.call_function(self, target, args, kwargs)``.

    Returns:
        The replacement; for ops whose only return is ``Tensor[]`` it wraps
        ``self.node.meta["val"]`` (a list of tensors ``[batch, ...]``) in a one-element list while
        the original runs, and restores it afterwards. Every other op is passed through.

    Source: https://github.com/pytorch/executorch/pull/3152
    """

    @functools.wraps(original)
    def call_function(self: Any, target: Any, args: Any, kwargs: Any) -> Any:
        node = getattr(self, "node", None)
        val = node.meta.get("val") if node is not None else None
        if (
            not isinstance(val, list | tuple)
            or not all(isinstance(t, torch.Tensor) for t in val)
            or not _returns_one_tensor_list(target)
        ):
            return original(self, target, args, kwargs)
        node.meta["val"] = [val]
        try:
            return original(self, target, args, kwargs)
        finally:
            node.meta["val"] = val

    return call_function
