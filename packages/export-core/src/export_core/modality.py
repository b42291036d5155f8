"""The input modality of a model type, derived from the ``transformers`` auto mappings only.

No model is built: task mappings such as ``MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES``, the
tokenizer / image-processor / feature-extractor / video-processor mappings, and the
sub-configurations the configuration class declares (``vision_config``, ``audio_config``,
``text_config``, ...) decide it. ``transformers`` is imported on the first call, not at import.
"""

from __future__ import annotations

import functools
from enum import StrEnum
from typing import Any

__all__ = ["Modality", "auto_mappings", "in_auto_mappings", "model_modality"]


class Modality(StrEnum):
    """Input modality of a model type."""

    TEXT = "text"
    VISION = "vision"
    AUDIO = "audio"
    VIDEO = "video"
    MULTIMODAL = "multimodal"
    ENCODER_DECODER = "encoder-decoder"
    OTHER = "other"


_MULTIMODAL_TASKS = (
    "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
    "MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES",
    "MODEL_FOR_VISUAL_QUESTION_ANSWERING_MAPPING_NAMES",
    "MODEL_FOR_ZERO_SHOT_IMAGE_CLASSIFICATION_MAPPING_NAMES",
    "MODEL_FOR_ZERO_SHOT_OBJECT_DETECTION_MAPPING_NAMES",
    "MODEL_FOR_DOCUMENT_QUESTION_ANSWERING_MAPPING_NAMES",
    "MODEL_FOR_RETRIEVAL_MAPPING_NAMES",
)
_VIDEO_TASKS = ("MODEL_FOR_VIDEO_CLASSIFICATION_MAPPING_NAMES",)
_AUDIO_TASKS = (
    "MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES",
    "MODEL_FOR_AUDIO_FRAME_CLASSIFICATION_MAPPING_NAMES",
    "MODEL_FOR_AUDIO_XVECTOR_MAPPING_NAMES",
    "MODEL_FOR_CTC_MAPPING_NAMES",
    "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
    "MODEL_FOR_RNNT_MAPPING_NAMES",
    "MODEL_FOR_TDT_MAPPING_NAMES",
)
_VISION_TASKS = (
    "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_MAPPING_NAMES",
    "MODEL_FOR_BACKBONE_MAPPING_NAMES",
    "MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES",
    "MODEL_FOR_DEPTH_ESTIMATION_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_SEGMENTATION_MAPPING_NAMES",
    "MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES",
    "MODEL_FOR_INSTANCE_SEGMENTATION_MAPPING_NAMES",
    "MODEL_FOR_UNIVERSAL_SEGMENTATION_MAPPING_NAMES",
    "MODEL_FOR_MASKED_IMAGE_MODELING_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_TO_IMAGE_MAPPING_NAMES",
    "MODEL_FOR_KEYPOINT_DETECTION_MAPPING_NAMES",
    "MODEL_FOR_KEYPOINT_MATCHING_MAPPING_NAMES",
    "MODEL_FOR_MASK_GENERATION_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_MATTING_MAPPING_NAMES",
    "MODEL_FOR_POSE_ESTIMATION_MAPPING_NAMES",
    "MODEL_FOR_NORMAL_ESTIMATION_MAPPING_NAMES",
    "MODEL_FOR_POINTMAP_ESTIMATION_MAPPING_NAMES",
    "MODEL_FOR_CAUSAL_IMAGE_MODELING_MAPPING_NAMES",
    "MODEL_FOR_TABLE_RECOGNITION_MAPPING_NAMES",
    "MODEL_FOR_TEXT_RECOGNITION_MAPPING_NAMES",
)
_SEQ2SEQ_TASKS = ("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",)
_TEXT_TASKS = (
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_MASKED_LM_MAPPING_NAMES",
    "MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES",
    "MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES",
    "MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES",
    "MODEL_FOR_MULTIPLE_CHOICE_MAPPING_NAMES",
    "MODEL_FOR_TEXT_ENCODING_MAPPING_NAMES",
    "MODEL_FOR_NEXT_SENTENCE_PREDICTION_MAPPING_NAMES",
    "MODEL_FOR_PRETRAINING_MAPPING_NAMES",
)
@functools.cache
def auto_mappings() -> dict[str, dict[str, Any]]:
    """The ``*_MAPPING_NAMES`` tables of ``transformers`` (model type -> class name), by table
    name, plus the config, tokenizer and processor tables."""
    from transformers.models.auto import configuration_auto, modeling_auto, tokenization_auto

    maps = {
        name: dict(getattr(modeling_auto, name))
        for name in dir(modeling_auto)
        if name.endswith("_MAPPING_NAMES") and name.startswith("MODEL")
    }
    maps["CONFIG_MAPPING_NAMES"] = dict(configuration_auto.CONFIG_MAPPING_NAMES)
    maps["TOKENIZER_MAPPING_NAMES"] = dict(tokenization_auto.TOKENIZER_MAPPING_NAMES)
    # The processor name tables; the ``*_auto`` modules that re-export them may require
    # torchvision, the plain tables do not.
    try:
        from transformers.models.auto import auto_mappings
    except ImportError:  # older layouts
        auto_mappings = None
    for name in (
        "IMAGE_PROCESSOR_MAPPING_NAMES",
        "FEATURE_EXTRACTOR_MAPPING_NAMES",
        "VIDEO_PROCESSOR_MAPPING_NAMES",
        "PROCESSOR_MAPPING_NAMES",
    ):
        try:
            maps[name] = dict(getattr(auto_mappings, name))
        except Exception:  # noqa: BLE001 - table missing in this version
            maps[name] = {}
    return maps


def in_auto_mappings(model_type: str, names: tuple[str, ...]) -> bool:
    """Whether any of the tables ``names`` of :func:`auto_mappings` has ``model_type``."""
    maps = auto_mappings()
    return any(model_type in maps.get(n, {}) for n in names)


def _sub_config_keys(model_type: str) -> set[str]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    try:
        cls = CONFIG_MAPPING[model_type]
    except KeyError:
        return set()
    try:
        return set(cls.sub_configs or {})
    except Exception:  # noqa: BLE001 - a broken class attribute must not break the catalog
        return set()


@functools.cache
def model_modality(model_type: str) -> Modality:
    """Input modality of ``model_type``, derived from the auto mappings.

    Order of precedence: video, multimodal (a text input plus an image or audio one), audio,
    vision, encoder-decoder (text to text), text, other.

    Args:
        model_type: a ``config.model_type`` key.

    Returns:
        The modality.
    """
    maps = auto_mappings()
    subs = _sub_config_keys(model_type)
    has_tokenizer = model_type in maps["TOKENIZER_MAPPING_NAMES"] or in_auto_mappings(model_type, _TEXT_TASKS)
    has_text_sub = bool(subs & {"text_config", "text_encoder", "decoder_config", "qformer_config"})
    has_vision_sub = bool(
        subs
        & {"vision_config", "image_config", "vision_encoder_config", "backbone_config", "vq_config"}
    )
    has_audio_sub = bool(
        subs & {"audio_config", "speech_config", "audio_encoder_config", "encoder_config"}
    ) and "audio" in _config_doc(model_type)
    image_proc = model_type in maps["IMAGE_PROCESSOR_MAPPING_NAMES"]
    feature_ext = model_type in maps["FEATURE_EXTRACTOR_MAPPING_NAMES"]
    video_proc = model_type in maps["VIDEO_PROCESSOR_MAPPING_NAMES"]

    if in_auto_mappings(model_type, _VIDEO_TASKS) or (video_proc and not has_tokenizer and not image_proc):
        return Modality.VIDEO
    if in_auto_mappings(model_type, _MULTIMODAL_TASKS) or (
        (has_tokenizer or has_text_sub) and (has_vision_sub or has_audio_sub or image_proc)
    ):
        if not in_auto_mappings(model_type, _AUDIO_TASKS) or in_auto_mappings(model_type, _MULTIMODAL_TASKS):
            return Modality.MULTIMODAL
    if in_auto_mappings(model_type, _AUDIO_TASKS) or (feature_ext and not image_proc) or has_audio_sub:
        return Modality.AUDIO
    if in_auto_mappings(model_type, _VISION_TASKS) or image_proc or has_vision_sub:
        return Modality.VISION
    if in_auto_mappings(model_type, _SEQ2SEQ_TASKS) or subs >= {"encoder", "decoder"}:
        return Modality.ENCODER_DECODER
    if has_tokenizer or has_text_sub:
        return Modality.TEXT
    # Sub-model types (``clip_vision_model``, ``qwen2_audio_encoder``) appear in no task
    # mapping: fall back on the configuration class name.
    name = _config_doc(model_type).split(" ")[0]
    for marker, modality in (
        ("video", Modality.VIDEO),
        ("vision", Modality.VISION),
        ("image", Modality.VISION),
        ("audio", Modality.AUDIO),
        ("speech", Modality.AUDIO),
        ("text", Modality.TEXT),
    ):
        if marker in name:
            return modality
    return Modality.OTHER


def _config_doc(model_type: str) -> str:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    try:
        cls = CONFIG_MAPPING[model_type]
    except KeyError:
        return ""
    return f"{cls.__name__} {cls.__module__}".lower()
