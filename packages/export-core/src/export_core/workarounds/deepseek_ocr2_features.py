"""DeepSeek-OCR 2's per-image feature loop, vectorised when there are no local views.

``DeepseekOcr2Model.get_image_features`` builds its pooled features with
``for idx in range(batch_size)``: each image's global tokens followed by the learned view
separator, one tensor per image, which ``forward`` concatenates again. The Python loop over the
batch pins it to the example's (ONNX Runtime: "Got invalid dimensions for input:
pixel_values"; ExecuTorch: a ``numel`` check at another batch). The model code is the cause.

Without local views (``pixel_values_local=None``) every image contributes the same
``(tokens + 1, hidden)`` block, so the loop is one ``cat`` of the global features with the
separator along the token axis and a reshape: the same values in the same order, as one chunk
(the layout of :mod:`.per_item_split`, whose :func:`~.per_item_split.one_chunk_per_split`
repacks the unpatched eager output for validation). With local views (a variable number of
patches per image) the original runs.
"""

from __future__ import annotations

from typing import Any

import torch

from ..patching import MARKS_OWN_FIRING, PatchSession
from ..registry import register_patch
from .per_item_split import one_chunk_per_split

__all__ = ["global_views_in_one_chunk"]

_TARGET = "transformers.models.deepseek_ocr2.modeling_deepseek_ocr2.DeepseekOcr2Model.get_image_features"
_NAME = f"dynamo:{_TARGET}"


@register_patch(
    "dynamo",
    _TARGET,
    reason=(
        "DeepSeek-OCR 2's get_image_features loops over the batch (for idx in range(batch_size)) "
        "to append the view separator to each image's tokens (model code): the batch is pinned; "
        "without local views the loop is one cat along the token axis, as one chunk"
    ),
    upstream="https://github.com/pytorch/pytorch/issues/140011",
    versions=("transformers", ">=5,<6"),
    repack=one_chunk_per_split,
)
def global_views_in_one_chunk(original: Any, session: PatchSession) -> Any:
    """Replace ``get_image_features(self, pixel_values, pixel_values_local=None,
    num_local_patches=None, **kwargs)``: without local views, ``pooler_output`` is
    ``[features]`` with ``features`` ``(batch * (tokens + 1), hidden)``, each image's global
    tokens then the separator (marked fired); with local views, the original.

    Shapes: ``pixel_values`` ``(batch, 3, height, width)`` float.

    Source: the model code (the loop over ``range(batch_size)`` in
        ``modeling_deepseek_ocr2.py``); https://github.com/pytorch/pytorch/issues/140011
    """
    from transformers.models.deepseek_ocr2.modeling_deepseek_ocr2 import (
        DeepseekOcr2ModelOutputWithPooling,
    )
    from transformers.utils import can_return_tuple

    @can_return_tuple
    def get_image_features(self: Any, pixel_values: torch.Tensor,
                           pixel_values_local: torch.Tensor | None = None,
                           num_local_patches: Any = None, **kwargs: Any) -> Any:
        if pixel_values_local is not None:
            return original(self, pixel_values, pixel_values_local, num_local_patches, **kwargs)
        session.mark_fired(_NAME)
        outputs = self.vision_tower(pixel_values, **kwargs)
        features = self.multi_modal_projector(outputs.last_hidden_state)  # (batch, tokens, hidden)
        separator = self.view_separator.to(features.device).expand(features.shape[0], 1, -1)
        merged = torch.cat([features, separator], dim=1).reshape(-1, features.shape[-1])
        return DeepseekOcr2ModelOutputWithPooling(
            last_hidden_state=outputs.last_hidden_state, pooler_output=[merged],
            hidden_states=outputs.hidden_states, attentions=outputs.attentions)

    setattr(get_image_features, MARKS_OWN_FIRING, True)
    return get_image_features
