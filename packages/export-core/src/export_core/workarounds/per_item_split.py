"""Per-image feature splits (``torch.split(features, sizes.tolist())``) kept as one chunk.

The ``get_image_features`` / ``get_video_features`` of Qwen-VL-style models (Qwen2-VL to Qwen3.5,
GLM-4V, PaddleOCR-VL, Kimi-K2.5, Gemma 4, Mistral 3 and others, transformers 5.24) end with::

    split_sizes = (image_grid_thw.prod(-1) // merge**2).tolist()
    vision_outputs.pooler_output = torch.split(image_embeds, split_sizes)

and the ``forward`` that called them concatenates the chunks again
(``torch.cat(pooler_output, dim=0)``) before scattering them into the text embeddings. The round
trip is the identity on the values, but ``.tolist()`` of a tensor whose length is the image
count makes that count a Python ``int``: ``torch.export`` pins it to the example's, so the
artifact rejects any other number of images (ONNX Runtime: ``Got invalid dimensions for input:
image_grid_thw``), and the artifact's outputs hold one tensor per example image.

While one of those methods runs, the patch makes the ``.tolist()`` its own code calls return a
:class:`DeferredSplitSizes` (the sizes stay a tensor), and ``torch.split`` given one returns a
single chunk: all images' features, ``(num_merged_tokens, hidden)``. The ``forward``'s
``torch.cat`` of that one chunk is the same tensor. The artifact's ``pooler_output`` (and
Qwen3-VL's ``deepstack_features``) therefore hold one chunk for all images;
:func:`one_chunk_per_split` puts the unpatched eager model's output into that layout for the
comparison (``torch.cat`` of its per-image chunks), so validation still compares the true
model's values.

Upstream: the per-image split of ``pooler_output`` came with
https://github.com/huggingface/transformers/pull/46405.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from ..patching import MARKS_OWN_FIRING, PatchSession
from ..registry import register_patch

__all__ = ["PER_ITEM_SPLIT_TARGETS", "SPLIT_OUTPUT_FIELDS", "DeferredSplitSizes",
           "one_chunk_per_split"]

_METHODS = {
    "cohere_compass": ("CohereCompassModel", ("get_image_features",)),
    "cosmos3_edge": ("Cosmos3EdgeModel", ("get_image_features",)),
    "cosmos3_omni": ("Cosmos3OmniModel", ("get_image_features",)),
    "embedding_gemma2": ("EmbeddingGemma2Model", ("get_image_features", "get_video_features")),
    "ernie4_5_vl_moe": ("Ernie4_5_VLMoeModel", ("get_image_features", "get_video_features")),
    "exaone4_5": ("Exaone4_5_Model", ("get_image_features", "get_video_features")),
    "gemma4": ("Gemma4Model", ("get_image_features", "get_video_features")),
    "gemma4_unified": ("Gemma4UnifiedModel", ("get_image_features", "get_video_features")),
    "glm46v": ("Glm46VModel", ("get_image_features", "get_video_features")),
    "glm4v": ("Glm4vModel", ("get_image_features", "get_video_features")),
    "glm4v_moe": ("Glm4vMoeModel", ("get_image_features", "get_video_features")),
    "glm5_next": ("Glm5NextModel", ("get_image_features", "get_video_features")),
    "glm_ocr": ("GlmOcrModel", ("get_image_features", "get_video_features")),
    "granite_docling": ("GraniteDoclingModel", ("get_image_features",)),
    "hunyuan_vl": ("HunYuanVLModel", ("get_image_features",)),
    "idefics2": ("Idefics2Model", ("get_image_features",)),
    "idefics3": ("Idefics3Model", ("get_image_features",)),
    "hy_v4_vl": ("HYV4VLModel", ("get_image_features",)),
    "hyperclovax_vision_v2": ("HyperCLOVAXVisionV2Model", ("get_image_features",)),
    "kimi_k25": ("Kimi_K25Model", ("get_image_features",)),
    "lfm2_vl": ("Lfm2VlModel", ("get_image_features",)),
    "lfm3_vl": ("Lfm3VlModel", ("get_image_features",)),
    "minimax_m3_vl": ("MiniMaxM3VLModel", ("get_image_features",)),
    "mistral3": ("Mistral3Model", ("get_image_features",)),
    "mistral_large4": ("MistralLarge4Model", ("get_image_features",)),
    "modernvbert": ("ModernVBertModel", ("get_image_features",)),
    "molmo2": ("Molmo2Model", ("get_image_features",)),
    "muse_glimmer": ("MuseGlimmerModel", ("get_image_features",)),
    "muse_spark": ("MuseSparkModel", ("get_image_features",)),
    "paddleocr_vl": ("PaddleOCRVLModel", ("get_image_features",)),
    "qwen2_5_omni": ("Qwen2_5OmniThinkerModel", ("get_image_features", "get_video_features")),
    "qwen2_5_vl": ("Qwen2_5_VLModel", ("get_image_features", "get_video_features")),
    "qwen2_vl": ("Qwen2VLModel", ("get_image_features", "get_video_features")),
    "qwen3_5": ("Qwen3_5Model", ("get_image_features",)),
    "qwen3_5_moe": ("Qwen3_5MoeModel", ("get_image_features",)),
    "qwen3_omni_moe": ("Qwen3OmniMoeThinkerModel", ("get_image_features", "get_video_features")),
    "qwen3_vl": ("Qwen3VLModel", ("get_image_features",)),
    "qwen3_vl_moe": ("Qwen3VLMoeModel", ("get_image_features",)),
    "qwen4_exp": ("Qwen4ExpModel", ("get_image_features",)),
    "smolvlm": ("SmolVLMModel", ("get_image_features",)),
    "ultravbert": ("UltraVBertModel", ("get_image_features",)),
    "video_llama_3": ("VideoLlama3Model", ("get_image_features",)),
}

PER_ITEM_SPLIT_TARGETS: tuple[str, ...] = tuple(
    f"transformers.models.{family}.modeling_{family}.{cls}.{method}"
    for family, (cls, methods) in _METHODS.items() for method in methods
)
"""The methods (transformers 5.24) that split their pooled features per image or video with
``torch.split(features, sizes.tolist())`` (Idefics2/3, SmolVLM, ModernVBERT, UltraVBERT: per
sample, ``features.split(real_images_per_sample.tolist())``, each chunk flattened to
``(tokens, hidden)``) and whose ``forward`` only concatenates the chunks again. Methods that
loop over the chunks or over the sizes (GLM-Image, DeepSeek-OCR 2,
Nemotron-H Omni, LLaVA with ``image_sizes``) are not among them: one chunk would change their
values."""

SPLIT_OUTPUT_FIELDS = ("pooler_output", "deepstack_features")
"""The output fields those methods fill with per-item chunks: ``pooler_output`` is a tuple of
``(tokens_i, hidden)`` tensors; ``deepstack_features`` a list (one per deepstack layer) of such
tuples."""

_REASON = (
    "get_image_features / get_video_features split the pooled features per image with "
    "torch.split(x, sizes.tolist()) (model code) and forward concatenates them again; "
    ".tolist() pins the image count to the example's and the outputs hold one tensor per "
    "example image; the sizes stay a tensor and the split returns one chunk of all images"
)
_UPSTREAM = "https://github.com/huggingface/transformers/pull/46405"


class DeferredSplitSizes:
    """Per-item split sizes left as a tensor where the model code asked for ``.tolist()``.

    Only ``torch.split(features, deferred)`` / ``features.split(deferred)`` accept it (and return
    one chunk); any other use
    (``len``, iteration, indexing) raises ``TypeError``, so model code that needs the sizes as
    numbers fails loudly instead of computing something else.

    Attributes:
        sizes: ``(num_items,)`` integer tensor, the tokens of each image or video.
    """

    __slots__ = ("sizes",)

    def __init__(self, sizes: torch.Tensor) -> None:
        self.sizes = sizes

    def _refuse(self, *_: Any) -> Any:
        raise TypeError(
            "per-item split sizes are kept as a tensor while exporting (patch "
            "per_item_split_as_one_chunk): only torch.split(features, sizes) may use them"
        )

    __len__ = __iter__ = __getitem__ = __index__ = _refuse


@contextmanager
def _deferred_split(codes: frozenset[Any], name: str, session: PatchSession) -> Iterator[None]:
    """While the block runs: ``.tolist()`` called from a frame running one of ``codes`` on a
    1-D integer tensor returns a :class:`DeferredSplitSizes`; ``torch.split`` and
    ``Tensor.split`` given one return ``(tensor,)``."""
    from torch._subclasses.fake_tensor import FakeTensor

    # the traced tensors are FakeTensors, whose class defines its own tolist
    owners = (torch.Tensor, FakeTensor)
    stored = [owner.__dict__.get("tolist") for owner in owners]
    originals = [owner.tolist for owner in owners]
    split = torch.split
    tensor_split = torch.Tensor.__dict__["split"]

    def deferring(tolist: Any) -> Any:
        def deferred_tolist(self: torch.Tensor) -> Any:
            caller = sys._getframe(1).f_code
            if caller in codes and self.dim() == 1 and not self.is_floating_point():
                return DeferredSplitSizes(self)
            return tolist(self)

        return deferred_tolist

    def one_chunk(original_split: Any) -> Any:
        def split_or_one_chunk(tensor: torch.Tensor, sizes: Any, dim: int = 0) -> Any:
            if isinstance(sizes, DeferredSplitSizes):
                session.mark_fired(name)
                return (tensor,)
            return original_split(tensor, sizes, dim)

        return split_or_one_chunk

    for owner, tolist in zip(owners, originals):
        owner.tolist = deferring(tolist)
    torch.split = one_chunk(split)
    torch.Tensor.split = one_chunk(tensor_split)
    try:
        yield
    finally:
        torch.split = split
        torch.Tensor.split = tensor_split
        for owner, held in zip(owners, stored):
            if held is None:
                del owner.tolist
            else:
                owner.tolist = held


def _chunks(value: Any) -> bool:
    return (isinstance(value, tuple | list) and len(value) > 0
            and all(isinstance(v, torch.Tensor) for v in value))


def _one_chunk(value: Any) -> Any:
    if _chunks(value):
        return type(value)([torch.cat(list(value), dim=0)])
    if isinstance(value, tuple | list) and value and all(_chunks(v) for v in value):
        return type(value)(_one_chunk(v) for v in value)
    return value


def one_chunk_per_split(output: Any) -> Any:
    """Put an unpatched model's output into the patched artifact's layout.

    Every ``ModelOutput`` in ``output`` (nested ones included) whose :data:`SPLIT_OUTPUT_FIELDS`
    hold per-item chunks gets them concatenated along dim 0 into one chunk (a tuple or list of
    ``(tokens_i, hidden)`` tensors becomes one of length 1; a list of such tuples, a list of
    length-1 tuples). Other values are returned as they are. The output is changed in place.
    """
    from transformers.utils import ModelOutput

    seen: set[int] = set()

    def walk(value: Any) -> None:
        if id(value) in seen:
            return
        seen.add(id(value))
        if isinstance(value, ModelOutput):
            for key in list(value.keys()):
                if key in SPLIT_OUTPUT_FIELDS:
                    value[key] = _one_chunk(value[key])
                else:
                    walk(value[key])
        elif isinstance(value, tuple | list):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)

    walk(output)
    return output


def _register(target: str) -> None:
    name = f"dynamo:{target}"

    @register_patch("dynamo", target, reason=_REASON, upstream=_UPSTREAM,
                    versions=("transformers", ">=5,<6"), repack=one_chunk_per_split)
    def per_item_split_as_one_chunk(original: Any, session: PatchSession) -> Any:
        """Run the feature method with its ``.tolist()`` split sizes deferred: its
        ``torch.split`` returns one chunk of all items (marked fired when it does).

        Source: the model code (the per-image ``pooler_output`` split of
            https://github.com/huggingface/transformers/pull/46405).
        """
        codes = frozenset({inspect.unwrap(original).__code__})

        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            with _deferred_split(codes, name, session):
                return original(self, *args, **kwargs)

        setattr(method, MARKS_OWN_FIRING, True)
        return method


for _target in PER_ITEM_SPLIT_TARGETS:
    _register(_target)
