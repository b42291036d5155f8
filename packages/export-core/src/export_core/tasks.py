"""Tasks (Hugging Face pipeline names): inference from a config, the auto class, fixed kwargs."""

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
        modality: ``"text"``, ``"vision"`` or ``"audio"`` (drives example-input building).
        constant_kwargs: ``forward`` keyword arguments fixed at export (``use_cache=False``).
        with_past: the export is a generative one: prefill and decode graphs with the cache, a
            manifest and the tokenizer (:mod:`export_core.generation`).
    """

    name: str
    auto_class: str
    modality: str = "text"
    constant_kwargs: dict[str, Any] = field(default_factory=dict)
    with_past: bool = False


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
    )
}

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


def infer_task(config: Any) -> str:
    """The default task of a config, from its first ``architectures`` entry.

    ``…ForCausalLM`` gives ``text-generation`` (the cache-less graph, what the coverage sweep
    measures; ``text-generation-with-past`` exports the prefill and decode graphs with the
    cache); a bare base model gives ``feature-extraction``
    (``image-feature-extraction`` / ``audio-feature-extraction`` for vision and audio models).
    """
    for arch in getattr(config, "architectures", None) or []:
        for suffix, task in _SUFFIX_TO_TASK:
            if arch.endswith(suffix):
                return task
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
