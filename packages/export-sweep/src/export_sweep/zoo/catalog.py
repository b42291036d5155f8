"""Catalog of the model types the installed ``transformers`` knows, with their input modality.

The modality is derived from the auto mappings only (no model is built): task mappings such as
``MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES``, the tokenizer / image-processor /
feature-extractor / video-processor mappings, and the sub-configurations the configuration class
declares (``vision_config``, ``audio_config``, ``text_config``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

from export_core.modality import Modality, auto_mappings, model_modality

__all__ = [
    "CatalogEntry",
    "Modality",
    "base_model_types",
    "catalog",
    "model_class_name",
    "model_modality",
]


@dataclass(frozen=True)
class CatalogEntry:
    """One model type of the installed ``transformers``.

    Attributes:
        model_type: the ``config.model_type`` key, e.g. ``"llama"``.
        config_class: name of its configuration class.
        model_class: name of the class the zoo builds (the base model, or a head class when
            the type has no base model); ``None`` when none is known.
        in_base_mapping: whether ``MODEL_MAPPING_NAMES`` has the type.
        modality: input modality.
    """

    model_type: str
    config_class: str
    model_class: str | None
    in_base_mapping: bool
    modality: Modality


# Head mappings searched, in order, for a class when the type has no base model.
_HEAD_ORDER = (
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
    "MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES",
    "MODEL_FOR_BACKBONE_MAPPING_NAMES",
    "MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES",
    "MODEL_FOR_DEPTH_ESTIMATION_MAPPING_NAMES",
    "MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES",
    "MODEL_FOR_UNIVERSAL_SEGMENTATION_MAPPING_NAMES",
    "MODEL_FOR_IMAGE_MATTING_MAPPING_NAMES",
    "MODEL_FOR_POSE_ESTIMATION_MAPPING_NAMES",
    "MODEL_FOR_KEYPOINT_DETECTION_MAPPING_NAMES",
    "MODEL_FOR_KEYPOINT_MATCHING_MAPPING_NAMES",
    "MODEL_FOR_TABLE_RECOGNITION_MAPPING_NAMES",
    "MODEL_FOR_PRETRAINING_MAPPING_NAMES",
    "MODEL_FOR_RETRIEVAL_MAPPING_NAMES",
    "MODEL_FOR_DECISION_MAPPING_NAMES",
)


def base_model_types() -> list[str]:
    """Model types of ``MODEL_MAPPING_NAMES`` (the base models), in mapping order."""
    return list(auto_mappings()["MODEL_MAPPING_NAMES"])


def model_class_name(model_type: str) -> str | None:
    """Name of the class the zoo builds for ``model_type``.

    The base model from ``MODEL_MAPPING_NAMES`` (its first entry when several); otherwise the
    first head class found in a fixed order of task mappings (causal LM, seq2seq, ...).

    Args:
        model_type: a ``config.model_type`` key.

    Returns:
        The class name, or ``None`` when no mapping has the type.
    """
    maps = auto_mappings()
    for name in ("MODEL_MAPPING_NAMES", *_HEAD_ORDER):
        cls = maps.get(name, {}).get(model_type)
        if cls:
            return cls if isinstance(cls, str) else cls[0]
    return None


def catalog(*, include_config_only: bool = False) -> tuple[CatalogEntry, ...]:
    """Every model type with its modality and the class the zoo builds.

    Args:
        include_config_only: also list types of ``CONFIG_MAPPING_NAMES`` that have no base model
            (sub-configurations, head-only composites); their ``model_class`` may be ``None``.

    Returns:
        One entry per type, base-mapping types first, in mapping order.
    """
    maps = auto_mappings()
    base = maps["MODEL_MAPPING_NAMES"]
    types = list(base)
    if include_config_only:
        types += [t for t in maps["CONFIG_MAPPING_NAMES"] if t not in base]
    return tuple(
        CatalogEntry(
            model_type=t,
            config_class=str(maps["CONFIG_MAPPING_NAMES"].get(t, "")),
            model_class=model_class_name(t),
            in_base_mapping=t in base,
            modality=model_modality(t),
        )
        for t in types
    )
