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

SUBSETS: dict[str, tuple[str, ...]] = {
    "ci": tuple(t for types in _CI.values() for t in types),
}
"""``name -> model types``. ``ci``: a representative subset across every modality, of types
the tiny-model zoo builds."""


def subset(name: str) -> tuple[str, ...]:
    """The model types of a named subset.

    Raises:
        KeyError: unknown subset name.
    """
    return SUBSETS[name]
