"""The input sets of one export: the recipes' example set plus validation sets at other shapes.

The command-line tools and the coverage sweep build inputs with the same recipes
(:mod:`export_core.inputs.recipes`), so an input layout the sweep measured is the layout the CLI
exports. With a tokenizer, text models are fed tokenized sample sentences instead of random ids,
but only when the tokenized sets have exactly the keys the recipe builds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import InputError, first_line
from .input_names import tokenizer_input_names
from .recipes import DEFAULT_SHAPES, ExampleInputs, forward_parameters, make_example_inputs

__all__ = ["BATCH_ONE_SHAPE", "InputSets", "SAMPLE_SENTENCES", "build_input_sets", "eager_check"]

logger = logging.getLogger(__name__)

SAMPLE_SENTENCES = (
    ("The quick brown fox jumps over the lazy dog near the river bank.", "Exporting models is fun."),
    (
        "ONNX Runtime and ExecuTorch run models without Python.",
        "A sentence encoder maps text to a vector of fixed size for search and clustering tasks.",
        "Short one.",
    ),
    ("Batch one checks the commonest inference shape of all.",),
)
"""Export sentences (first tuple) and two unseen validation batches (3 rows, then 1)."""

BATCH_ONE_SHAPE = (1, 5)
"""``(batch, sequence)`` of the last validation set: batch 1, the commonest inference shape."""


@dataclass
class InputSets:
    """Inputs for one export.

    Attributes:
        export: ``forward`` keyword arguments used to trace (sizes >= 2 on dynamic axes).
        validation: further keyword-argument sets at other shapes (batch 1 included where the
            recipe allows it) on which the artifact is compared with eager, after the export
            set itself.
        recipe: the name of the input recipe that built them (``"text"``, ``"vision"``,
            ``"audio-features-fixed1"``, ...); ``"tokenizer"`` for tokenized sentences.
    """

    export: dict[str, torch.Tensor]
    validation: list[dict[str, torch.Tensor]] = field(default_factory=list)
    recipe: str = ""

    def all_sets(self) -> list[dict[str, torch.Tensor]]:
        """The export set, then the validation sets."""
        return [self.export, *self.validation]


def eager_check(model: torch.nn.Module) -> Callable[[dict[str, Any]], None]:
    """A recipe check that runs ``model``'s eager forward (under ``no_grad``) on a candidate set;
    the forward's exception rejects the recipe."""

    def check(inputs: dict[str, Any]) -> None:
        with torch.no_grad():
            model(**inputs)

    return check


def _tokenized(model: torch.nn.Module, tokenizer: Any, keys: set[str],
               check: Callable[[dict[str, Any]], None]) -> list[dict[str, torch.Tensor]] | None:
    """:data:`SAMPLE_SENTENCES` tokenized (int64 ``(batch, sequence)``, padded), or ``None``
    when the tokenizer's sets do not have exactly ``keys`` or the forward rejects them."""
    params = forward_parameters(model)
    sets = []
    try:
        for batch in SAMPLE_SENTENCES:
            enc = tokenizer(list(batch), padding=True, truncation=True, max_length=64,
                            return_tensors="pt")
            one = {k: v for k, v in enc.items() if k in params}
            if set(one) != keys:
                logger.debug("tokenizer gives %s, the recipe %s: recipe inputs kept",
                             sorted(one), sorted(keys))
                return None
            check(one)
            sets.append(one)
    except Exception as e:  # noqa: BLE001 - fall back on the recipe's inputs
        logger.debug("tokenized inputs rejected (%s): recipe inputs kept", first_line(e))
        return None
    return sets


def build_input_sets(
    model: torch.nn.Module,
    config: Any,
    tokenizer: Any = None,
    *,
    seed: int = 0,
) -> InputSets:
    """Example and validation inputs for ``model``, built by the zoo's recipes.

    The recipe is the first one of :func:`~export_core.inputs.recipes.input_recipes` whose
    inputs the eager forward accepts, at ``(batch, sequence)`` = (2, 8) for the export set, then
    (3, 12) and :data:`BATCH_ONE_SHAPE` (or the nearest shapes the model accepts) for
    validation: the same first two sets the coverage sweep exports and validates with. Text
    inputs a tokenizer would not produce are left out (:func:`tokenizer_input_names`). A text
    recipe is replaced by tokenized :data:`SAMPLE_SENTENCES` when ``tokenizer`` is given and its
    sets have the recipe's keys.

    Args:
        model: the model (eval mode).
        config: its ``PretrainedConfig``.
        tokenizer: its tokenizer or processor, or ``None``.
        seed: seed of the random inputs.

    Returns:
        The :class:`InputSets`; ``validation`` holds one or two sets.

    Raises:
        InputError: (stage ``inputs``) no recipe gives inputs the forward accepts; the message
            names each recipe's error.
    """
    check = eager_check(model)
    try:
        ex: ExampleInputs = make_example_inputs(
            model, config, shapes=(*DEFAULT_SHAPES, BATCH_ONE_SHAPE), seed=seed, check=check,
            tokenizer=tokenizer, input_names=tokenizer_input_names(config, tokenizer),
        )
    except RuntimeError as e:
        raise InputError(f"cannot build example inputs: {first_line(e, 600)}") from e
    if tokenizer is not None and ex.recipe == "text":
        sets = _tokenized(model, tokenizer, set(ex.first), check)
        if sets is not None:
            return InputSets(sets[0], sets[1:], "tokenizer")
    return InputSets(ex.sets[0], list(ex.sets[1:]), ex.recipe)
