"""DBRX's experts without the loop over the experts the routing hit.

``DbrxExperts`` is not routed through ``transformers``' experts interface (so
:mod:`.moe_experts` does not reach it): its ``forward`` loops over
``expert_mask.sum(...).nonzero()``, a data-dependent number of iterations, and ``torch.export``
fails with ``GuardOnDataDependentSymNode: Eq(u0, 0)``. The model code is the cause (the pattern
transformers#38518 reports for Mixtral). The replacement computes the same sum with a gather of
each selected (token, expert) pair's weights and three ``bmm`` calls, as the ``batched_mm``
experts implementation does: no data-dependent size, every op Core ATen with an ONNX function.
"""

from __future__ import annotations

from typing import Any

import torch

from ..registry import register_patch

__all__ = ["batched_dbrx_experts"]


def _forward(self: Any, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
             top_k_weights: torch.Tensor) -> torch.Tensor:
    batch = hidden_states.shape[0]
    hidden, ffn, experts = self.hidden_size, self.ffn_hidden_size, self.num_experts
    tokens = hidden_states.reshape(-1, hidden)
    top_k = top_k_index.shape[-1]
    pairs = top_k_index.reshape(-1)  # (tokens * top_k,) expert of each pair
    x = tokens[:, None, :].expand(-1, top_k, -1).reshape(-1, hidden, 1)
    w1 = self.mlp.w1.view(experts, ffn, hidden)[pairs]
    v1 = self.mlp.v1.view(experts, ffn, hidden)[pairs]
    w2 = self.mlp.w2.view(experts, ffn, hidden)[pairs]
    gate = self.mlp.activation_fn(torch.bmm(w1, x).squeeze(-1))
    up = torch.bmm(v1, x).squeeze(-1)
    out = torch.bmm((gate * up)[:, None, :], w2).squeeze(1)
    out = out * top_k_weights.reshape(-1, 1).to(out.dtype)
    return out.view(-1, top_k, hidden).sum(dim=1).view(batch, -1, hidden)


@register_patch(
    "dynamo",
    "transformers.models.dbrx.modeling_dbrx.DbrxExperts.forward",
    reason=(
        "DbrxExperts.forward loops over the experts hit by the routing (nonzero(), model code): "
        "capture fails with GuardOnDataDependentSymNode; the export computes the same sum "
        "with per-pair weight gathers and bmm"
    ),
    upstream="https://github.com/huggingface/transformers/issues/38518",
    versions=("transformers", ">=5,<6"),
)
def batched_dbrx_experts(original: Any) -> Any:
    """Replace ``DbrxExperts.forward(self, hidden_states, top_k_index, top_k_weights)``.

    The replacement maps ``hidden_states (batch, seq, hidden)``, ``top_k_index (tokens,
    top_k)`` int64 and ``top_k_weights (tokens, top_k)`` (``tokens = batch * seq``) to
    ``(batch, seq, hidden)`` in the dtype of ``hidden_states``, equal to the loop up to float
    summation order. Memory: ``tokens * top_k`` gathered copies of one expert's three
    ``(ffn, hidden)`` matrices.

    Source: https://github.com/huggingface/transformers/issues/38518 (the ``nonzero()`` experts
        loop under ``torch.export``)
    """
    del original
    return _forward
