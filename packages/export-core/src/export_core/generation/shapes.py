"""``dynamic_shapes`` of the prefill and decode graphs: bounded batch, sequence and past axes.

Every axis the loop varies gets ``Dim.AUTO`` with the export's bounds, so ``torch.export``
still finds the equalities itself (one batch symbol across inputs) while ExecuTorch gets an upper
bound to plan memory for. The examples have sizes >= 2 on these axes; the ranges admit 1.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.export import Dim

from ..dynamic_shapes import spec_tree
from ..pytree import register_pytree_nodes

__all__ = ["prefill_dynamic_shapes", "decode_dynamic_shapes", "encoder_dynamic_shapes",
           "seq2seq_decoder_dynamic_shapes", "static_decode_dynamic_shapes"]


def prefill_dynamic_shapes(inputs: dict[str, Any], *, max_batch: int, max_length: int) -> dict[str, Any]:
    """Batch (axis 0) in ``[1, max_batch]`` and sequence (axis 1) in ``[1, max_length]`` on
    every ``(batch, sequence)`` input; a 1-D input (``cache_position``) is a sequence."""
    batch, sequence = Dim.AUTO(min=1, max=max_batch), Dim.AUTO(min=1, max=max_length)

    def leaf(t: torch.Tensor) -> dict[int, Any] | None:
        if t.dim() == 1:
            return {0: sequence}
        return {0: batch, 1: sequence} if t.dim() >= 2 else None

    return {k: spec_tree(v, leaf) for k, v in inputs.items()}


def decode_dynamic_shapes(inputs: dict[str, Any], *, cache_argument: str, max_batch: int,
                          max_length: int) -> dict[str, Any]:
    """One new token per row: batch in ``[1, max_batch]`` everywhere, the attention mask's
    length (past + 1) in ``[2, max_length]``, each cache tensor's past axis (axis 2 of
    ``(batch, kv_heads, past_sequence, head_dim)``) in ``[1, max_length - 1]``."""
    register_pytree_nodes()  # the cache's entry is the list of its children
    batch = Dim.AUTO(min=1, max=max_batch)
    total = Dim.AUTO(min=2, max=max_length)
    past = Dim.AUTO(min=1, max=max_length - 1)

    def cache_leaf(t: torch.Tensor) -> dict[int, Any] | None:
        return {0: batch, 2: past} if t.dim() == 4 else {0: batch}

    out: dict[str, Any] = {}
    for k, v in inputs.items():
        if k == cache_argument:
            out[k] = spec_tree(v, cache_leaf)
        elif k == "attention_mask":
            out[k] = {0: batch, 1: total}
        elif isinstance(v, torch.Tensor) and v.dim() == 2:
            out[k] = {0: batch}
        else:
            out[k] = spec_tree(v, lambda t: None)
    return out


def encoder_dynamic_shapes(inputs: dict[str, Any], *, max_batch: int, max_source: int) -> dict[str, Any]:
    """The encoder graph: batch (axis 0) in ``[1, max_batch]`` and the source axis (axis 1 of
    ``(batch, source)`` ids and masks, the last axis of ``(batch, mel_bins, frames)`` features)
    in ``[1, max_source]``; a model that needs a fixed source length (Whisper's 2 x
    ``max_source_positions`` frames) has it specialised by ``Dim.AUTO``."""
    batch, source = Dim.AUTO(min=1, max=max_batch), Dim.AUTO(min=1, max=max_source)

    def leaf(t: torch.Tensor) -> dict[int, Any] | None:
        return {0: batch, t.dim() - 1: source} if t.dim() >= 2 else None

    return {k: spec_tree(v, leaf) for k, v in inputs.items()}


def seq2seq_decoder_dynamic_shapes(inputs: dict[str, Any], *, cache_argument: str | None, max_batch: int,
                                   max_length: int, max_source: int) -> dict[str, Any]:
    """A decoder step of an encoder-decoder: batch in ``[1, max_batch]`` everywhere; the
    encoder's ``attention_mask`` ``(batch, source)``, ``encoder_outputs`` ``(batch, source,
    hidden)`` and the cache's cross-attention half ``(batch, heads, source, head_dim)`` share a
    source axis in ``[1, max_source]``; the self-attention half's past axis is in
    ``[1, max_length - 1]``. ``decoder_input_ids`` keeps its length (the start tokens, or one
    token)."""
    register_pytree_nodes()
    batch = Dim.AUTO(min=1, max=max_batch)
    source = Dim.AUTO(min=1, max=max_source)
    past = Dim.AUTO(min=1, max=max_length - 1)
    import torch.utils._pytree as pytree

    def on_source(t: torch.Tensor) -> dict[int, Any] | None:
        return {0: batch, 1: source} if t.dim() >= 2 else {0: batch}

    out: dict[str, Any] = {}
    for k, v in inputs.items():
        if k == cache_argument:
            halves = {id(v.self_attention_cache): past, id(v.cross_attention_cache): source}
            children, _ = pytree.SUPPORTED_NODES[type(v)].flatten_fn(v)
            out[k] = [spec_tree(c, (lambda axis: lambda t: {0: batch, 2: axis})(halves[id(c)]))
                      if id(c) in halves else spec_tree(c, lambda t: None) for c in children]
        elif k == "decoder_input_ids":
            out[k] = {0: batch}
        else:
            out[k] = spec_tree(v, on_source)
    return out


def static_decode_dynamic_shapes(inputs: dict[str, Any], *, cache_argument: str, max_batch: int) -> dict[str, Any]:
    """A decode step over a static cache: only the batch (axis 0) varies, in ``[1, max_batch]``;
    the cache's ``(batch, kv_heads, max_cache_len, head_dim)`` tensors and the 4-D mask
    ``(batch, 1, 1, max_cache_len)`` keep their length, a layer's 0-d ``cumulative_length`` is
    static."""
    register_pytree_nodes()
    batch = Dim.AUTO(min=1, max=max_batch)

    def leaf(t: torch.Tensor) -> dict[int, Any] | None:
        return {0: batch} if t.dim() >= 1 else None

    return {k: spec_tree(v, leaf) for k, v in inputs.items()}
