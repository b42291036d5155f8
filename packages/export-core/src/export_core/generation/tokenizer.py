"""The tokenizer saved beside a generative export, loaded with the ``tokenizers`` library only."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .manifest import GenerationError

__all__ = ["TOKENIZER_FILE", "TextTokenizer", "load_tokenizer"]

TOKENIZER_FILE = "tokenizer.json"


@dataclass
class TextTokenizer:
    """Encodes prompts and decodes generated ids with a ``tokenizers.Tokenizer``.

    Attributes:
        tokenizer: the fast tokenizer read from ``tokenizer.json``.
    """

    tokenizer: Any

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, special tokens (a BOS) added as the tokenizer's template says."""
        return list(self.tokenizer.encode(text).ids)

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids`` without special tokens."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def token_id(self, token: str | None) -> int | None:
        """The id of a token string, or ``None``."""
        return None if token is None else self.tokenizer.token_to_id(token)


def load_tokenizer(directory: str | Path) -> TextTokenizer:
    """The tokenizer in ``directory`` (``tokenizer.json``).

    Raises:
        GenerationError: there is no ``tokenizer.json`` (export from a model directory that has
            a fast tokenizer, or pass token ids instead of text).
    """
    path = Path(directory) / TOKENIZER_FILE
    if not path.is_file():
        raise GenerationError(f"{Path(directory)} has no {TOKENIZER_FILE}: prompts cannot be "
                              "tokenized; give token ids, or export from a directory with a fast tokenizer")
    from tokenizers import Tokenizer

    return TextTokenizer(Tokenizer.from_file(str(path)))


def special_tokens(directory: str | Path) -> dict[str, Any]:
    """``tokenizer_config.json``'s special-token strings (``pad_token``, ``eos_token``, ...)."""
    path = Path(directory) / "tokenizer_config.json"
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    out = {}
    for key in ("pad_token", "eos_token", "bos_token"):
        value = data.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        out[key] = value
    return out
