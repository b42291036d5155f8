"""FSMT's decoder padding mask, kept as a tensor when the batch has no padding.

``transformers.models.fsmt.modeling_fsmt.make_padding_mask`` returns ``None`` when no token is
padding (``if not padding_mask.any(): padding_mask = None``): a Python branch on tensor data,
which ``torch.export`` cannot trace (``GuardOnDataDependentSymNode: Eq(u0, 1)``), so FSMT does
not export at all. The model code is the cause. An all-``False`` key padding mask masks nothing
(the attention ``masked_fill``\\ s no position), so returning the mask unconditionally gives the
same outputs as ``None``.
"""

from __future__ import annotations

from typing import Any

import torch

from ..registry import register_patch

__all__ = ["padding_mask_always_a_tensor"]

_UPSTREAM = "https://github.com/facebookresearch/fairseq/pull/618"
"""FSMT ports fairseq's transformer; this fairseq change met the same ``None`` placeholder for
"no padding" when exporting (and replaced it with a tensor). No transformers issue tracks it."""


@register_patch(
    "dynamo",
    "transformers.models.fsmt.modeling_fsmt.make_padding_mask",
    reason=(
        "FSMT's make_padding_mask returns None when no token is padding, a Python branch on "
        "tensor data (model code): capture fails with GuardOnDataDependentSymNode; an "
        "all-False mask masks nothing, so the mask is always returned"
    ),
    upstream=_UPSTREAM,
    versions=("transformers", ">=5,<6"),
)
def padding_mask_always_a_tensor(original: Any) -> Any:
    """Replace ``make_padding_mask(input_ids, padding_idx=1)`` with one that always returns
    ``input_ids.eq(padding_idx)``: ``(batch, tgt_len)`` bool, True at padding.

    Source: the model code (``if not padding_mask.any()`` in ``modeling_fsmt.py``), ported
        from fairseq, which met the same placeholder when exporting:
        https://github.com/facebookresearch/fairseq/pull/618
    """
    del original

    def make_padding_mask(input_ids: torch.Tensor, padding_idx: int = 1) -> torch.Tensor:
        return input_ids.eq(padding_idx)

    return make_padding_mask
