"""Tasks (Hugging Face pipeline names): inference from a config, the auto class, fixed kwargs.

Nothing here imports torch: the CLI checks ``--task`` against :data:`TASKS` before loading
anything. :func:`infer_task` reads the ``transformers`` auto mappings (imported on first call).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import InputError

__all__ = ["TaskSpec", "TASKS", "infer_task", "task_spec"]


@dataclass(frozen=True)
class TaskSpec:
    """What a task means for loading and exporting.

    Attributes:
        name: pipeline name, e.g. ``"text-generation"``.
        auto_class: name of the ``transformers`` auto class that loads a model for it.
        modality: ``"text"``, ``"vision"``, ``"audio"`` or ``"multimodal"`` (informative: the
            input recipes follow the model's ``forward``, see :mod:`export_core.inputs`).
        constant_kwargs: ``forward`` keyword arguments fixed at export (``use_cache=False``).
        with_past: the export is a generative one: prefill and decode graphs with the cache, a
            manifest and the tokenizer (:mod:`export_core.generation`).
        fallback_classes: further auto classes tried, in order, when ``auto_class`` has no
            mapping for the config (``automatic-speech-recognition``: sequence-to-sequence
            like Whisper, else CTC like wav2vec2).
        mappings: the ``transformers`` ``*_MAPPING_NAMES`` tables whose classes default to
            this task (:func:`infer_task`).
    """

    name: str
    auto_class: str
    modality: str = "text"
    constant_kwargs: dict[str, Any] = field(default_factory=dict)
    with_past: bool = False
    fallback_classes: tuple[str, ...] = ()
    mappings: tuple[str, ...] = ()

    @property
    def auto_classes(self) -> tuple[str, ...]:
        """``auto_class``, then ``fallback_classes``."""
        return (self.auto_class, *self.fallback_classes)


TASKS: dict[str, TaskSpec] = {
    t.name: t
    for t in (
        TaskSpec("feature-extraction", "AutoModel", "text"),
        TaskSpec("fill-mask", "AutoModelForMaskedLM", "text"),
        TaskSpec("text-classification", "AutoModelForSequenceClassification", "text"),
        TaskSpec("token-classification", "AutoModelForTokenClassification", "text"),
        TaskSpec("question-answering", "AutoModelForQuestionAnswering", "text"),
        TaskSpec("text-generation", "AutoModelForCausalLM", "text", {"use_cache": False}),
        TaskSpec("text-generation-with-past", "AutoModelForCausalLM", "text", with_past=True),
        TaskSpec("image-classification", "AutoModelForImageClassification", "vision"),
        TaskSpec("image-feature-extraction", "AutoModel", "vision"),
        TaskSpec("audio-classification", "AutoModelForAudioClassification", "audio"),
        TaskSpec("audio-feature-extraction", "AutoModel", "audio"),
        TaskSpec("text2text-generation", "AutoModelForSeq2SeqLM", "text", {"use_cache": False},
                 mappings=("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",)),
        TaskSpec("text2text-generation-with-past", "AutoModelForSeq2SeqLM", "text", with_past=True),
        TaskSpec("automatic-speech-recognition", "AutoModelForSpeechSeq2Seq", "audio",
                 {"use_cache": False}, fallback_classes=("AutoModelForCTC",),
                 mappings=("MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "MODEL_FOR_CTC_MAPPING_NAMES")),
        TaskSpec("automatic-speech-recognition-with-past", "AutoModelForSpeechSeq2Seq", "audio",
                 with_past=True),
        TaskSpec("image-text-to-text", "AutoModelForImageTextToText", "multimodal",
                 {"use_cache": False}, mappings=("MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",)),
        TaskSpec("zero-shot-image-classification", "AutoModelForZeroShotImageClassification",
                 "multimodal",
                 mappings=("MODEL_FOR_ZERO_SHOT_IMAGE_CLASSIFICATION_MAPPING_NAMES",)),
        TaskSpec("object-detection", "AutoModelForObjectDetection", "vision",
                 mappings=("MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES",)),
        TaskSpec("image-segmentation", "AutoModelForImageSegmentation", "vision",
                 fallback_classes=("AutoModelForSemanticSegmentation",
                                   "AutoModelForUniversalSegmentation"),
                 mappings=("MODEL_FOR_IMAGE_SEGMENTATION_MAPPING_NAMES",
                           "MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES",
                           "MODEL_FOR_UNIVERSAL_SEGMENTATION_MAPPING_NAMES")),
        TaskSpec("depth-estimation", "AutoModelForDepthEstimation", "vision",
                 mappings=("MODEL_FOR_DEPTH_ESTIMATION_MAPPING_NAMES",)),
    )
}
"""Every task the exporters know, by pipeline name."""

_MAPPED_TASK_ORDER = (
    "text2text-generation",
    "automatic-speech-recognition",
    "image-text-to-text",
    "zero-shot-image-classification",
    "object-detection",
    "image-segmentation",
    "depth-estimation",
)
"""Tasks inferred from the auto mappings, first match wins (a CLIPModel is a base model and a
zero-shot image classifier: the head task wins over ``feature-extraction``)."""

_SUFFIX_TO_TASK = (
    ("ForCausalLM", "text-generation"),
    ("LMHeadModel", "text-generation"),
    ("ForMaskedLM", "fill-mask"),
    ("ForSequenceClassification", "text-classification"),
    ("ForTokenClassification", "token-classification"),
    ("ForQuestionAnswering", "question-answering"),
    ("ForImageClassification", "image-classification"),
    ("ForImageClassificationWithTeacher", "image-classification"),
    ("ForAudioClassification", "audio-classification"),
)

_VISION_KEYS = ("image_size", "patch_size", "num_channels", "hidden_sizes", "embedding_size")


def _base_modality(config: Any) -> str:
    name = type(config).__name__.lower()
    if any(k in name for k in ("wav2vec", "hubert", "whisper", "wavlm", "audio", "speech")):
        return "audio"
    if getattr(config, "vocab_size", None):
        return "text"
    if any(hasattr(config, k) for k in _VISION_KEYS):
        return "vision"
    return "text"


def _mapped_task(arch: str) -> str | None:
    """The first task of :data:`_MAPPED_TASK_ORDER` whose auto mappings list the class ``arch``."""
    from .modality import auto_mappings

    maps = auto_mappings()
    for task in _MAPPED_TASK_ORDER:
        for table in TASKS[task].mappings:
            for value in maps.get(table, {}).values():
                if arch == value or (isinstance(value, tuple | list) and arch in value):
                    return task
    return None


def infer_task(config: Any) -> str:
    """The default task of a config, from its first ``architectures`` entry.

    ``…ForCausalLM`` gives ``text-generation`` (the cache-less graph, what the coverage sweep
    measures; ``text-generation-with-past`` exports the prefill and decode graphs with the
    cache); a class listed in a task's auto mapping gives
    that task (``T5ForConditionalGeneration``: ``text2text-generation``; ``WhisperFor
    ConditionalGeneration``: ``automatic-speech-recognition``; ``CLIPModel``:
    ``zero-shot-image-classification``; ``DetrForObjectDetection``: ``object-detection``; ...);
    a bare base model gives ``feature-extraction`` (``image-feature-extraction`` /
    ``audio-feature-extraction`` for vision and audio models).
    """
    for arch in getattr(config, "architectures", None) or []:
        for suffix, task in _SUFFIX_TO_TASK:
            if arch.endswith(suffix):
                return task
        mapped = _mapped_task(arch)
        if mapped is not None:
            return mapped
    modality = _base_modality(config)
    return {"vision": "image-feature-extraction", "audio": "audio-feature-extraction"}.get(
        modality, "feature-extraction"
    )


def task_spec(task: str) -> TaskSpec:
    """The :class:`TaskSpec` of ``task``.

    Raises:
        InputError: the task is unknown; the message lists the known ones.
    """
    try:
        return TASKS[task]
    except KeyError:
        raise InputError(
            f"unknown task {task!r}; known tasks: {', '.join(sorted(TASKS))}", stage="load"
        ) from None
