"""Recording the forward calls of a model's own ``generate()``: the real prefill and decode inputs.

The exporter traces each graph on the keyword arguments ``generate`` passed, so the example
inputs are what the loop will feed (``position_ids``, ``logits_to_keep``, the cache class the
model builds). The cache is copied before each call, as the forward updates it in place.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import CaptureError

__all__ = ["GenerateCalls", "record_generate_calls", "CACHE_ARGUMENT"]

CACHE_ARGUMENT = "cache"
"""The ``forward`` argument that carries the cache in ``transformers`` 5 (``past_key_values``
before)."""


@dataclass(frozen=True)
class GenerateCalls:
    """The first two forward calls of ``generate``.

    Attributes:
        prefill: tensor keyword arguments of the prompt's call (``input_ids``,
            ``attention_mask``, ``position_ids``: int64 ``(batch, sequence)``); its (empty) cache
            is left out: the prefill graph builds its own.
        decode: tensor keyword arguments of the first decode step (``input_ids`` ``(batch, 1)``,
            ``attention_mask`` ``(batch, sequence + 1)``) plus the cache under its argument name.
        constant_kwargs: the non-tensor arguments both calls passed (``use_cache=True``,
            ``logits_to_keep=1``), fixed at export.
        cache_argument: the name of the cache argument (``cache`` or ``past_key_values``).
    """

    prefill: dict[str, Any]
    decode: dict[str, Any]
    constant_kwargs: dict[str, Any]
    cache_argument: str


def _cache_argument(kwargs: dict[str, Any]) -> str | None:
    from transformers.cache_utils import Cache

    for name, value in kwargs.items():
        if isinstance(value, Cache):
            return name
    return None


def record_generate_calls(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                          **generate_kwargs: Any) -> GenerateCalls:
    """Run ``model.generate`` for two new tokens and record its first two forward calls.

    Args:
        model: a ``transformers`` generative model in eval mode.
        input_ids: int64 ``(batch, sequence)``, left-padded; batch and sequence >= 2 so that
            neither axis is specialised by the capture.
        attention_mask: int64 ``(batch, sequence)``, 0 at padding.
        generate_kwargs: passed to ``generate`` (``pad_token_id``, ...).

    Returns:
        A :class:`GenerateCalls`.

    Raises:
        CaptureError: ``generate`` fails, makes fewer than two forward calls, or passes no cache.
    """
    calls: list[dict[str, Any]] = []

    def record(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if args:
            raise CaptureError("generate called forward with positional arguments; cannot record them")
        calls.append({k: copy.deepcopy(v) for k, v in kwargs.items()})

    handle = model.register_forward_pre_hook(record, with_kwargs=True)
    try:
        with torch.no_grad():
            model.generate(input_ids=input_ids, attention_mask=attention_mask, max_new_tokens=2,
                           min_new_tokens=2, do_sample=False, use_cache=True, **generate_kwargs)
    except Exception as e:
        raise CaptureError(f"the model's generate() fails on the example prompt: "
                           f"{type(e).__name__}: {e}".splitlines()[0][:300]) from e
    finally:
        handle.remove()
    if len(calls) < 2:
        raise CaptureError(f"generate() made {len(calls)} forward call(s); a prefill and a decode "
                           "step are needed")
    prefill, decode = calls[0], calls[1]
    cache_argument = _cache_argument(decode)
    if cache_argument is None:
        raise CaptureError("generate() passed no cache to the decode step: the model does not "
                           "support use_cache")
    tensors = {k: v for k, v in prefill.items() if isinstance(v, torch.Tensor)}
    constant = {k: v for k, v in prefill.items()
                if not isinstance(v, torch.Tensor) and k != cache_argument and v is not None}
    decode_inputs = {k: v for k, v in decode.items() if isinstance(v, torch.Tensor)}
    decode_inputs[cache_argument] = decode[cache_argument]
    return GenerateCalls(tensors, decode_inputs, constant, cache_argument)
