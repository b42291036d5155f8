"""V-JEPA 2's predictor target tokens without a size read from the target mask's values.

``VJEPA2PredictorEmbeddings.forward`` builds the tokens to predict as
``mask_token.repeat(B, target_mask[0].max() + 1, 1)`` and then gathers the rows each target mask
names (``apply_masks``). ``target_mask[0].max() + 1`` is a size read from tensor data, an
unbacked symbol to ``torch.export``: ExecuTorch has no upper bound for it and plans its memory
from the input axes' bounds, while the default masks (every patch, ``arange(N)``) make it ``N``,
the patch count (2048 on the zoo's tiny model at 64 frames of 32 x 32), so the first input already
fails ``execute`` ("Attempted to resize a bounded tensor with a maximum capacity of 32768 elements
to 262144 elements"). The model
code is the cause. Every row of the repeated tensor is the same mask token, so the gather returns
that token at every position of every mask: ``mask_token.expand(mask_batch, mask_length,
hidden)`` per mask, concatenated, is the same tensor with sizes taken from the masks' shapes.

Upstream: ExecuTorch plans memory for data-dependent sizes only when they are bounded
(https://github.com/pytorch/executorch/issues/8766); no transformers issue tracks the repeat.
"""

from __future__ import annotations

from typing import Any

import torch

from ..registry import register_patch

__all__ = ["VJEPA2_EMBEDDINGS_FORWARD", "mask_tokens_expanded"]

VJEPA2_EMBEDDINGS_FORWARD = (
    "transformers.models.vjepa2.modeling_vjepa2.VJEPA2PredictorEmbeddings.forward")
"""V-JEPA 2's predictor embeddings (transformers 5.x)."""


@register_patch(
    "dynamo",
    VJEPA2_EMBEDDINGS_FORWARD,
    reason=(
        "V-JEPA 2's predictor repeats its mask token target_mask[0].max() + 1 times (model code): "
        "a size read from tensor data, which ExecuTorch plans below the patch count; every "
        "gathered row is the mask token, so it is expanded to each mask's shape instead"
    ),
    upstream="https://github.com/pytorch/executorch/issues/8766",
    versions=("transformers", ">=5,<6"),
)
def mask_tokens_expanded(original: Any) -> Any:
    """Replace ``forward(self, hidden_states, context_mask, target_mask, mask_index=1)``.

    Shapes: ``hidden_states`` ``(batch, context, hidden)`` float; each of the ``masks``
    context masks ``(batch, context)`` and target masks ``(batch, targets)`` int64 patch
    indices -> embeddings ``(masks * batch, context + targets, pred_hidden)`` (the projected
    context, then the mask token at every target) and positions ``(masks * batch, context +
    targets)`` int64, as the original. Unlike the original, a target index beyond the first
    target mask's largest one is not an error (the token is the same at every index).

    Source: the model code (``target.repeat(B, max_patch_num, 1)`` in ``modeling_vjepa2.py``);
        https://github.com/pytorch/executorch/issues/8766
    """
    del original

    def forward(self: Any, hidden_states: torch.Tensor, context_mask: list[torch.Tensor],
                target_mask: list[torch.Tensor],
                mask_index: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        context = self.predictor_embeddings(hidden_states)
        token = self.mask_tokens[mask_index % self.num_mask_tokens]  # (1, 1, pred_hidden)
        target = torch.cat(
            [token.expand(m.size(0), m.size(1), token.size(-1)) for m in target_mask], dim=0)
        context = context.repeat(len(context_mask), 1, 1)
        embeddings = torch.cat([context, target], dim=1)
        masks = torch.cat([torch.cat(context_mask, dim=0), torch.cat(target_mask, dim=0)], dim=1)
        return embeddings, masks

    return forward
