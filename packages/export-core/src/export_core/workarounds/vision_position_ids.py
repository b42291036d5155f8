"""Vision rotary position ids (``get_vision_position_ids``) without a loop over ``grid_thw``.

``transformers.vision_utils.get_vision_position_ids`` builds the ``(h, w)`` position of every patch
with a Python loop over ``grid_thw.tolist()``. Under ``torch.export`` the loop unrolls once per
image of the example input, so the exported program only accepts that number of images: a packed
input with the same patch total but a different number of images (one 4x8 image instead of two
4x4 images), or a ``grid_thw`` whose first axis is declared dynamic, cannot be used.

:func:`position_ids` computes the same tensor with tensor ops only, from the index of every patch
in the packed sequence: its image (a comparison against the cumulative patch counts), its frame,
its ``m x m`` merge block and its place inside the block. Only the total number of patches becomes
an unbacked size (one ``.item()``).
"""

from __future__ import annotations

from typing import Any

import torch

from ..registry import register_patch

__all__ = ["POSITION_IDS_TARGETS", "position_ids"]

POSITION_IDS_TARGETS: tuple[str, ...] = (
    "transformers.vision_utils.get_vision_position_ids",
    "transformers.models.qwen2_vl.modeling_qwen2_vl.get_vision_position_ids",
    "transformers.models.qwen2_5_vl.modeling_qwen2_5_vl.get_vision_position_ids",
    "transformers.models.qwen2_5_omni.modeling_qwen2_5_omni.get_vision_position_ids",
    "transformers.models.qwen3_vl.modeling_qwen3_vl.get_vision_position_ids",
    "transformers.models.qwen3_vl_moe.modeling_qwen3_vl_moe.get_vision_position_ids",
    "transformers.models.qwen3_5.modeling_qwen3_5.get_vision_position_ids",
    "transformers.models.qwen3_5_moe.modeling_qwen3_5_moe.get_vision_position_ids",
    "transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe.get_vision_position_ids",
    "transformers.models.qwen4_exp.modeling_qwen4_exp.get_vision_position_ids",
    "transformers.models.glm4v.modeling_glm4v.get_vision_position_ids",
    "transformers.models.glm4v_moe.modeling_glm4v_moe.get_vision_position_ids",
    "transformers.models.glm5_next.modeling_glm5_next.get_vision_position_ids",
    "transformers.models.glm_image.modeling_glm_image.get_vision_position_ids",
    "transformers.models.glm_ocr.modeling_glm_ocr.get_vision_position_ids",
    "transformers.models.cohere_compass.modeling_cohere_compass.get_vision_position_ids",
    "transformers.models.dots3_note.modeling_dots3_note.get_vision_position_ids",
    "transformers.models.ernie4_5_vl_moe.modeling_ernie4_5_vl_moe.get_vision_position_ids",
    "transformers.models.exaone4_5.modeling_exaone4_5.get_vision_position_ids",
    "transformers.models.inkling2.modeling_inkling2.get_vision_position_ids",
    "transformers.models.kimi_k25.modeling_kimi_k25.get_vision_position_ids",
    "transformers.models.lfm3_vl.modeling_lfm3_vl.get_vision_position_ids",
    "transformers.models.minimax_m3_vl.modeling_minimax_m3_vl.get_vision_position_ids",
    "transformers.models.muse_glimmer.modeling_muse_glimmer.get_vision_position_ids",
    "transformers.models.muse_spark.modeling_muse_spark.get_vision_position_ids",
    "transformers.models.paddleocr_vl.modeling_paddleocr_vl.get_vision_position_ids",
    "transformers.models.step3p7.modeling_step3p7.get_vision_position_ids",
    "transformers.models.video_llama_3.modeling_video_llama_3.get_vision_position_ids",
)
"""The function itself and every modeling module of transformers 5.24 that imports it by name."""


def position_ids(
    grid_thw: torch.Tensor,
    spatial_merge_size: int | torch.Tensor,
    include_temporal: bool = False,
    kwargs: dict | None = None,
) -> torch.Tensor:
    """Loop-free ``get_vision_position_ids``: same signature, same result.

    Args:
        grid_thw: ``(num_images, 3)`` integer ``(t, h, w)`` in patches per image or video.
        spatial_merge_size: ``m``, an int or a ``(num_images,)`` integer tensor.
        include_temporal: prepend the frame index as a first column.
        kwargs: optional caller kwargs; a ``"position_ids"`` entry is popped and returned, as
            upstream does.

    Returns:
        ``(num_patches, 2)`` int64 ``(h, w)`` positions, or ``(num_patches, 3)`` ``(t, h, w)``
        with ``include_temporal``, laid out block-major over ``m x m`` merge blocks.

    Source:
        https://github.com/pytorch/pytorch/issues/158786 (data-dependent loops of the Qwen-VL
        vision encoder under torch.export); upstream code: ``transformers/vision_utils.py``,
        ``get_vision_position_ids``.
    """
    if kwargs is not None and (given := kwargs.pop("position_ids", None)) is not None:
        return given
    device = grid_thw.device
    grid = grid_thw.to(torch.int64)
    frames, rows, cols = grid[:, 0], grid[:, 1], grid[:, 2]
    if isinstance(spatial_merge_size, torch.Tensor):
        merge = spatial_merge_size.to(device=device, dtype=torch.int64).expand(grid.shape[0])
    else:
        merge = torch.full_like(frames, int(spatial_merge_size))
    per_image = frames * rows * cols
    ends = per_image.cumsum(0)
    starts = ends - per_image
    total = ends[-1].item()
    torch._check(total >= 0)

    patch = torch.arange(total, device=device, dtype=torch.int64)
    image = (patch[:, None] >= ends[None, :]).sum(-1)
    local = patch - starts[image]
    plane = (rows * cols)[image]
    m = merge[image]
    in_plane = local % plane
    block, in_block = in_plane // (m * m), in_plane % (m * m)
    blocks_w = cols[image] // m
    h = (block // blocks_w) * m + in_block // m
    w = (block % blocks_w) * m + in_block % m
    if include_temporal:
        return torch.stack([local // plane, h, w], dim=-1)
    return torch.stack([h, w], dim=-1)


@register_patch(
    "dynamo",
    *POSITION_IDS_TARGETS,
    reason=(
        "get_vision_position_ids loops over grid_thw.tolist(), so torch.export unrolls it once "
        "per example image and the program rejects any other number of images; the positions "
        "are computed with tensor ops instead"
    ),
    upstream="https://github.com/pytorch/pytorch/issues/158786",
    versions=("transformers", ">=5,<6"),
)
def loop_free_position_ids(original: Any) -> Any:
    """Replace ``get_vision_position_ids`` with :func:`position_ids`.

    Source:
        https://github.com/pytorch/pytorch/issues/158786
    """
    return position_ids
