"""Named subsets of model types for the export sweep."""

from __future__ import annotations

__all__ = ["SUBSETS", "subset"]

_CI: dict[str, tuple[str, ...]] = {
    "text": (
        "bert",
        "distilbert",
        "albert",
        "electra",
        "deberta-v2",
        "gpt2",
        "gpt_neox",
        "llama",
        "mistral",
        "qwen2",
        "phi3",
        "gemma",
        "bloom",
        "falcon",
    ),
    "vision": (
        "vit",
        "deit",
        "beit",
        "dinov2",
        "convnext",
        "resnet",
        "levit",
        "mobilenet_v2",
        "segformer",
        "detr",
    ),
    "audio": ("wav2vec2", "hubert", "wavlm", "audio-spectrogram-transformer", "whisper"),
    "multimodal": ("clip", "siglip", "blip", "layoutlm", "llava"),
    "encoder-decoder": ("t5", "bart", "marian", "mbart", "pegasus"),
    "video": ("videomae", "timesformer", "vivit"),
    "other": ("patchtst", "time_series_transformer"),
}

_GENERATE: tuple[str, ...] = (
    "gpt2", "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text", "opt",
    "falcon", "gpt_neox", "mixtral", "qwen2_moe", "t5", "bart", "whisper",
)

SUBSETS: dict[str, tuple[str, ...]] = {
    "ci": tuple(t for types in _CI.values() for t in types),
    "generate": _GENERATE,
}
"""``name -> model types``. ``ci``: a representative subset across every modality, of types
the tiny-model zoo builds. ``generate``: the 16 generation families of the generation tests
(13 decoder-only, T5, BART, Whisper), for ``--mode generate`` where a full sweep is too long
(ExecuTorch: about 90 s a type)."""


def subset(name: str) -> tuple[str, ...]:
    """The model types of a named subset.

    Raises:
        KeyError: unknown subset name.
    """
    return SUBSETS[name]
