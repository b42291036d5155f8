"""Windowed-attention reordering (``get_vision_window_index``) without a loop over ``grid_thw``.

Qwen2.5-VL and the towers that copy it (Qwen2.5-Omni, EXAONE 4.5, MiniCPM-V 4.6/4.7, MiniCPM-OCR,
Muse) run most vision blocks as window attention.
``transformers.vision_utils.get_vision_window_index`` computes the token order and the window
boundaries with a Python loop over ``grid_thw.tolist()``, ``int()`` on every grid value, boolean
indexing and ``cu_window_seqlens.extend(t.tolist())``. Under ``torch.export`` the grid values are
unbacked, so ``int(grid_t)`` raises ``GuardOnDataDependentSymNode`` before the first block runs.

:func:`window_index` computes the same two tensors with tensor ops only: every merged token gets a
sort key (image, frame, window row, window column, row in window, column in window); the window
order is the ``argsort`` of that key, and the window boundaries are where the sorted window id
changes. Only the total number of merged tokens becomes an unbacked size (one ``.item()``), which
``torch.export`` carries as a symbol instead of guarding on it.

That symbol has no upper bound, which ExecuTorch needs to plan memory (``Cannot evaluate a finite
upper bound``). The window order is a permutation of the merged tokens of the patches the tower
embeds, so :func:`window_order_of_every_token` checks, where the order is applied
(``permute_input_for_window_attn``), that its length is the patch count over the merge unit, and
that the permuted tensor has one row per patch (the rotary table's rows are the other count read
from ``grid_thw``): both are then expressions of the input's patch axis and bounded with it.
"""

from __future__ import annotations

from typing import Any

import torch

from ..registry import register_patch

__all__ = ["WINDOW_INDEX_TARGETS", "WINDOW_PERMUTE_TARGETS", "window_index",
           "window_order_of_every_token"]

WINDOW_INDEX_TARGETS: tuple[str, ...] = (
    "transformers.vision_utils.get_vision_window_index",
    "transformers.models.qwen2_5_vl.modeling_qwen2_5_vl.get_vision_window_index",
    "transformers.models.qwen2_5_omni.modeling_qwen2_5_omni.get_vision_window_index",
    "transformers.models.exaone4_5.modeling_exaone4_5.get_vision_window_index",
    "transformers.models.minicpm_ocr.modeling_minicpm_ocr.get_vision_window_index",
    "transformers.models.minicpmv4_6.modeling_minicpmv4_6.get_vision_window_index",
    "transformers.models.minicpmv4_7.modeling_minicpmv4_7.get_vision_window_index",
    "transformers.models.muse_glimmer.modeling_muse_glimmer.get_vision_window_index",
    "transformers.models.muse_spark.modeling_muse_spark.get_vision_window_index",
)
"""The function itself and every modeling module of transformers 5.24 that imports it by name
(patching only ``vision_utils`` would not reach a name bound at import time)."""


def window_index(
    grid_thw: torch.Tensor,
    spatial_merge_size: int,
    window_size: int,
    patch_size: int,
    kwargs: dict | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Loop-free ``get_vision_window_index``: same signature, same results.

    Args:
        grid_thw: ``(num_images, 3)`` integer ``(t, h, w)`` in patches per image or video.
        spatial_merge_size: ``m``; a merged token covers ``m x m`` patches.
        window_size: window side in pixels.
        patch_size: patch side in pixels.
        kwargs: optional caller kwargs; when they hold both ``"window_index"`` and
            ``"cu_window_seqlens"`` these are popped and returned, as upstream does.

    Returns:
        ``window_index``: ``(num_merged_tokens,)`` int64, the merged-token order window by window.
        ``cu_window_seqlens``: ``(num_windows + 1,)`` int32 window boundaries in patches, empty
        windows dropped (upstream's ``unique_consecutive``).

    Source:
        https://github.com/pytorch/pytorch/issues/158786 (data-dependent loops of the Qwen-VL
        vision encoder under torch.export); upstream code: ``transformers/vision_utils.py``,
        ``get_vision_window_index``.
    """
    if kwargs is not None:
        given_index = kwargs.pop("window_index", None)
        given_cu = kwargs.pop("cu_window_seqlens", None)
        if given_index is not None and given_cu is not None:
            return given_index, given_cu
    merge = spatial_merge_size
    win = window_size // merge // patch_size
    device = grid_thw.device
    grid = grid_thw.to(torch.int64)
    frames, rows, cols = grid[:, 0], grid[:, 1] // merge, grid[:, 2] // merge
    per_image = frames * rows * cols
    ends = per_image.cumsum(0)
    starts = ends - per_image
    total = ends[-1].item()
    torch._check(total >= 0)

    token = torch.arange(total, device=device, dtype=torch.int64)
    image = (token[:, None] >= ends[None, :]).sum(-1)
    local = token - starts[image]
    plane = (rows * cols)[image]
    frame = local // plane
    row = (local % plane) // cols[image]
    col = (local % plane) % cols[image]

    windows_h = rows // win + 1
    windows_w = cols // win + 1
    windows = frames * windows_h * windows_w
    window_start = windows.cumsum(0) - windows
    window_id = (
        window_start[image]
        + frame * (windows_h * windows_w)[image]
        + (row // win) * windows_w[image]
        + col // win
    )
    key = window_id * (win * win) + (row % win) * win + col % win
    order = torch.argsort(key)

    sorted_window = window_id[order]
    breaks = torch.nonzero(sorted_window[1:] != sorted_window[:-1]).flatten() + 1
    bounds = torch.cat([breaks.new_zeros(1), breaks, ends[-1:]])
    cu_window_seqlens = (bounds * (merge * merge)).to(torch.int32)
    return order, cu_window_seqlens


@register_patch(
    "dynamo",
    *WINDOW_INDEX_TARGETS,
    reason=(
        "get_vision_window_index loops over grid_thw.tolist() and calls int() on each value; "
        "under torch.export the grid values are unbacked and int() raises "
        "GuardOnDataDependentSymNode, so the window order is computed with tensor ops instead"
    ),
    upstream="https://github.com/pytorch/pytorch/issues/158786",
    versions=("transformers", ">=5,<6"),
)
def loop_free_window_index(original: Any) -> Any:
    """Replace ``get_vision_window_index`` with :func:`window_index`.

    Source:
        https://github.com/pytorch/pytorch/issues/158786
    """
    return window_index


WINDOW_PERMUTE_TARGETS: tuple[str, ...] = (
    "transformers.models.qwen2_5_vl.modeling_qwen2_5_vl."
    "Qwen2_5_VisionTransformerPretrainedModel.permute_input_for_window_attn",
    "transformers.models.qwen2_5_omni.modeling_qwen2_5_omni."
    "Qwen2_5OmniVisionEncoder.permute_input_for_window_attn",
    "transformers.models.exaone4_5.modeling_exaone4_5."
    "Exaone4_5_VisionModel.permute_input_for_window_attn",
)
"""Every vision tower of transformers 5.24 that reorders its tokens by ``window_index``."""


@register_patch(
    "dynamo",
    *WINDOW_PERMUTE_TARGETS,
    reason=(
        "the window order's length is a size read from grid_thw's values, with no upper bound, "
        "which ExecuTorch cannot plan memory for; the order is checked to cover every merged "
        "token (seq_len // spatial_merge_unit), which bounds it by the input's patch axis"
    ),
    upstream="https://github.com/pytorch/pytorch/issues/158786",
    versions=("transformers", ">=5,<6"),
)
def window_order_of_every_token(original: Any) -> Any:
    """Wrap ``permute_input_for_window_attn(self, input_tensor, window_index, seq_len)``.

    ``input_tensor`` ``(seq_len, ...)``: patches, ``spatial_merge_unit`` per merged token (the
    hidden states, or the rotary tables of ``get_vision_position_ids``' one position per
    patch, whose count is also read from ``grid_thw``); ``window_index`` ``(merged_tokens,)``
    int64. Before the original runs, ``torch._check(input_tensor.size(0) == seq_len)`` and
    ``torch._check(merged_tokens == seq_len // spatial_merge_unit)``: true of every input the
    original accepts (one row per patch; the order is a permutation of the merged tokens, and a
    shorter one would make its ``reshape(seq_len, -1)`` fail or mix rows). Under
    ``torch.export`` they tie both counts read from data to the input's patch axis.

    Source:
        https://github.com/pytorch/pytorch/issues/158786
    """

    def permute_input_for_window_attn(self: Any, input_tensor: torch.Tensor,
                                      window_index: torch.Tensor, seq_len: int) -> torch.Tensor:
        torch._check(input_tensor.size(0) == seq_len)
        torch._check(window_index.size(0) == seq_len // self.spatial_merge_unit)
        return original(self, input_tensor, window_index, seq_len)

    return permute_input_for_window_attn
