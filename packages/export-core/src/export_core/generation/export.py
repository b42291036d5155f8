"""Exporting a generative model's prefill and decode graphs, with their manifest and tokenizer.

The output directory of a ``text-generation-with-past`` export::

    OUT/prefill/model.onnx      (model.pte for ExecuTorch) and its export_report.json
    OUT/decode/model.onnx       and its export_report.json
    OUT/generation.json         the manifest: graphs, roles, names, cache layout, bounds
    OUT/generation_config.json  the model's generation config
    OUT/tokenizer.json ...      the tokenizer files, when the model has a tokenizer
    OUT/export_report.json      the whole export: status, the graphs, the token comparison

An encoder-decoder (``text2text-generation-with-past``, ``automatic-speech-recognition-with-past``)
also writes ``OUT/encoder/``; its prefill graph is the decoder's first step on the start tokens.

Everything is written into a staging directory and moved into ``OUT`` only once every graph and
the generation check passed (:mod:`export_core.output`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import ExportError, InputError
from ..output import commit_export, lock_output, prepare_output, record_failure, staging_directory
from ..report import ExportReport, package_versions
from .cache_layers import full_sliding_layers, sliding_layers
from .calls import record_generate_calls, record_seq2seq_calls
from .loop import GenerationLoop, GraphSession
from .manifest import MANIFEST_NAME, CacheLayout, GenerationManifest, GraphSpec, TokenRules
from .shapes import (
    decode_dynamic_shapes,
    encoder_dynamic_shapes,
    prefill_dynamic_shapes,
    seq2seq_decoder_dynamic_shapes,
    static_decode_dynamic_shapes,
)
from .verify import GenerationCheck, compare_with_eager

__all__ = ["WITH_PAST_TASK", "SEQ2SEQ_TASK", "SPEECH_SEQ2SEQ_TASK", "WITH_PAST_TASKS", "GenerativeExport",
           "export_with_past", "default_max_length", "GENERATION_ARTIFACTS"]

logger = logging.getLogger(__name__)

WITH_PAST_TASK = "text-generation-with-past"
SEQ2SEQ_TASK = "text2text-generation-with-past"
SPEECH_SEQ2SEQ_TASK = "automatic-speech-recognition-with-past"
WITH_PAST_TASKS = (WITH_PAST_TASK, SEQ2SEQ_TASK, SPEECH_SEQ2SEQ_TASK)
GENERATION_ARTIFACTS = ("encoder", "prefill", "decode", MANIFEST_NAME, "generation_config.json")
"""Entries a generative export writes besides the tokenizer files and the report."""

_POSITION_LIMITS = ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length")
_DECODER_LIMITS = ("max_target_positions", *_POSITION_LIMITS)
_SOURCE_LIMITS = ("max_source_positions", *_POSITION_LIMITS)
_SPEECH_LAYOUT = ("num_mel_bins", "max_source_positions")
"""The config fields of a speech encoder-decoder's input layout (Whisper's)."""


def _is_encoder_decoder(model: torch.nn.Module) -> bool:
    return bool(getattr(model.config, "is_encoder_decoder", False)) and hasattr(model, "get_encoder")


def _task_of(model: torch.nn.Module) -> str:
    if not _is_encoder_decoder(model):
        return WITH_PAST_TASK
    return SPEECH_SEQ2SEQ_TASK if getattr(model, "main_input_name", "") == "input_features" else SEQ2SEQ_TASK


@dataclass
class GenerativeExport:
    """What :func:`export_with_past` produced.

    Attributes:
        directory: the output directory, ``None`` for an in-memory export.
        manifest: the :class:`GenerationManifest` written as ``generation.json``.
        report: the whole export's report dict.
        graphs: per role, the backend's ``ExportResult``.
        check: the token comparison with eager ``generate()``, ``None`` when not validated.
    """

    directory: Path | None
    manifest: GenerationManifest
    report: dict[str, Any]
    graphs: dict[str, Any]
    check: GenerationCheck | None


def default_max_length(config: Any, cap: int = 2048, names: tuple[str, ...] = _POSITION_LIMITS) -> int:
    """The model's position limit (``max_position_embeddings``, ``n_positions``, ...; an
    encoder-decoder's decoder: ``max_target_positions`` first), at most ``cap`` tokens (a
    memory plan for ExecuTorch is sized by it); ``cap`` when it has none."""
    if names is _POSITION_LIMITS and getattr(config, "is_encoder_decoder", False):
        names = _DECODER_LIMITS
    for name in names:
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return min(value, cap)
    return cap


def _special_ids(model: torch.nn.Module, tokenizer: Any) -> tuple[int, tuple[int, ...], int | None]:
    gen = getattr(model, "generation_config", None)
    cfg = model.config

    def first(*values: Any) -> Any:
        for v in values:
            if v is not None:
                return v
        return None

    eos = first(getattr(gen, "eos_token_id", None), getattr(cfg, "eos_token_id", None),
                getattr(tokenizer, "eos_token_id", None))
    eos_ids = tuple(int(e) for e in (eos if isinstance(eos, list | tuple) else [eos]) if e is not None)
    pad = first(getattr(gen, "pad_token_id", None), getattr(cfg, "pad_token_id", None),
                getattr(tokenizer, "pad_token_id", None), eos_ids[0] if eos_ids else None, 0)
    if isinstance(pad, list | tuple):
        pad = pad[0]
    bos = first(getattr(gen, "bos_token_id", None), getattr(cfg, "bos_token_id", None))
    return int(pad), eos_ids, (int(bos) if isinstance(bos, int) else None)


def example_prompt(vocab_size: int, avoid: set[int], *, batch: int = 2, length: int = 10,
                   padding: int = 3, pad_token_id: int = 0, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A left-padded example batch for the capture: int64 ``(batch, length)`` ids drawn from
    the vocabulary without special tokens, the last row padded on the left by ``padding``."""
    g = torch.Generator().manual_seed(seed)
    allowed = torch.tensor([i for i in range(vocab_size) if i not in avoid])
    ids = allowed[torch.randint(0, len(allowed), (batch, length), generator=g)]
    mask = torch.ones(batch, length, dtype=torch.long)
    mask[-1, :padding] = 0
    ids[-1, :padding] = pad_token_id
    return ids, mask


def _cache_layout(cache: Any, decode_inputs: list[str], prefill_outputs: list[str],
                  static_length: int | None = None) -> CacheLayout:
    feeds = {}
    for name in decode_inputs:
        if name.startswith("past_key_values."):
            produced = "present." + name.removeprefix("past_key_values.")
            # a static cache's counters start at the prompt length (the loop sets them)
            synthesized = static_length is not None and name.endswith(".cumulative_length")
            if produced not in prefill_outputs and not synthesized:
                raise ExportError(f"the prefill graph has no output {produced!r} for decode input {name!r}",
                                  stage="capture")
            feeds[name] = produced
    layers = getattr(cache, "layers", None)
    if layers is None and hasattr(cache, "self_attention_cache"):  # an EncoderDecoderCache
        layers = cache.self_attention_cache.layers
    kinds = tuple(type(layer).__name__ for layer in layers or ())
    halves = 4 if any(".encoder." in n for n in feeds) else 2
    halves += 1 if static_length is not None else 0
    return CacheLayout(num_layers=len(kinds) or len(feeds) // halves, feeds=feeds, layer_kinds=kinds,
                       static_length=static_length)


def export_with_past(
    exporter: Any,
    model: torch.nn.Module,
    *,
    output: str | os.PathLike[str] | None,
    open_session: Callable[[Path, GraphSpec], GraphSession] | None = None,
    tokenizer: Any = None,
    max_length: int | None = None,
    max_batch: int = 4,
    validate: bool = True,
    max_new_tokens_checked: int = 64,
    task: str | None = None,
    cache_implementation: str = "dynamic",
) -> GenerativeExport:
    """Export a generative model's graphs for a generate loop: a decoder-only model's prefill
    and decode graphs; an encoder-decoder's encoder, prefill (the decoder's first step, which
    fills both halves of its cache) and decode graphs.

    A decoder-only model's graphs are traced on the inputs of the model's own ``generate()`` (a left-padded batch
    of 2 and a 10-token prompt, so no axis is specialised), with batch in ``[1, max_batch]`` and
    sequence + past in ``[1, max_length]``. Each graph goes through the backend's full export
    (workarounds, validation against eager at two shapes); then the loop runs on the saved graphs
    and must give eager ``generate()``'s greedy tokens (see :func:`compare_with_eager`).
    An encoder-decoder's are traced on its ``generate()`` over a right-padded batch of 2 sources
    of 10 tokens (Whisper: 2 random feature sets); its decode graph on the third decoder step (a
    past of 2), so the past axis is not specialised.

    Args:
        exporter: the backend's exporter (``OnnxExporter``, ``ExecutorchExporter``).
        model: a ``…ForCausalLM`` model, or an encoder-decoder (``…ForConditionalGeneration``
            with ``get_encoder()``: T5, BART, Whisper).
        output: the export directory (``None``: a temporary one for the check, then removed).
        open_session: loads one saved graph and its :class:`GraphSpec` as a :class:`GraphSession`
            (default: the exporter's ``generation_session``, the backend's runtime).
        tokenizer: the model's ``transformers`` tokenizer, saved beside the graphs.
        max_length: the longest prompt + generated sequence, in tokens (default: the position
            limit, at most 2048); an encoder-decoder's decoder sequence (start tokens + generated).
        max_batch: the largest batch.
        validate: run the per-graph validation and the token comparison.
        max_new_tokens_checked: new tokens the comparison generates per case (at least).
        task: one of :data:`WITH_PAST_TASKS`; by default the model's own (decoder-only, text
            or speech encoder-decoder).
        cache_implementation: ``"dynamic"`` (the cache grows by a token per step) or
            ``"static"`` (a decoder-only model's decode graph takes and returns a cache of
            ``max_length`` positions, ``transformers``' ``StaticCache``: a fixed memory plan).

    Returns:
        A :class:`GenerativeExport`.

    Raises:
        InputError: bounds that cannot hold a capture (``max_length`` < 12, ``max_batch`` < 2),
            or a ``task`` that is not the model's kind; a static cache for an encoder-decoder or
            a model with sliding-window layers; a speech encoder-decoder whose config lacks
            Whisper's ``num_mel_bins`` / ``max_source_positions``.
        CaptureError: ``generate()`` fails on the example prompt.
        ExportError: a graph's export failed (its stage), or ``ValidationError`` (stage
            ``generate``): the loop's tokens differ from eager.
    """
    config = model.config
    open_session = open_session or exporter.generation_session
    length_source = "max_length option" if max_length else "the model's position limit"
    max_length = int(max_length or default_max_length(config))
    limit = default_max_length(config, cap=1 << 30)
    if max_length > limit:
        raise InputError(f"--max-length {max_length} exceeds the model's position limit {limit}")
    if max_length < 12 or max_batch < 2:
        raise InputError(f"max_length {max_length} / max_batch {max_batch} cannot hold the capture "
                         "(a batch of 2 with a 10-token prompt)")
    if task is not None and task != _task_of(model):
        raise InputError(f"task {task!r} does not fit {type(model).__name__}: its generative task is "
                         f"{_task_of(model)!r}")
    task = _task_of(model)
    missing = [k for k in _SPEECH_LAYOUT if getattr(config, k, None) is None]
    if task == SPEECH_SEQ2SEQ_TASK and missing:
        raise InputError(f"{task} is exported for Whisper's input layout, input_features (batch, "
                         f"num_mel_bins, 2 x max_source_positions); {type(config).__name__} has no "
                         f"{' or '.join(missing)}")
    if cache_implementation not in ("dynamic", "static"):
        raise InputError(f"cache_implementation must be 'dynamic' or 'static', got {cache_implementation!r}")
    if cache_implementation == "static" and (_is_encoder_decoder(model) or sliding_layers(config)):
        raise InputError(f"a static cache is exported for decoder-only models without sliding-window "
                         f"layers; {type(model).__name__} is not one (use the dynamic cache)")
    report = ExportReport(task=task, versions=package_versions(*exporter.version_packages))
    model.eval()
    pad, eos_ids, bos = _special_ids(model, tokenizer)
    out_dir = prepare_output(output) if output is not None else None
    started = time.perf_counter()
    import tempfile
    from contextlib import ExitStack

    with ExitStack() as held:
        if out_dir is not None:
            held.enter_context(lock_output(out_dir))
            staging = held.enter_context(staging_directory(out_dir))
        else:
            staging = Path(held.enter_context(tempfile.TemporaryDirectory(prefix="export-gen-")))
        try:
            export_graphs = _export_seq2seq_graphs if _is_encoder_decoder(model) else _export_graphs
            options = {"cache_implementation": cache_implementation} if export_graphs is _export_graphs else {}
            result = export_graphs(exporter, model, staging, report, open_session=open_session, **options,
                                    tokenizer=tokenizer, max_length=max_length, max_batch=max_batch,
                                    validate=validate, pad=pad, eos_ids=eos_ids, bos=bos,
                                    max_new_tokens_checked=max_new_tokens_checked,
                                    length_source=length_source)
        except ExportError as e:
            report.stage = report.stage or e.stage
            report.error = str(e)
            report.stages.append({"name": "total", "seconds": round(time.perf_counter() - started, 3)})
            if out_dir is not None:
                record_failure(out_dir, report, GENERATION_ARTIFACTS)
            raise
        report.status, report.stage = "ok", None
        report.stages.append({"name": "total", "seconds": round(time.perf_counter() - started, 3)})
        manifest, graphs, check, files = result
        if out_dir is not None:
            commit_export(staging, out_dir, files, report, GENERATION_ARTIFACTS)
    return GenerativeExport(out_dir, manifest, report.as_dict(), graphs, check)


@dataclass(frozen=True)
class _GraphPlan:
    """One graph to export: the module traced, its example inputs, ``dynamic_shapes``, the
    constant arguments fixed at export, and the validation input sets (other shapes)."""

    role: str
    module: torch.nn.Module
    inputs: dict[str, Any]
    dynamic_shapes: dict[str, Any]
    constant_kwargs: dict[str, Any]
    validation_inputs: list[dict[str, Any]]


def _vocab_size(config: Any) -> int:
    return int(getattr(config, "vocab_size", 0) or getattr(config.get_text_config(), "vocab_size", 0))


def _export_graphs(exporter: Any, model: torch.nn.Module, staging: Path, report: ExportReport, *,
                   open_session: Callable[[Path, GraphSpec], GraphSession], tokenizer: Any, max_length: int,
                   max_batch: int, validate: bool, pad: int, eos_ids: tuple[int, ...], bos: int | None,
                   max_new_tokens_checked: int, length_source: str, cache_implementation: str = "dynamic"):
    config = model.config
    vocab = _vocab_size(config)
    t0 = time.perf_counter()
    static = cache_implementation == "static"
    # sliding-window layers are recorded and traced as full caches (cache_layers.py); the
    # comparison with eager below runs outside, on the model's own sliding cache
    with full_sliding_layers() as full_sliding:
        avoid = {pad, *eos_ids, *([bos] if bos is not None else [])}

        def record(new_cache: Callable[[], Any] | None = None) -> list[Any]:
            """The generate calls of each recorded prompt (each on a fresh cache of
            ``new_cache()``, else the model's own)."""
            return [record_generate_calls(model, *example_prompt(vocab, avoid, batch=b, length=n, padding=p,
                                                                 pad_token_id=pad, seed=seed),
                                          pad_token_id=pad, eos_token_id=list(eos_ids) or None,
                                          **({"past_key_values": new_cache()} if new_cache else {}))
                    for b, n, p, seed in _recorded_prompts(max_batch, max_length)]

        calls, *others = record()
        if static:
            # the decode steps again, on a StaticCache of max_length positions (the prefill
            # graph is the dynamic one: the loop copies its presents into the static buffers)
            from transformers.cache_utils import StaticCache

            static_calls = record(lambda: StaticCache(config=config, max_cache_len=max_length))
        report.stages.append({"name": "record_generate", "seconds": round(time.perf_counter() - t0, 3)})
        # a range whose maximum is the capture's batch of 2 pins the axis at 2 (torch.export's
        # lower bound of a backed size is 2): the graphs admit at least 3; the loop enforces max_batch
        graph_batch = max(max_batch, 3)
        constant = dict(calls.constant_kwargs)
        plans = [
            _GraphPlan("prefill", model, calls.prefill,
                       prefill_dynamic_shapes(calls.prefill, max_batch=graph_batch, max_length=max_length),
                       constant, [c.prefill for c in others]),
            _GraphPlan("decode", model, calls.decode,
                       decode_dynamic_shapes(calls.decode, cache_argument=calls.cache_argument,
                                             max_batch=graph_batch, max_length=max_length),
                       constant, [c.decode for c in others]),
        ]
        if static:
            first, *rest = static_calls
            plans[1] = _GraphPlan("decode", model, first.decode,
                                  static_decode_dynamic_shapes(first.decode, cache_argument=first.cache_argument,
                                                               max_batch=graph_batch),
                                  constant, [c.decode for c in rest])
        graphs, specs = _export_roles(exporter, plans, staging, report, max_batch=graph_batch,
                                      max_seq=max_length, validate=validate, task=WITH_PAST_TASK)
    decode_calls = static_calls[0] if static else calls
    cache = _cache_layout(decode_calls.decode[decode_calls.cache_argument], list(specs["decode"].inputs),
                          list(specs["prefill"].outputs), static_length=max_length if static else None)
    manifest = GenerationManifest(
        task=WITH_PAST_TASK, architecture=type(model).__name__,
        backend=exporter.backend.split(".")[0],  # "executorch.xnnpack": the runtime is executorch
        graphs=specs, cache=cache, max_length=max_length, max_batch=max_batch, pad_token_id=pad,
        eos_token_ids=eos_ids, bos_token_id=bos,
        token_rules=TokenRules.from_generation_config(getattr(model, "generation_config", None), vocab),
        extra={"registry_backend": exporter.backend,
               "constant_kwargs": _plain(constant),
               "sliding_layers_cached_in_full": sliding_layers(config) if full_sliding else []},
    )
    report.extra["bounds"] = {"batch": [1, max_batch], "sequence": [1, max_length], "source": length_source}
    report.extra["cache_implementation"] = cache_implementation
    return _finish(model, manifest, graphs, staging, report, tokenizer=tokenizer, open_session=open_session,
                   validate=validate, vocab=vocab, avoid={pad, *eos_ids},
                   max_new_tokens_checked=max_new_tokens_checked)


def _recorded_prompts(max_batch: int, max_length: int) -> tuple[tuple[int, int, int, int], ...]:
    """``(batch, length, left padding, seed)`` of the recorded prompts: the capture's batch (2 x
    10, one row padded), then the validation sets: batch 1 and a larger padded batch at other
    prompt lengths, as generate() calls the graphs (generate passes no attention_mask for an
    unpadded batch of 1: the row gets one pad)."""
    return ((2, 10, 3, 0), (1, 6, 1, 1), (min(3, max_batch), min(13, max_length - 2), 4, 2))


def _plain(kwargs: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if isinstance(v, bool | int | float | str)}


def example_source(model: torch.nn.Module, *, batch: int, length: int, padding: int, pad_token_id: int,
                   avoid: set[int], seed: int) -> dict[str, torch.Tensor]:
    """An encoder-decoder's example encoder inputs: int64 ``input_ids`` and ``attention_mask``
    ``(batch, length)``, the last row right-padded by ``padding``; or, for a model whose main
    input is ``input_features``, float32 ``(batch, num_mel_bins, 2 * max_source_positions)``
    random features (Whisper's encoder takes exactly that many frames)."""
    config = model.config
    g = torch.Generator().manual_seed(seed)
    if getattr(model, "main_input_name", "") == "input_features":
        frames = 2 * int(getattr(config, "max_source_positions", 1500))
        return {"input_features": torch.randn(batch, int(config.num_mel_bins), frames, generator=g)}
    ids, mask = example_prompt(_vocab_size(config), avoid, batch=batch, length=length, padding=padding,
                               pad_token_id=pad_token_id, seed=seed)
    # example_prompt pads on the left; an encoder's source is padded on the right
    return {"input_ids": ids.flip(-1), "attention_mask": mask.flip(-1)}


def _export_seq2seq_graphs(exporter: Any, model: torch.nn.Module, staging: Path, report: ExportReport, *,
                           open_session: Callable[[Path, GraphSpec], GraphSession], tokenizer: Any,
                           max_length: int, max_batch: int, validate: bool, pad: int,
                           eos_ids: tuple[int, ...], bos: int | None, max_new_tokens_checked: int,
                           length_source: str):
    config = model.config
    vocab = _vocab_size(config)
    task = _task_of(model)
    speech = task == SPEECH_SEQ2SEQ_TASK
    max_source = (2 * int(getattr(config, "max_source_positions", 1500)) if speech
                  else default_max_length(config, cap=512, names=_SOURCE_LIMITS))
    t0 = time.perf_counter()
    avoid = {pad, *eos_ids, *([bos] if bos is not None else [])}
    calls, *others = [
        record_seq2seq_calls(model, example_source(model, batch=b, length=n, padding=p, pad_token_id=pad,
                                                   avoid=avoid, seed=seed),
                             pad_token_id=pad, eos_token_id=list(eos_ids) or None)
        # the capture's right-padded batch of 2 x 10, then batch 1 and a padded batch of 3
        for b, n, p, seed in ((2, 10, 3, 0), (1, 6, 0, 1), (min(3, max_batch), min(13, max_source), 4, 2))
    ]
    report.stages.append({"name": "record_generate", "seconds": round(time.perf_counter() - t0, 3)})
    graph_batch = max(max_batch, 3)
    constant = dict(calls.constant_kwargs)
    decoder_shapes = dict(max_batch=graph_batch, max_length=max_length, max_source=max_source)
    encoder = model.get_encoder()
    plans = [
        _GraphPlan("encoder", encoder, calls.encoder,
                   encoder_dynamic_shapes(calls.encoder, max_batch=graph_batch, max_source=max_source),
                   dict(calls.encoder_constant_kwargs), [c.encoder for c in others]),
        _GraphPlan("prefill", model, calls.prefill,
                   seq2seq_decoder_dynamic_shapes(calls.prefill, cache_argument=None, **decoder_shapes),
                   constant, [c.prefill for c in others]),
        _GraphPlan("decode", model, calls.decode,
                   seq2seq_decoder_dynamic_shapes(calls.decode, cache_argument=calls.cache_argument,
                                                  **decoder_shapes),
                   constant, [calls.later, *(c.later for c in others)]),
    ]
    graphs, specs = _export_roles(exporter, plans, staging, report, max_batch=graph_batch,
                                  max_seq=max(max_length, max_source), validate=validate, task=task)
    cache = _cache_layout(calls.decode[calls.cache_argument], list(specs["decode"].inputs),
                          list(specs["prefill"].outputs))
    encoder_outputs = {}
    for name in specs["prefill"].inputs:
        if name.startswith("encoder_outputs."):
            produced = name.removeprefix("encoder_outputs.")
            if produced not in specs["encoder"].outputs:
                raise ExportError(f"the encoder graph has no output {produced!r} for decoder input {name!r}",
                                  stage="capture")
            encoder_outputs[name] = produced
    manifest = GenerationManifest(
        task=task, architecture=type(model).__name__, backend=exporter.backend.split(".")[0],
        graphs=specs, cache=cache, max_length=max_length, max_batch=max_batch, pad_token_id=pad,
        eos_token_ids=eos_ids, bos_token_id=bos, decoder_prompt=calls.decoder_prompt,
        encoder_outputs=encoder_outputs, encoder_inputs=tuple(calls.encoder),
        max_source_length=max_source,
        token_rules=TokenRules.from_generation_config(getattr(model, "generation_config", None), vocab),
        extra={"registry_backend": exporter.backend, "constant_kwargs": _plain(constant),
               "encoder_constant_kwargs": _plain(calls.encoder_constant_kwargs),
               **({"num_mel_bins": int(config.num_mel_bins)} if speech else {})},
    )
    report.extra["bounds"] = {"batch": [1, max_batch], "sequence": [1, max_length], "source": length_source,
                              "encoder_length": [1, max_source] if not speech else [max_source, max_source]}
    return _finish(model, manifest, graphs, staging, report, tokenizer=tokenizer, open_session=open_session,
                   validate=validate, vocab=vocab, avoid={pad, *eos_ids},
                   max_new_tokens_checked=max_new_tokens_checked)


def _finish(model: torch.nn.Module, manifest: GenerationManifest, graphs: dict[str, Any], staging: Path,
            report: ExportReport, *, tokenizer: Any, open_session: Callable[[Path, GraphSpec], GraphSession],
            validate: bool, vocab: int, avoid: set[int], max_new_tokens_checked: int):
    """Write the manifest, the generation config and the tokenizer into ``staging``, fill the
    report, and run the validation by generation on the saved graphs."""
    specs = manifest.graphs
    manifest.write(staging)
    files = [*specs, MANIFEST_NAME]
    gen_config = getattr(model, "generation_config", None)
    if gen_config is not None:
        gen_config.save_pretrained(staging)
        files.append("generation_config.json")
    if tokenizer is not None:
        before = set(os.listdir(staging))
        tokenizer.save_pretrained(staging)
        files += sorted(set(os.listdir(staging)) - before)
    report.inputs = list(specs["decode"].inputs)
    report.outputs = list(specs["decode"].outputs)
    report.extra["graphs"] = {role: {"path": s.path, "inputs": list(s.inputs), "outputs": list(s.outputs),
                                     "validation": graphs[role].report.get("validation", {}).get("status")}
                              for role, s in specs.items()}
    cache = manifest.cache
    report.extra["cache"] = {"num_layers": cache.num_layers, "axes": list(cache.axes),
                             "layer_kinds": list(cache.layer_kinds)}
    check = None
    if validate:
        t0 = time.perf_counter()
        sessions = {role: open_session(staging / s.path, s) for role, s in specs.items()}
        loop = GenerationLoop(manifest, sessions)
        check = compare_with_eager(model, loop, vocab=vocab, avoid=avoid, max_new_tokens=max_new_tokens_checked)
        report.validation = check.as_dict()
        report.stages.append({"name": "generate_check", "seconds": round(time.perf_counter() - t0, 3)})
        if not check.passed:
            report.stage = "generate"
            from ..errors import ValidationError

            raise ValidationError(f"generated tokens differ from eager generate(): {check.first_problem()}",
                                  stage="generate")
    else:
        from ..validation import skipped_validation

        report.validation = skipped_validation()
    return manifest, graphs, check, files


def _export_roles(exporter: Any, plans: list[_GraphPlan], staging: Path, report: ExportReport, *,
                  max_batch: int, max_seq: int, validate: bool,
                  task: str) -> tuple[dict[str, Any], dict[str, GraphSpec]]:
    """Export each planned graph through the backend's ``export()``; each is validated against
    eager on the inputs ``generate()`` passed for other prompts (consistent masks, positions
    and past lengths, batch 1 among them)."""
    graphs: dict[str, Any] = {}
    specs: dict[str, GraphSpec] = {}
    for plan in plans:
        role = plan.role
        listener = getattr(exporter, "listener", None)
        if listener is not None and hasattr(listener, "info"):
            listener.info(f"[bold]{role}[/] graph")
        # a backend with bounds of its own (ExecuTorch) plans for the graphs' bounds: its
        # default sequence cap (512) would reject a longer past than the manifest promises
        bound = {k: v for k, v in (("max_batch", max_batch), ("max_seq", max_seq))
                 if hasattr(exporter.config, k)}
        graph_exporter = exporter.configured(dynamic_shapes=plan.dynamic_shapes,
                                             constant_kwargs=plan.constant_kwargs, **bound)
        try:
            result = graph_exporter.export(plan.module, plan.inputs, output=staging / role, validate=validate,
                                           validation_inputs=plan.validation_inputs, task=f"{task}:{role}")
        except ExportError as e:
            report.stage = e.stage
            raise type(e)(f"{role} graph: {e.args[0] if e.args else e}", stage=e.stage) from e
        graphs[role] = result
        specs[role] = GraphSpec(role, f"{role}/{result.path.name}", tuple(result.report["inputs"]),
                                tuple(result.report["outputs"]))
        report.stages.append({"name": role, "seconds": round(sum(s["seconds"] for s in result.report["stages"]), 3)})
    return graphs, specs
