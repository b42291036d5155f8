"""Switch Transformers' experts as a fixed loop over every expert, masked by the routing.

``SwitchTransformersExperts`` (a ``ModuleDict`` of MLP experts, not routed through
``transformers``' experts interface, so :mod:`.moe_experts` does not reach it) loops over
``expert_mask.sum(...).nonzero()``, a data-dependent number of iterations, and ``torch.export``
fails with ``GuardOnDataDependentSymNode``. The model code is the cause (the pattern
transformers#38518 reports for Mixtral). The replacement runs each expert on every token and keeps
its output where the routing (top-1 with capacity) sent the token: no data-dependent size, every
op Core ATen with an ONNX function. A token dropped for capacity gets zeros, as in the loop.
"""

from __future__ import annotations

from typing import Any

import torch

from ..registry import register_patch

__all__ = ["dense_switch_experts"]


def _forward(self: Any, hidden_states: torch.Tensor, selected_experts: torch.Tensor,
             routing_weights: torch.Tensor) -> torch.Tensor:
    routed = selected_experts.sum(dim=1) != 0  # (tokens, num_experts)
    out = torch.zeros_like(hidden_states)
    for index in range(self.num_experts):
        expert = self[f"expert_{index}"](hidden_states) * routing_weights
        out = out + torch.where(routed[:, index, None], expert.to(hidden_states.dtype), 0.0)
    return out


@register_patch(
    "dynamo",
    "transformers.models.switch_transformers.modeling_switch_transformers.SwitchTransformersExperts.forward",
    reason=(
        "SwitchTransformersExperts.forward loops over the experts hit by the routing (nonzero(), "
        "model code): capture fails with GuardOnDataDependentSymNode; the export runs every "
        "expert on every token and keeps the routed outputs"
    ),
    upstream="https://github.com/huggingface/transformers/issues/38518",
    versions=("transformers", ">=5,<6"),
)
def dense_switch_experts(original: Any) -> Any:
    """Replace ``SwitchTransformersExperts.forward(self, hidden_states, selected_experts,
    routing_weights)``.

    The replacement maps ``hidden_states (tokens, d_model)``, ``selected_experts (tokens, 1,
    num_experts)`` (the router's capacity-masked one-hot dispatch) and ``routing_weights (tokens,
    1)`` to ``(tokens, d_model)`` in the dtype of ``hidden_states``, equal to the loop. Cost:
    ``num_experts`` times the expert FLOPs of the loop (each expert sees every token), no extra
    weight memory.

    Source: https://github.com/huggingface/transformers/issues/38518 (the ``nonzero()`` experts
        loop under ``torch.export``)
    """
    del original
    return _forward
