"""CPM-Ant's left-padding mask, built from ``torch.arange`` instead of a Python list.

``CpmAntModel._prepare_attention_mask`` builds the positions of the non-prompt tokens as
``torch.tensor(list(range(seqlen - prompt_length))[::-1])``: ``range`` over the symbolic
sequence length makes it a Python int, so ``torch.export`` pins the sequence axis to the example's
length (``Eq(s70, 8)``) without an error, and the artifact rejects every other length (ONNX
Runtime: "Got invalid dimensions for input: input_ids"; ExecuTorch: ``numel`` check failures). The
model code is the cause. ``torch.arange(n - 1, -1, -1)`` is the same descending int64 vector with
a symbolic length.

Upstream: the pin without an error is torch.export's answer to model code that turns a dynamic
size into a Python int (https://github.com/pytorch/pytorch/issues/140011); no transformers issue
tracks CPM-Ant's list.
"""

from __future__ import annotations

from typing import Any

import torch

from ..registry import register_patch

__all__ = ["position_mask_from_arange"]


@register_patch(
    "dynamo",
    "transformers.models.cpmant.modeling_cpmant.CpmAntModel._prepare_attention_mask",
    reason=(
        "CPM-Ant builds its left-padding positions as torch.tensor(list(range(seqlen - "
        "prompt_length))[::-1]) (model code): range() pins the sequence axis to the example's "
        "length; the same positions come from torch.arange"
    ),
    upstream="https://github.com/pytorch/pytorch/issues/140011",
    versions=("transformers", ">=5,<6"),
)
def position_mask_from_arange(original: Any) -> Any:
    """Replace ``_prepare_attention_mask(self, input_ids, span, context, length)`` with the same
    computation, the descending positions from ``torch.arange``.

    Shapes: ``input_ids`` / ``span`` / ``context`` ``(batch, seq)`` (``seq`` = prompt length +
    text length), ``length`` ``(batch,)`` int64 -> ``(batch, seq, seq)`` bool, True where a query
    may attend to a key.

    Source: the model code (``list(range(seqlen - self.prompt_length))`` in
        ``modeling_cpmant.py``); https://github.com/pytorch/pytorch/issues/140011
    """
    del original

    def _prepare_attention_mask(self: Any, input_ids: torch.Tensor, span: torch.Tensor,
                                context: torch.Tensor, length: torch.Tensor) -> torch.Tensor:
        batch, seqlen = input_ids.size(0), input_ids.size(1)
        device = input_ids.device
        positions = torch.arange(seqlen, device=device)
        directional_mask_2d = positions <= positions.view(-1, 1)
        attention_mask = context[:, None, :] | (
            context[:, :, None].logical_not() & directional_mask_2d.view(1, seqlen, seqlen))
        attention_mask = attention_mask & (span[:, None, :] == span[:, :, None])
        text = seqlen - self.prompt_length
        descending = torch.arange(text - 1, -1, -1, device=device)
        mask_1d = descending[None, :].repeat(batch, 1) < length[:, None]
        prompt = torch.ones(batch, self.prompt_length, device=device).bool()
        mask_1d = torch.cat((prompt, mask_1d), dim=1)
        return mask_1d.view(batch, seqlen, 1) & mask_1d.view(batch, 1, seqlen) & attention_mask

    return _prepare_attention_mask
