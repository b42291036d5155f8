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

__all__ = ["GenerateCalls", "Seq2SeqCalls", "record_generate_calls", "record_seq2seq_calls", "CACHE_ARGUMENT"]

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


@dataclass(frozen=True)
class Seq2SeqCalls:
    """The encoder call and the decoder calls of an encoder-decoder model's ``generate``.

    Attributes:
        encoder: tensor keyword arguments of the encoder's call (``input_ids`` and
            ``attention_mask`` int64 ``(batch, source)``, or ``input_features`` float
            ``(batch, mel_bins, frames)``).
        encoder_constant_kwargs: its non-tensor arguments (``return_dict=True``, ...).
        prefill: the first decoder step: ``decoder_input_ids`` int64 ``(batch, prompt)`` (the
            decoder start tokens), the encoder's ``attention_mask`` and ``encoder_outputs``; its
            empty cache is left out (the graph builds it and returns both halves).
        decode: the third decoder step (a self-attention past of 2, so the past axis is not
            specialised): one token per row, the ``EncoderDecoderCache`` under
            ``cache_argument``, the encoder's mask and output.
        later: the fourth step (a past of 3), a validation input set of the decode graph.
        constant_kwargs: the decoder calls' non-tensor arguments, fixed at export.
        cache_argument: the name of the cache argument.
        decoder_prompt: the decoder start tokens ``generate`` fed (row 0 of the prefill's
            ``decoder_input_ids``).
    """

    encoder: dict[str, Any]
    encoder_constant_kwargs: dict[str, Any]
    prefill: dict[str, Any]
    decode: dict[str, Any]
    later: dict[str, Any]
    constant_kwargs: dict[str, Any]
    cache_argument: str
    decoder_prompt: tuple[int, ...]


def _split(call: dict[str, Any], cache_argument: str | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Tensor (and ``ModelOutput``) arguments, and the constant ones; ``None`` values dropped."""
    from transformers.utils import ModelOutput

    tensors, constant = {}, {}
    for k, v in call.items():
        if isinstance(v, torch.Tensor | ModelOutput) or (k == cache_argument and v is not None):
            tensors[k] = v
        elif v is not None and k != cache_argument:
            constant[k] = v
    return tensors, constant


def record_seq2seq_calls(model: torch.nn.Module, encoder_inputs: dict[str, torch.Tensor],
                         **generate_kwargs: Any) -> Seq2SeqCalls:
    """Run an encoder-decoder model's ``generate`` for four new tokens and record the encoder's
    call and the first four decoder calls.

    Args:
        model: a ``transformers`` encoder-decoder model (``get_encoder()``) in eval mode.
        encoder_inputs: the encoder's inputs (batch >= 2, source length >= 2).
        generate_kwargs: passed to ``generate``.

    Returns:
        A :class:`Seq2SeqCalls`.

    Raises:
        CaptureError: ``generate`` fails, makes fewer than four decoder calls, or passes no cache.
    """
    encoder = model.get_encoder()
    encoder_calls: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []

    def recorder(into: list[dict[str, Any]]):
        def record(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if args:
                raise CaptureError("generate called forward with positional arguments; cannot record them")
            into.append({k: copy.deepcopy(v) for k, v in kwargs.items()})
        return record

    handles = [encoder.register_forward_pre_hook(recorder(encoder_calls), with_kwargs=True),
               model.register_forward_pre_hook(recorder(calls), with_kwargs=True)]
    try:
        with torch.no_grad():
            model.generate(**encoder_inputs, max_new_tokens=4, min_new_tokens=4, do_sample=False,
                           use_cache=True, **generate_kwargs)
    except CaptureError:
        raise
    except Exception as e:
        raise CaptureError(f"the model's generate() fails on the example input: "
                           f"{type(e).__name__}: {e}".splitlines()[0][:300]) from e
    finally:
        for h in handles:
            h.remove()
    if len(encoder_calls) != 1 or len(calls) < 4:
        raise CaptureError(f"generate() made {len(encoder_calls)} encoder and {len(calls)} decoder "
                           "call(s); one encoder call and four decoder steps are needed")
    cache_argument = _cache_argument(calls[2])
    if cache_argument is None:
        raise CaptureError("generate() passed no cache to the decode steps: the model does not "
                           "support use_cache")
    enc, enc_constant = _split(encoder_calls[0], None)
    prefill, constant = _split(calls[0], cache_argument)
    prefill.pop(cache_argument, None)
    decode, _ = _split(calls[2], cache_argument)
    later, _ = _split(calls[3], cache_argument)
    prompt = tuple(int(t) for t in prefill["decoder_input_ids"][0].tolist())
    return Seq2SeqCalls(enc, enc_constant, prefill, decode, later, constant, cache_argument, prompt)
