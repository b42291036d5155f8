"""The inputs a model's tokenizer produces, which are the inputs its artifact takes.

A RoBERTa tokenizer returns ``input_ids`` and ``attention_mask`` and never ``token_type_ids``,
although ``RobertaModel.forward`` accepts them (``type_vocab_size`` is 1): an artifact that
demands ``token_type_ids`` cannot be fed from the tokenizer. The tokenizer's
``model_input_names`` decide; without a tokenizer, the class attribute of the tokenizer class
``transformers`` maps the model type to (no tokenizer is instantiated).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from ..modality import auto_mappings

__all__ = ["TOKENIZER_INPUTS", "tokenizer_input_names"]

TOKENIZER_INPUTS = frozenset({"attention_mask", "token_type_ids"})
"""The optional text inputs an example set holds only when the tokenizer produces them
(``input_ids`` is always built)."""


def tokenizer_input_names(config: Any, tokenizer: Any = None) -> frozenset[str] | None:
    """The input names the model's tokenizer produces.

    Args:
        config: the model's ``PretrainedConfig``.
        tokenizer: a loaded tokenizer or processor (its ``model_input_names`` win), or ``None``.

    Returns:
        The names, e.g. ``{"input_ids", "attention_mask"}`` for RoBERTa, or ``None`` when
        neither a tokenizer nor a known tokenizer class says (then nothing is filtered).
    """
    names: Collection[str] | None = getattr(tokenizer, "model_input_names", None)
    if names is None:
        entry = auto_mappings().get("TOKENIZER_MAPPING_NAMES", {}).get(
            getattr(config, "model_type", None)
        )
        class_name = entry if isinstance(entry, str) else next(
            (e for e in entry or () if isinstance(e, str)), None
        )
        if class_name:
            try:
                import transformers

                names = getattr(getattr(transformers, class_name), "model_input_names", None)
            except (ImportError, AttributeError):
                names = None
    return frozenset(names) if names else None
