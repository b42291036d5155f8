"""Packed (``cu_seqlens``) attention without a Python loop over data-dependent segment lengths.

Vision and audio encoders of the Qwen-VL family and its descendants (Qwen2-VL, Qwen2.5-VL,
Qwen3-VL, GLM-4V, PaddleOCR-VL, ... 36 attention classes in transformers 5.24) pack every image of
a batch into one sequence and describe the segments with ``cu_seqlens``. Without a varlen flash
kernel their attention ``forward`` takes this branch::

    lengths = cu_seqlens[1:] - cu_seqlens[:-1]
    splits = [torch.split(t, lengths.tolist(), dim=2) for t in (q, k, v)]
    outputs = [attention_interface(self, q, k, v, ...)[0] for q, k, v in zip(*splits)]
    attn_output = torch.cat(outputs, dim=1)

``cu_seqlens`` is computed from ``grid_thw`` with ``repeat_interleave``, so under ``torch.export``
its length is an unbacked symbol and ``lengths.tolist()`` hits ``GuardOnDataDependentSymNode``.

Every one of those ``forward`` methods also has the varlen branch, taken when
``is_flash_attention_requested(self.config)``, which makes one attention call with
``cu_seq_lens_q`` / ``cu_seq_lens_k``. The patch routes each call through that branch, served by
:func:`packed_attention_forward`: a block-diagonal mask built from ``cu_seqlens`` with tensor ops
(no loop, no ``.tolist()``) and one masked attention, numerically equal to the per-segment loop.

The routing is local to one call: the attention module's ``config`` is swapped for a read-only view
that reports :data:`PACKED_ATTENTION_IMPLEMENTATION`, and that name is registered in transformers'
``AttentionInterface`` (mapped to :func:`packed_attention_forward`) only while the call runs; both
are undone in ``finally``.

Cost: the mask is ``(num_patches, num_patches)`` booleans per call, where the loop held only the
per-image blocks; fine for export, but quadratic in the total number of packed patches.
"""

from __future__ import annotations

import functools
import inspect
import sys
from typing import Any

import torch

from ..registry import register_patch

__all__ = [
    "PACKED_ATTENTION_IMPLEMENTATION",
    "PACKED_ATTENTION_TARGETS",
    "block_diagonal_mask",
    "packed_attention_forward",
]

PACKED_ATTENTION_IMPLEMENTATION = "flash_packed_export"
"""Attention implementation name the routed call reports. It contains ``"flash"`` so that
``transformers.utils.generic.is_flash_attention_requested`` selects the varlen branch, and no
version digit, so that no version-specific flash check matches it."""

_UPSTREAM = "https://github.com/pytorch/pytorch/issues/158786"
_VERSIONS = ("transformers", ">=5,<6")

PACKED_ATTENTION_TARGETS: tuple[str, ...] = (
    "transformers.models.qwen2_vl.modeling_qwen2_vl.VisionAttention.forward",
    "transformers.models.qwen2_5_vl.modeling_qwen2_5_vl.Qwen2_5_VLVisionAttention.forward",
    "transformers.models.qwen2_5_omni.modeling_qwen2_5_omni.Qwen2_5OmniVisionAttention.forward",
    "transformers.models.qwen2_5_omni.modeling_qwen2_5_omni.Qwen2_5OmniAudioAttention.forward",
    "transformers.models.qwen3_vl.modeling_qwen3_vl.Qwen3VLVisionAttention.forward",
    "transformers.models.qwen3_vl_moe.modeling_qwen3_vl_moe.Qwen3VLMoeVisionAttention.forward",
    "transformers.models.qwen3_5.modeling_qwen3_5.Qwen3_5VisionAttention.forward",
    "transformers.models.qwen3_5_moe.modeling_qwen3_5_moe.Qwen3_5MoeVisionAttention.forward",
    "transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe"
    ".Qwen3OmniMoeVisionAttention.forward",
    "transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe.Qwen3OmniMoeAudioAttention.forward",
    "transformers.models.qwen3_asr.modeling_qwen3_asr.Qwen3ASRAudioAttention.forward",
    "transformers.models.qwen4_exp.modeling_qwen4_exp.Qwen4ExpVisionAttention.forward",
    "transformers.models.glm4v.modeling_glm4v.Glm4vVisionAttention.forward",
    "transformers.models.glm4v_moe.modeling_glm4v_moe.Glm4vMoeVisionAttention.forward",
    "transformers.models.glm5_next.modeling_glm5_next.Glm5NextVisionAttention.forward",
    "transformers.models.glm_image.modeling_glm_image.GlmImageVisionAttention.forward",
    "transformers.models.glm_ocr.modeling_glm_ocr.GlmOcrVisionAttention.forward",
    "transformers.models.cohere_compass.modeling_cohere_compass"
    ".CohereCompassVisionAttention.forward",
    "transformers.models.cosmos3_edge.modeling_cosmos3_edge.Cosmos3EdgeVisionAttention.forward",
    "transformers.models.dots3_note.modeling_dots3_note.Dots3NoteVisionAttention.forward",
    "transformers.models.ernie4_5_vl_moe.modeling_ernie4_5_vl_moe"
    ".Ernie4_5_VLMoeVisionAttention.forward",
    "transformers.models.exaone4_5.modeling_exaone4_5.Exaone4_5_VisionAttention.forward",
    "transformers.models.hunyuan_vl.modeling_hunyuan_vl.HunYuanVLVisionAttention.forward",
    "transformers.models.hy_v4_vl.modeling_hy_v4_vl.HYV4VLVisionAttention.forward",
    "transformers.models.inkling2.modeling_inkling2.Inkling2VisionAttention.forward",
    "transformers.models.kimi_k25.modeling_kimi_k25.Kimi_K25VisionAttention.forward",
    "transformers.models.lfm3_vl.modeling_lfm3_vl.Lfm3VlVisionAttention.forward",
    "transformers.models.minicpm_ocr.modeling_minicpm_ocr.MiniCPMOcrVisionAttention.forward",
    "transformers.models.minicpmv4_6.modeling_minicpmv4_6.MiniCPMV4_6VisionAttention.forward",
    "transformers.models.minicpmv4_7.modeling_minicpmv4_7.MiniCPMV4_7VisionAttention.forward",
    "transformers.models.minimax_m3_vl.modeling_minimax_m3_vl.MiniMaxM3VLVisionAttention.forward",
    "transformers.models.muse_glimmer.modeling_muse_glimmer.MuseGlimmerVisionAttention.forward",
    "transformers.models.muse_spark.modeling_muse_spark.MuseSparkVisionAttention.forward",
    "transformers.models.paddleocr_vl.modeling_paddleocr_vl.PaddleOCRVisionAttention.forward",
    "transformers.models.radio.modeling_radio.RadioAttention.forward",
    "transformers.models.video_llama_3.modeling_video_llama_3.VideoLlama3VisionAttention.forward",
)
"""Attention ``forward`` methods of transformers 5.24 with the per-segment ``torch.split`` loop
(found by grepping ``lengths.tolist(), dim=2`` in ``transformers/models``). Targets missing from
the installed version are skipped by :func:`~export_core.patching.apply_patches`."""


def _segment_ids(cu_seqlens: torch.Tensor, length: int | torch.SymInt) -> torch.Tensor:
    """Segment index of every position: ``i`` lies in segment ``j`` when ``cu[j] <= i < cu[j+1]``.

    Args:
        cu_seqlens: ``(num_segments + 1,)`` integer cumulative boundaries, ``cu_seqlens[0] == 0``.
        length: sequence length ``S`` (may be symbolic).

    Returns:
        ``(S,)`` int64 segment ids; positions past ``cu_seqlens[-1]`` get ``num_segments``.
    """
    positions = torch.arange(length, device=cu_seqlens.device, dtype=torch.int64)
    # count the boundaries at or below each position, cu_seqlens[0] == 0 included, minus one:
    # comparing against the whole tensor, not the slice cu_seqlens[1:], keeps a
    # (num_segments,)-sized intermediate out of the graph, whose contiguity check would guard
    # num_segments >= 2 when cu_seqlens is an input with a dynamic length
    boundaries = cu_seqlens.to(torch.int64)
    return (positions[:, None] >= boundaries[None, :]).sum(dim=-1) - 1


def block_diagonal_mask(
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    q_length: int | torch.SymInt,
    k_length: int | torch.SymInt,
) -> torch.Tensor:
    """Boolean block-diagonal mask: a query attends to the keys of its own segment only.

    Built with comparisons and a sum, so the number and lengths of the segments stay tensor data:
    no ``.tolist()``, no ``.item()``, no guard on their values under ``torch.export``.

    Args:
        cu_seqlens_q: ``(num_segments + 1,)`` int32/int64 query boundaries.
        cu_seqlens_k: ``(num_segments + 1,)`` int32/int64 key boundaries.
        q_length: query sequence length ``Sq``.
        k_length: key sequence length ``Sk``.

    Returns:
        ``(1, 1, Sq, Sk)`` bool mask, True where attention is allowed.
    """
    seg_q = _segment_ids(cu_seqlens_q, q_length)
    seg_k = _segment_ids(cu_seqlens_k, k_length)
    return (seg_q[:, None] == seg_k[None, :])[None, None]


def _combine(block: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    """``block`` and an optional extra mask (bool: True = attend, or additive float) as one."""
    if attention_mask is None:
        return block
    if attention_mask.dtype == torch.bool:
        return block & attention_mask
    return torch.where(block, attention_mask, torch.finfo(attention_mask.dtype).min)


def _additive(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Boolean mask (True = attend) as an additive mask: 0 where allowed, dtype's min elsewhere."""
    zero = torch.zeros((), dtype=dtype, device=allowed.device)
    return torch.where(allowed, zero, torch.finfo(dtype).min)


def packed_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None = None,
    *,
    cu_seq_lens_q: torch.Tensor | None = None,
    cu_seq_lens_k: torch.Tensor | None = None,
    max_length_q: Any = None,
    max_length_k: Any = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Varlen attention as one masked attention over the packed sequence.

    Same calling convention as transformers' ``flash_attention_forward`` for packed inputs, and
    dispatched to the implementation the model was configured with (``"eager"`` uses the model
    module's own ``eager_attention_forward`` with an additive mask; anything else uses transformers'
    ``sdpa_attention_forward`` with a boolean mask).

    Args:
        module: the attention module (its ``config`` is the routing view, see module docstring).
        query: ``(1, heads, S, head_dim)`` float.
        key: ``(1, kv_heads, S, head_dim)`` float.
        value: ``(1, kv_heads, S, head_dim)`` float.
        attention_mask: optional extra mask, bool (True = attend) or additive float, broadcastable
            to ``(1, heads, S, S)``; combined with the block-diagonal mask.
        cu_seq_lens_q: ``(num_segments + 1,)`` integer query boundaries.
        cu_seq_lens_k: ``(num_segments + 1,)`` integer key boundaries (defaults to the query's).
        max_length_q: ignored (a flash kernel's launch parameter).
        max_length_k: ignored.
        **kwargs: ``scaling``, ``dropout``, ``is_causal`` ... forwarded to the attention function.

    Returns:
        ``(attn_output, attn_weights)``: ``(1, S, heads, head_dim)`` and, for eager, the
        ``(1, heads, S, S)`` block-diagonal probabilities, else ``None``.

    Source:
        https://github.com/pytorch/pytorch/issues/158786 (the per-segment loop it replaces).
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if cu_seq_lens_q is not None:
        if cu_seq_lens_k is None:
            cu_seq_lens_k = cu_seq_lens_q
        block = block_diagonal_mask(cu_seq_lens_q, cu_seq_lens_k, query.shape[2], key.shape[2])
        attention_mask = _combine(block, attention_mask)
    implementation = getattr(module.config, "wrapped_attn_implementation", None)
    if implementation == "eager":
        eager = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
        if eager is not None:
            if attention_mask is not None and attention_mask.dtype == torch.bool:
                attention_mask = _additive(attention_mask, query.dtype)
            return eager(module, query, key, value, attention_mask, **kwargs)
    return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)


class _PackedAttentionConfig:
    """Read-only view of a config that reports :data:`PACKED_ATTENTION_IMPLEMENTATION`.

    Every other attribute is read from the wrapped config; writes are refused so that nothing the
    routed ``forward`` does can leak into the real config.
    """

    __slots__ = ("_wrapped",)
    _attn_implementation = PACKED_ATTENTION_IMPLEMENTATION

    def __init__(self, config: Any) -> None:
        object.__setattr__(self, "_wrapped", config)

    @property
    def wrapped_attn_implementation(self) -> str | None:
        return self._wrapped._attn_implementation

    def __getattr__(self, name: str) -> Any:
        if name == "_wrapped":  # not yet set (copy, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self._wrapped, name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"routing view of {type(self._wrapped).__name__} is read-only")


def _is_flash(implementation: str | None) -> bool:
    return implementation is not None and "flash" in implementation


_UNUSED_MAX_SEQLEN = 0
"""Placeholder ``max_seqlen`` handed to a routed ``forward``; only flash kernels read it."""


def _parameter_position(function: Any, name: str) -> int | None:
    """Index of parameter ``name`` among ``function``'s arguments after ``self``, or None."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        return None
    for index, parameter in enumerate(parameters[1:]):
        if parameter.name == name and parameter.kind in (
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            inspect.Parameter.KEYWORD_ONLY,
        ):
            return index
    return None


@register_patch(
    "dynamo",
    *PACKED_ATTENTION_TARGETS,
    reason=(
        "the non-flash branch of packed (cu_seqlens) attention splits q/k/v with "
        "`lengths.tolist()` and loops over the segments; under torch.export the lengths are "
        "unbacked and the split raises GuardOnDataDependentSymNode, so the call is routed "
        "through the varlen branch and a block-diagonal mask instead"
    ),
    upstream=_UPSTREAM,
    versions=_VERSIONS,
)
def route_packed_attention_through_varlen(original: Any) -> Any:
    """Wrap a packed attention ``forward`` so it takes its varlen (``cu_seq_lens_q``) branch.

    Models configured with a real flash implementation are left alone (that branch is already
    loop-free); for every other implementation the module's ``config`` is replaced, for the
    duration of the call, by a :class:`_PackedAttentionConfig` view.

    Source:
        https://github.com/pytorch/pytorch/issues/158786
    """

    max_seqlen_position = _parameter_position(original, "max_seqlen")

    @functools.wraps(original)
    def forward(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        config = self.__dict__.get("config")
        if config is None or _is_flash(getattr(config, "_attn_implementation", None)):
            return original(self, *args, **kwargs)
        if (
            max_seqlen_position is not None
            and len(args) <= max_seqlen_position
            and kwargs.get("max_seqlen") is None
        ):
            # get_max_seqlen would compute `.max().item()` for the varlen branch: a dead
            # data-dependent scalar in the graph. packed_attention_forward ignores the value.
            kwargs["max_seqlen"] = _UNUSED_MAX_SEQLEN
        from transformers.modeling_utils import AttentionInterface

        mapping = AttentionInterface._global_mapping
        added = PACKED_ATTENTION_IMPLEMENTATION not in mapping
        if added:
            mapping[PACKED_ATTENTION_IMPLEMENTATION] = packed_attention_forward
        self.__dict__["config"] = _PackedAttentionConfig(config)
        try:
            return original(self, *args, **kwargs)
        finally:
            self.__dict__["config"] = config
            if added:
                mapping.pop(PACKED_ATTENTION_IMPLEMENTATION, None)

    return forward
