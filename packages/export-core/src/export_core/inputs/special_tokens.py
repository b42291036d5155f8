"""Special token ids of a configuration tree, which random example tokens must avoid.

A key names a token id when it ends in ``token_id``, ``token_ids``, ``token_index`` (or is
``unk_index`` / ``mask_index``) and is not one of the look-alikes in :data:`NOT_TOKEN_ID_KEYS`
(``token_type_*``, ``label_*``, strides, ratios, ...).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["NOT_TOKEN_ID_KEYS", "TOKEN_ID_KEY", "is_token_id_key", "special_token_ids"]

NOT_TOKEN_ID_KEYS: tuple[re.Pattern[str], ...] = (
    re.compile(
        r"(^|_)(ratio|factor|scale|eps|epsilon|prob|probability|dropout|rate|coef|"
        r"coefficient|weight|temperature|theta|alpha|beta|gamma|std|mean|cost|threshold|"
        r"multiplier|range|idx|offset|stride|strides|padding|kernel|kernel_size|"
        r"kernel_sizes|dilation|seed|period|freq|_init\w*)$"
    ),
    re.compile(
        r"(label|labels|ignore_index|stride|kernel|token_type|type_vocab|dilation|"
        r"interval|pattern|sparse_step|every|freq|capping|softcap|^n_langs$|pretraining_tp)"
    ),
)
"""Config keys that are sizes, ratios or labels, never token ids (searched first)."""

TOKEN_ID_KEY = re.compile(r"(token_id|token_ids|token_index|^unk_index$|^mask_index$)$")
"""Config keys that hold a token id or a list of them."""


def is_token_id_key(key: Any) -> bool:
    """Whether the config key ``key`` holds special token ids (see the module docstring)."""
    if not isinstance(key, str) or any(p.search(key) for p in NOT_TOKEN_ID_KEYS):
        return False
    return bool(TOKEN_ID_KEY.search(key))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _collect(d: Mapping[str, Any], out: set[int]) -> None:
    for key, value in d.items():
        if isinstance(value, Mapping):
            _collect(value, out)
        elif is_token_id_key(key):
            if _is_int(value):
                out.add(value)
            elif isinstance(value, list | tuple) and value and all(_is_int(v) for v in value):
                out.update(value)


def special_token_ids(config: Any) -> set[int]:
    """All special token ids (``*_token_id``, ``*_token_index``, ...) found in a configuration tree.

    Args:
        config: a ``PreTrainedConfig`` or its dictionary form.

    Returns:
        The set of non-negative ids (also those of nested sub-configurations).
    """
    d = config if isinstance(config, Mapping) else config.to_dict()
    out: set[int] = set()
    _collect(d, out)
    return {v for v in out if v >= 0}
