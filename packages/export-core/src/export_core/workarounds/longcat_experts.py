"""LongCat-Flash's experts, zero-computation experts included, without the loop over hit experts.

``LongcatFlashExperts`` holds ``n_routed_experts`` MLP experts and ``zero_expert_num`` identity
("zero-computation") experts, and is not routed through ``transformers``' experts interface (so
:mod:`.moe_experts` does not reach it). Its ``forward`` loops over
``expert_mask.sum(...).nonzero()``, a data-dependent number of iterations, and ``torch.export``
fails with ``GuardOnDataDependentSymNode: Eq(u0, 0)``. The model code is the cause (the pattern
transformers#38518 reports for Mixtral). The replacement gathers each selected (token, expert)
pair's weights, runs the MLP with two ``bmm`` calls and keeps the pair's input where the expert
is an identity one: no data-dependent size, every op Core ATen with an ONNX function.
"""

from __future__ import annotations

from typing import Any

import torch

from ..registry import register_patch

__all__ = ["batched_longcat_experts"]


def _forward(self: Any, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
             top_k_weights: torch.Tensor) -> torch.Tensor:
    tokens, hidden = hidden_states.shape
    top_k = top_k_index.shape[-1]
    pairs = top_k_index.reshape(-1)  # (tokens * top_k,) expert of each pair
    x = hidden_states[:, None, :].expand(-1, top_k, -1).reshape(-1, hidden)
    out = x
    if self.num_routed_experts > 0 and self.gate_up_proj is not None:
        # An identity expert's pair reads the last MLP expert's weights; torch.where drops the result.
        index = pairs.clamp(max=self.num_routed_experts - 1)
        gate, up = torch.bmm(self.gate_up_proj[index], x[:, :, None]).squeeze(-1).chunk(2, dim=-1)
        mlp = torch.bmm(self.down_proj[index], (self.act_fn(gate) * up)[:, :, None]).squeeze(-1)
        out = torch.where((pairs < self.num_routed_experts)[:, None], mlp, x)
    out = (out * top_k_weights.reshape(-1, 1)).to(hidden_states.dtype)
    return out.view(tokens, top_k, hidden).sum(dim=1)


@register_patch(
    "dynamo",
    "transformers.models.longcat_flash.modeling_longcat_flash.LongcatFlashExperts.forward",
    reason=(
        "LongcatFlashExperts.forward loops over the experts hit by the routing (nonzero(), model "
        "code): capture fails with GuardOnDataDependentSymNode; the export computes the same sum "
        "with per-pair weight gathers and bmm, identity experts passing their input through"
    ),
    upstream="https://github.com/huggingface/transformers/issues/38518",
    versions=("transformers", ">=5,<6"),
)
def batched_longcat_experts(original: Any) -> Any:
    """Replace ``LongcatFlashExperts.forward(self, hidden_states, top_k_index, top_k_weights)``.

    The replacement maps ``hidden_states (tokens, hidden)``, ``top_k_index (tokens, top_k)`` int64
    (values in ``[0, n_routed_experts + zero_expert_num)``; at or above ``n_routed_experts`` an
    identity expert) and ``top_k_weights (tokens, top_k)`` to ``(tokens, hidden)`` in the dtype of
    ``hidden_states``, equal to the loop up to float summation order. Memory: ``tokens * top_k``
    gathered copies of one expert's ``(2 * ffn, hidden)`` and ``(hidden, ffn)`` matrices.

    Source: https://github.com/huggingface/transformers/issues/38518 (the ``nonzero()`` experts
        loop under ``torch.export``)
    """
    del original
    return _forward
