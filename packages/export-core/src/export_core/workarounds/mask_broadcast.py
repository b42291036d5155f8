"""Attention masks from a custom mask function built by broadcasting instead of ``torch.vmap``.

transformers' ``masking_utils`` (5.x) builds a 4-D attention mask by calling an index-based
*mask function* ``f(batch_idx, head_idx, q_idx, kv_idx) -> bool``. Its default path broadcasts
the four index ranges against each other; when a model passes an ``and_mask_function`` or
``or_mask_function`` (a sliding window, a chunked-limited window, a blockwise overlay over image
tokens, a packed-sequence mask...) it switches to ``torch.vmap`` over the four axes instead
(``_vmap_expansion_sdpa``). ``torch.export`` keeps the vmap as functorch ``_add_batch_dim`` /
``_remove_batch_dim`` calls in the pre-dispatch program, and re-tracing that program
(``run_decompositions``, which ``torch.onnx`` and ExecuTorch's ``to_edge`` both do) fails inside
the batching rules: "Either your tensor may have escaped from inside a function being vmapped"
on ``new_ones`` (Gemma 4's audio encoder, the Nemotron ASR encoders, Unlimited-OCR).

Every mask function transformers ships is index-based (comparisons, integer arithmetic and
gathers ``ids[batch_idx, q_idx]``), so calling it once on the broadcast index grids
``(batch, 1, 1, 1)``, ``(1, heads, 1, 1)``, ``(1, 1, q, 1)``, ``(1, 1, 1, kv)`` gives the same
``(batch, heads, q, kv)`` boolean mask as the vmapped calls, element for element, with plain
tensor ops.

Upstream: vmap in an exported program does not survive re-tracing
(https://github.com/pytorch/pytorch/issues/153063).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..registry import register_patch

__all__ = ["BROADCAST_MASK_TARGET", "broadcast_mask_expansion", "expand_by_broadcasting"]

BROADCAST_MASK_TARGET = "transformers.masking_utils._vmap_expansion_sdpa"
"""transformers' vmap expansion of a mask function over ``(batch, head, q, kv)``."""


def expand_by_broadcasting(mask_function: Callable[..., Any]) -> Callable[..., torch.Tensor]:
    """Expand an index-based mask function over its four index ranges by broadcasting.

    Args:
        mask_function: ``f(batch_idx, head_idx, q_idx, kv_idx)`` built from tensor ops that
            broadcast (all of transformers' ``masking_utils`` functions and overlays).

    Returns:
        ``g(batch_arange, head_arange, q_arange, kv_arange)`` taking 1-D int64 index tensors of
        lengths ``batch``, ``heads``, ``q``, ``kv`` and returning a ``(batch, heads, q, kv)``
        bool tensor equal to the ``torch.vmap`` expansion's.

    Raises:
        RuntimeError: from ``expand`` when the mask function's result does not broadcast to
            ``(batch, heads, q, kv)`` (a function that is not index-based).
    """

    def expanded(batch: torch.Tensor, head: torch.Tensor, q: torch.Tensor,
                 kv: torch.Tensor) -> torch.Tensor:
        mask = mask_function(batch[:, None, None, None], head[None, :, None, None],
                             q[None, None, :, None], kv[None, None, None, :])
        if not isinstance(mask, torch.Tensor):
            mask = torch.tensor(bool(mask), device=q.device)
        return mask.to(torch.bool).expand(batch.shape[0], head.shape[0], q.shape[0], kv.shape[0])

    return expanded


@register_patch(
    "dynamo",
    BROADCAST_MASK_TARGET,
    reason=(
        "a custom and/or mask function makes transformers build the attention mask with "
        "torch.vmap; the exported program keeps functorch batch-dim calls that fail when "
        "re-traced (\"tensor may have escaped from inside a function being vmapped\"): the "
        "index-based mask function is evaluated once on broadcast index grids instead"
    ),
    upstream="https://github.com/pytorch/pytorch/issues/153063",
    versions=("transformers", ">=5,<6"),
)
def broadcast_mask_expansion(original: Any) -> Any:
    """Replace ``_vmap_expansion_sdpa(mask_function)`` with :func:`expand_by_broadcasting`.

    Shapes: the returned function maps index ranges ``(batch,)``, ``(heads,)``, ``(q,)``,
    ``(kv,)`` (int64) to a ``(batch, heads, q, kv)`` bool mask.

    Source: https://github.com/pytorch/pytorch/issues/153063 (vmap in exported programs).
    """

    def _vmap_expansion_sdpa(mask_function: Callable[..., Any]) -> Callable[..., torch.Tensor]:
        return expand_by_broadcasting(mask_function)

    return _vmap_expansion_sdpa
