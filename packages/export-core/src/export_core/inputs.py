"""Example inputs for a model: from its tokenizer when it has one, else synthesized from its config.

Every builder returns an :class:`InputSets`: the export set (example sizes >= 2 on every dynamic
axis, a padded row in text batches) and validation sets at other shapes, batch 1 included.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import torch

from .errors import InputError

__all__ = ["InputSets", "SAMPLE_SENTENCES", "build_input_sets", "text_inputs", "vision_inputs", "audio_inputs"]

SAMPLE_SENTENCES = (
    ("The quick brown fox jumps over the lazy dog near the river bank.", "Exporting models is fun."),
    (
        "ONNX Runtime and ExecuTorch run models without Python.",
        "A sentence encoder maps text to a vector of fixed size for search and clustering tasks.",
        "Short one.",
    ),
    ("Batch one checks the commonest inference shape of all.",),
)
"""Export sentences (first tuple) and two unseen validation batches."""


@dataclass
class InputSets:
    """Inputs for one export.

    Attributes:
        export: ``forward`` keyword arguments used to trace (sizes >= 2 on dynamic axes).
        validation: further keyword-argument sets at other shapes (batch 1 included) on which the
            artifact is compared with eager, after the export set itself.
    """

    export: dict[str, torch.Tensor]
    validation: list[dict[str, torch.Tensor]] = field(default_factory=list)

    def all_sets(self) -> list[dict[str, torch.Tensor]]:
        return [self.export, *self.validation]


def _forward_params(model: torch.nn.Module) -> set[str]:
    try:
        return set(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return set()


def _keep(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    params = _forward_params(model)
    return {k: v for k, v in inputs.items() if k in params}


def _text_from_tokenizer(model: torch.nn.Module, tokenizer: Any) -> InputSets:
    sets = []
    for batch in SAMPLE_SENTENCES:
        enc = tokenizer(list(batch), padding=True, truncation=True, max_length=64, return_tensors="pt")
        sets.append(_keep(model, {k: v for k, v in enc.items()}))
    return InputSets(sets[0], sets[1:])


def _synth_text(model: torch.nn.Module, config: Any, batch: int, seq: int, pad: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    vocab = int(getattr(config, "vocab_size", 0) or 100)
    low = min(4, vocab - 1)
    ids = torch.randint(low, vocab, (batch, seq), generator=g)
    mask = torch.ones(batch, seq, dtype=torch.long)
    if pad and batch > 1:
        mask[-1, seq - pad :] = 0
        pad_id = getattr(config, "pad_token_id", None)
        if isinstance(pad_id, int) and 0 <= pad_id < vocab:
            ids[-1, seq - pad :] = pad_id
    out = {"input_ids": ids, "attention_mask": mask}
    if getattr(config, "type_vocab_size", 0):
        out["token_type_ids"] = torch.zeros(batch, seq, dtype=torch.long)
    return _keep(model, out)


def text_inputs(model: torch.nn.Module, config: Any, tokenizer: Any = None) -> InputSets:
    """Text inputs ``input_ids`` / ``attention_mask`` (int64, ``(batch, sequence)``).

    With a tokenizer: tokenized sample sentences (export batch 2, padded; then batches of 3 and
    1 never seen at export). Without: random ids below ``vocab_size``, shapes (2, 8) with a
    padded row, then (3, 13) padded and (1, 5).
    """
    if tokenizer is not None:
        return _text_from_tokenizer(model, tokenizer)
    return InputSets(
        _synth_text(model, config, 2, 8, 3, 0),
        [_synth_text(model, config, 3, 13, 4, 1), _synth_text(model, config, 1, 5, 0, 2)],
    )


def _image_size(config: Any) -> tuple[int, int]:
    size = getattr(config, "image_size", None)
    if size is None:
        return (64, 64)
    if isinstance(size, int):
        return (size, size)
    if isinstance(size, dict):
        return (int(size.get("height", 64)), int(size.get("width", 64)))
    return (int(size[0]), int(size[1]))


def vision_inputs(model: torch.nn.Module, config: Any) -> InputSets:
    """``pixel_values`` float32 ``(batch, channels, height, width)`` at the config's image size:
    export batch 2, validation batches 3 and 1."""
    h, w = _image_size(config)
    c = int(getattr(config, "num_channels", 3) or 3)
    g = torch.Generator().manual_seed(0)
    sets = [{"pixel_values": torch.randn(b, c, h, w, generator=g)} for b in (2, 3, 1)]
    return InputSets(sets[0], sets[1:])


def audio_inputs(model: torch.nn.Module, config: Any) -> InputSets:
    """Audio inputs: ``input_features`` ``(batch, mel_bins, frames)`` for log-mel models, else
    ``input_values`` ``(batch, samples)`` float32 at 16 kHz; export batch 2, then 3 and 1."""
    params = _forward_params(model)
    g = torch.Generator().manual_seed(0)
    if "input_features" in params:
        bins = int(getattr(config, "num_mel_bins", 80))
        frames = 2 * int(getattr(config, "max_source_positions", 1500))
        sets = [{"input_features": torch.randn(b, bins, frames, generator=g)} for b in (2, 3, 1)]
    else:
        sets = [
            {"input_values": torch.randn(b, n, generator=g)} for b, n in ((2, 3200), (3, 4000), (1, 2400))
        ]
    return InputSets(sets[0], sets[1:])


def build_input_sets(model: torch.nn.Module, config: Any, modality: str, tokenizer: Any = None) -> InputSets:
    """Example and validation inputs for ``model`` by modality (``text``, ``vision``, ``audio``).

    Raises:
        InputError: an unknown modality.
    """
    if modality == "text":
        return text_inputs(model, config, tokenizer)
    if modality == "vision":
        return vision_inputs(model, config)
    if modality == "audio":
        return audio_inputs(model, config)
    raise InputError(f"no example-input builder for modality {modality!r}")
