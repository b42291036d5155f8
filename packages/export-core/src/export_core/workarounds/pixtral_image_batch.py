"""Pixtral's vision encoder over a batch of same-size images without a loop over the images.

``PixtralVisionModel.forward`` (transformers 5.x) cuts each image's patch grid to its own size
with ``for embed, size in zip(patch_embeds, image_sizes)``, builds the 2-D rotary positions and
the block-diagonal attention mask (one block per image) with further Python loops over that
list. Without ``image_sizes`` every image has the size of ``pixel_values``, but the loops still
run once per image: ``torch.export`` unrolls them for the example's batch and pins the batch
(``Eq(batch, 2)``), so ONNX Runtime and ExecuTorch reject every other number of images. The
model code is the cause.

When ``image_sizes`` is ``None`` (and Flash Attention is not requested, which takes packed
lengths), the replacement computes the same tensors with batched ops: the patch grids
``(batch, hidden, rows, cols)`` flattened in image order into one sequence ``(1, batch * rows *
cols, hidden)``, the ``(rows, cols)`` positions of one grid repeated per image, and the block
mask from each token's image index (``token // (rows * cols)``). With ``image_sizes`` it runs
the original forward.

Upstream: a loop over a dynamic batch unrolls under ``torch.export``
(https://github.com/pytorch/pytorch/issues/140011); no transformers issue tracks the loop.
"""

from __future__ import annotations

from typing import Any

import torch

from ..registry import register_patch

__all__ = ["PIXTRAL_FORWARD", "image_block_mask", "pixtral_images_batched"]

PIXTRAL_FORWARD = "transformers.models.pixtral.modeling_pixtral.PixtralVisionModel.forward"
"""Pixtral's vision encoder (transformers 5.x)."""


def image_block_mask(images: int, tokens_per_image: Any, like: torch.Tensor) -> torch.Tensor:
    """The additive block-diagonal attention mask of ``images`` equal-length images.

    Args:
        images: number of images (an int or ``SymInt``).
        tokens_per_image: patches per image, ``rows * cols`` (an int or ``SymInt``).
        like: a float tensor whose dtype and device the mask takes.

    Returns:
        ``(1, 1, n, n)`` with ``n = images * tokens_per_image``: 0 where query and key belong to
        the same image, the dtype's minimum elsewhere (what
        ``generate_block_attention_mask`` builds).
    """
    image = torch.arange(images * tokens_per_image, device=like.device) // tokens_per_image
    same = image[:, None] == image[None, :]
    zero = torch.zeros((), dtype=like.dtype, device=like.device)
    low = torch.full((), torch.finfo(like.dtype).min, dtype=like.dtype, device=like.device)
    return torch.where(same, zero, low)[None, None]


@register_patch(
    "dynamo",
    PIXTRAL_FORWARD,
    reason=(
        "Pixtral's vision encoder loops over the images (patch grids, positions, block mask) "
        "even when all share pixel_values' size (model code): the unrolled loop pins the "
        "batch; same-size images are processed with batched ops"
    ),
    upstream="https://github.com/pytorch/pytorch/issues/140011",
    versions=("transformers", ">=5,<6"),
)
def pixtral_images_batched(original: Any) -> Any:
    """Replace ``PixtralVisionModel.forward(self, pixel_values, image_sizes=None, **kwargs)``.

    Shapes: ``pixel_values`` ``(batch, channels, height, width)`` float -> the transformer's
    output over ``(1, batch * (height // patch) * (width // patch), hidden)`` tokens (float,
    the patch convolution's dtype), as the original.

    Source: the model code (``zip(patch_embeds, image_sizes)`` in ``modeling_pixtral.py``);
        https://github.com/pytorch/pytorch/issues/140011
    """
    from transformers.utils.generic import is_flash_attention_requested

    def forward(self: Any, pixel_values: torch.Tensor, image_sizes: Any = None,
                **kwargs: Any) -> Any:
        if image_sizes is not None or is_flash_attention_requested(self.config):
            return original(self, pixel_values, image_sizes, **kwargs)
        grids = self.patch_conv(pixel_values.to(dtype=self.patch_conv.weight.dtype))
        images, hidden, rows, cols = grids.shape
        per_image = rows * cols
        patch_embeds = grids.flatten(2).transpose(1, 2).reshape(1, images * per_image, hidden)
        patch_embeds = self.ln_pre(patch_embeds)
        row_ids, col_ids = torch.meshgrid(torch.arange(rows, device=grids.device),
                                          torch.arange(cols, device=grids.device), indexing="ij")
        position_ids = torch.stack([row_ids.flatten(), col_ids.flatten()], dim=-1).repeat(images, 1)
        position_embeddings = self.patch_positional_embedding(patch_embeds, position_ids)
        attention_mask = image_block_mask(images, per_image, patch_embeds)
        return self.transformer(patch_embeds, attention_mask=attention_mask,
                                position_embeddings=position_embeddings, **kwargs)

    # The original's decorators (config defaults, output capture) wrap the replacement too.
    from transformers.utils.generic import merge_with_config_defaults
    from transformers.utils.output_capturing import capture_outputs

    return merge_with_config_defaults(capture_outputs(forward))
