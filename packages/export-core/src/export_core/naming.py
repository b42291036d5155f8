"""Artifact input and output names from pytree paths.

Inputs are named after the model's ``forward`` arguments; outputs after ``ModelOutput`` fields;
cache leaves as ``past_key_values.<layer>.key`` / ``.value`` (inputs) and ``present.<layer>.key`` /
``.value`` (outputs). An encoder-decoder cache names its two halves apart:
``past_key_values.<layer>.decoder.key`` (self-attention, grows by a token per step) and
``past_key_values.<layer>.encoder.key`` (cross-attention over the encoder's output, fixed).
"""

from __future__ import annotations

import re
from typing import Any

import torch
import torch.utils._pytree as pytree

__all__ = ["distinct_output_names", "leaf_names"]

_CACHE_LEAF = re.compile(r"^(?P<root>\w+)(?:\.(?P<half>self_attention_cache|cross_attention_cache))?"
                         r"\.layers\.(?P<layer>\d+)\.(?P<kind>keys|values|cumulative_length)$")
_HALF = {"self_attention_cache": "decoder.", "cross_attention_cache": "encoder.", None: ""}


def _path_to_name(path: tuple[Any, ...]) -> str:
    parts = []
    for key in path:
        if isinstance(key, pytree.MappingKey):
            parts.append(str(key.key))
        elif isinstance(key, pytree.SequenceKey):
            parts.append(str(key.idx))
        elif isinstance(key, pytree.GetAttrKey):
            parts.append(str(key.name))
        else:
            parts.append(str(key).strip(".[]'\""))
    return ".".join(parts) or "output"


def leaf_names(tree: Any, *, prefix: str = "", cache_name: str | None = None,
               tensors_only: bool = False) -> list[str]:
    """Dotted names of the leaves of ``tree`` in pytree flatten order.

    Args:
        tree: a ``ModelOutput``, dict, tuple or tensor.
        prefix: prepended to every name (``"output"`` gives ``output.0`` for bare tuples).
        cache_name: rename cache leaves ``<root>.layers.<i>.keys`` to ``<cache_name>.<i>.key``
            (``<root>.self_attention_cache.layers.<i>.keys`` to ``<cache_name>.<i>.decoder.key``,
            the cross-attention half to ``<cache_name>.<i>.encoder.key``; a static layer's
            ``cumulative_length``, its 0-d count of written positions, to
            ``<cache_name>.<i>.cumulative_length``).
        tensors_only: name only the tensor leaves (an artifact's outputs: ``None`` entries, such
            as the unselected layers of a ``hidden_states`` tuple, and Python numbers are no
            outputs of an ONNX or ExecuTorch program).

    Returns:
        One unique name per leaf.
    """
    names = []
    for path, leaf in pytree.tree_flatten_with_path(tree)[0]:
        if tensors_only and not isinstance(leaf, torch.Tensor):
            continue
        name = _path_to_name(path)
        m = _CACHE_LEAF.match(name)
        if m and cache_name:
            kind = {"keys": "key", "values": "value"}.get(m["kind"], m["kind"])
            name = f"{cache_name}.{m['layer']}.{_HALF[m['half']]}{kind}"
        if prefix:
            name = f"{prefix}.{name}" if not name.isdigit() else f"{prefix}_{name}"
        names.append(name)
    seen: dict[str, int] = {}
    unique = []
    for n in names:
        if n in seen:
            seen[n] += 1
            n = f"{n}_{seen[n]}"
        else:
            seen[n] = 0
        unique.append(n)
    return unique


def distinct_output_names(input_names: list[str], output_names: list[str]) -> list[str]:
    """``output_names`` with every name an input already has given the suffix ``_out`` (then
    ``_out_1``, ... until unique).

    A model may return a tensor under an input's name (Qwen2-Audio's output ``attention_mask``
    is the mask it computed); an artifact names each value once, so ONNX Runtime rejects a graph
    whose output is named like an input ("Duplicate definition of name (attention_mask)").

    Args:
        input_names: the artifact's input names.
        output_names: the output leaves' names (:func:`leaf_names`), unique among themselves.

    Returns:
        The output names, in order, none equal to an input name or to each other.
    """
    taken = set(input_names) | set(output_names)
    renamed = []
    for name in output_names:
        if name in input_names:
            candidate, i = f"{name}_out", 0
            while candidate in taken:
                i += 1
                candidate = f"{name}_out_{i}"
            taken.add(candidate)
            name = candidate
        renamed.append(name)
    return renamed
