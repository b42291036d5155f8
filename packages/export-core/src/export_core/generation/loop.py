"""The generate loop over exported graphs: prefill, then one decode step per token.

Backend-neutral and torch-free: a backend gives a :class:`GraphSession` per graph (ONNX Runtime,
the ExecuTorch runtime) and this module feeds them numpy arrays. Batches are left-padded, as
``generate`` expects for decoder-only models; ``position_ids`` follow ``generate``'s rule
(``cumsum(attention_mask) - 1``, 1 at padding).

An encoder-decoder export (an ``encoder`` graph in the manifest) runs the encoder once on the
source (token ids right-padded, or the caller's ``input_features``), then its prefill graph (the
decoder's first step on the start tokens, which fills both halves of the cache) and one decode
step per token; the encoder's mask and output are fed to every decoder step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .manifest import GenerationError, GenerationManifest
from .sampling import SamplingOptions, next_tokens

__all__ = ["GraphSession", "GenerationStep", "GenerationOutput", "GenerationLoop", "left_pad", "right_pad"]


class GraphSession(Protocol):
    """One loaded graph: named numpy inputs in, named numpy outputs out."""

    input_names: Sequence[str]
    output_names: Sequence[str]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run the graph on ``feeds`` (every input name) and return every output by name."""
        ...


@dataclass(frozen=True)
class GenerationStep:
    """The tokens one step produced.

    Attributes:
        index: 0 for the token after the prompt, then 1, 2, ...
        tokens: int64 ``(batch,)``; rows that finished earlier get the pad token.
        finished: bool ``(batch,)``: the row has produced EOS (at this step or before).
    """

    index: int
    tokens: np.ndarray
    finished: np.ndarray


@dataclass
class GenerationOutput:
    """The result of one generate call.

    Attributes:
        sequences: per row, the generated token ids (without the prompt, without padding after
            EOS; EOS itself kept).
        prompt_lengths: per row, the prompt length in tokens.
        steps: decode steps run (the prefill counts as the first).
        stopped: per row, ``"eos"`` or ``"length"``.
    """

    sequences: list[list[int]]
    prompt_lengths: list[int]
    steps: int
    stopped: list[str] = field(default_factory=list)


def left_pad(prompts: Sequence[Sequence[int]], pad_token_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Left-pad token-id prompts into a batch.

    Returns:
        ``input_ids`` and ``attention_mask``, int64 ``(batch, sequence)``.

    Raises:
        GenerationError: no prompt, or an empty one.
    """
    if not prompts:
        raise GenerationError("no prompt given")
    if any(len(p) == 0 for p in prompts):
        raise GenerationError("a prompt has no tokens")
    width = max(len(p) for p in prompts)
    ids = np.full((len(prompts), width), pad_token_id, dtype=np.int64)
    mask = np.zeros((len(prompts), width), dtype=np.int64)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):] = np.asarray(p, dtype=np.int64)
        mask[i, width - len(p):] = 1
    return ids, mask


def right_pad(prompts: Sequence[Sequence[int]], pad_token_id: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-pad token-id sources into a batch (an encoder's input, as tokenizers pad it).

    Returns:
        ``input_ids`` and ``attention_mask``, int64 ``(batch, source)``.

    Raises:
        GenerationError: no prompt, or an empty one.
    """
    ids, mask = left_pad([list(p)[::-1] for p in prompts], pad_token_id)
    return ids[:, ::-1].copy(), mask[:, ::-1].copy()


def _positions(mask: np.ndarray) -> np.ndarray:
    pos = np.cumsum(mask, axis=-1) - 1
    return np.where(mask == 0, 1, pos).astype(np.int64)


def _static_buffers(prefill_out: dict[str, np.ndarray], length: int, written: int) -> dict[str, np.ndarray]:
    """The prefill's ``present.<i>.key|value`` ``(batch, kv_heads, written, head_dim)`` copied
    into zero buffers of the static cache's ``length``, and each layer's ``cumulative_length``
    (0-d int64) set to ``written``."""
    out = dict(prefill_out)
    for name, value in prefill_out.items():
        if name.startswith("present.") and np.ndim(value) == 4:
            buffer = np.zeros(value.shape[:2] + (length,) + value.shape[3:], dtype=value.dtype)
            buffer[:, :, :written] = value
            out[name] = buffer
            layer = name.split(".")[1]
            out[f"present.{layer}.cumulative_length"] = np.asarray(written, dtype=np.int64)
    return out


def _static_mask(mask: np.ndarray, length: int) -> np.ndarray:
    """A decode step's 4-D boolean mask ``(batch, 1, 1, length)`` over the static cache's slots:
    the 2-D ``(batch, written + 1)`` mask, then unwritten slots masked, as ``generate`` builds it."""
    full = np.zeros((mask.shape[0], length), dtype=bool)
    full[:, :mask.shape[1]] = mask.astype(bool)
    return full[:, None, None, :]


class GenerationLoop:
    """Greedy or sampled generation from a prefill and a decode graph.

    Args:
        manifest: the export's :class:`GenerationManifest`.
        sessions: ``{"prefill": session, "decode": session}`` (and ``"encoder"`` for an
            encoder-decoder).
    """

    def __init__(self, manifest: GenerationManifest, sessions: Mapping[str, GraphSession]) -> None:
        self.manifest = manifest
        self.prefill = sessions["prefill"]
        self.decode = sessions["decode"]
        self.encoder = sessions.get("encoder")
        if manifest.is_encoder_decoder and self.encoder is None:
            raise GenerationError("the manifest names an encoder graph but no session was given for it")

    def check_request(self, prompt_length: int, batch: int, max_new_tokens: int,
                      source_length: int | None = None) -> None:
        """Refuse a request the graphs were not built for.

        Args:
            prompt_length: the decoder's prompt (the padded prompt of a decoder-only model, the
                start tokens of an encoder-decoder).
            source_length: an encoder-decoder's source length.

        Raises:
            GenerationError: the batch exceeds ``max_batch``, prompt + new tokens exceed
                ``max_length``, or the source exceeds ``max_source_length``; the message gives
                the numbers and the option to raise them.
        """
        m = self.manifest
        if batch > m.max_batch:
            raise GenerationError(f"batch {batch} exceeds the export's maximum batch {m.max_batch}; "
                                  "re-export with a larger --max-batch")
        if max_new_tokens < 1:
            raise GenerationError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if prompt_length + max_new_tokens > m.max_length:
            what = "decoder start tokens" if m.is_encoder_decoder else "prompt"
            raise GenerationError(
                f"{what} ({prompt_length} tokens) + max_new_tokens ({max_new_tokens}) = "
                f"{prompt_length + max_new_tokens} exceeds the export's maximum length "
                f"{m.max_length}; lower max_new_tokens or re-export with a larger --max-length")
        if source_length is not None and m.max_source_length and source_length > m.max_source_length:
            raise GenerationError(f"the source ({source_length} tokens) exceeds the export's maximum "
                                  f"source length {m.max_source_length}")

    def _feeds(self, session: GraphSession, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [n for n in session.input_names if n not in values]
        if missing:
            raise GenerationError(f"the loop has no value for graph input(s) {missing}")
        return {n: values[n] for n in session.input_names}

    def _start(self, prompts: Sequence[Sequence[int]] | None, encoder_inputs: Mapping[str, np.ndarray] | None,
               max_new_tokens: int) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], int]:
        """The prefill's feeds, the values every later step gets as they are (an
        encoder-decoder's mask and encoder output) and the batch size."""
        m = self.manifest
        if not m.is_encoder_decoder:
            if encoder_inputs is not None:
                raise GenerationError("encoder_inputs are for an encoder-decoder export; this one is "
                                      f"decoder-only ({m.architecture})")
            if prompts is None:
                raise GenerationError("no prompt given")
            ids, mask = left_pad(prompts, m.pad_token_id)
            self.check_request(ids.shape[1], ids.shape[0], max_new_tokens)
            return {"input_ids": ids, "attention_mask": mask, "position_ids": _positions(mask)}, {}, ids.shape[0]
        if (prompts is None) == (encoder_inputs is None):
            raise GenerationError("an encoder-decoder export takes either prompts (the source's token "
                                  "ids) or encoder_inputs (e.g. input_features), not both or neither")
        if encoder_inputs is None:
            ids, mask = right_pad(prompts, m.pad_token_id)
            source = {"input_ids": ids, "attention_mask": mask}
        else:
            source = {k: np.asarray(v) for k, v in encoder_inputs.items()}
        unknown = sorted(set(source) - set(self.encoder.input_names) - {"attention_mask"})
        if unknown:
            raise GenerationError(f"the encoder graph takes {list(self.encoder.input_names)}, not {unknown}")
        first = next(iter(source.values()))
        batch = int(first.shape[0])
        self.check_request(len(m.decoder_prompt), batch, max_new_tokens,
                           int(first.shape[-1]) if first.ndim >= 2 else None)
        encoded = self.encoder.run(self._feeds(self.encoder, source))
        fixed = {name: encoded[out] for name, out in m.encoder_outputs.items()}
        if "attention_mask" in source:
            fixed["attention_mask"] = source["attention_mask"]
        start = np.tile(np.asarray(m.decoder_prompt, dtype=np.int64), (batch, 1))
        return {"decoder_input_ids": start, **fixed}, fixed, batch

    def _apply_rules(self, logits: np.ndarray, step: int, max_new_tokens: int, min_new_tokens: int) -> np.ndarray:
        """The generation config's token rules and ``min_new_tokens``, in ``generate``'s order
        (a forced token wins over a masked one)."""
        m, rules = self.manifest, self.manifest.token_rules
        # generate forces BOS when the sequence so far is one token (an encoder-decoder's start)
        # and suppresses begin_suppress_tokens at the first free step after it
        bos_step = 0 if (rules.forced_bos_token_id is not None and m.is_encoder_decoder
                         and len(m.decoder_prompt) == 1) else None
        begin = 1 if bos_step == 0 else 0
        banned = list(rules.suppress_tokens) + (list(rules.begin_suppress_tokens) if step == begin else [])
        if step < min_new_tokens:
            banned += list(m.eos_token_ids)
        forced: list[int] = []
        if step == bos_step:
            forced = [rules.forced_bos_token_id]
        elif step == max_new_tokens - 1 and rules.forced_eos_token_id:
            forced = list(rules.forced_eos_token_id)
        if not banned and not forced:
            return logits
        logits = logits.copy()
        if banned:
            logits[:, banned] = -np.inf
        if forced:
            logits[:] = -np.inf
            logits[:, forced] = 0.0
        return logits

    def stream(
        self,
        prompts: Sequence[Sequence[int]] | None = None,
        *,
        encoder_inputs: Mapping[str, np.ndarray] | None = None,
        max_new_tokens: int = 32,
        sampling: SamplingOptions | None = None,
        stop_on_eos: bool = True,
        min_new_tokens: int = 0,
        logits_callback: Callable[[int, np.ndarray], None] | None = None,
    ) -> Iterator[GenerationStep]:
        """Generate, yielding each step's tokens as soon as they are chosen.

        Args:
            prompts: token ids per row: a decoder-only model's prompt (different lengths are
                left-padded), an encoder-decoder's source (right-padded).
            encoder_inputs: instead of ``prompts``, an encoder-decoder's encoder inputs as
                arrays (Whisper: float32 ``input_features`` ``(batch, mel_bins, frames)``).
            max_new_tokens: the token budget per row.
            sampling: greedy when ``None``.
            stop_on_eos: end a row at the manifest's EOS tokens (the loop ends when all rows
                have).
            min_new_tokens: EOS cannot be chosen before this many new tokens (its logits are
                -inf, as ``generate(min_new_tokens=...)`` does), so every row runs that far.
            logits_callback: called with the step index and the float ``(batch, vocab)`` logits
                the step chose from (validation uses it to find ties).

        Raises:
            GenerationError: see :meth:`check_request`; a graph without ``logits``;
                ``min_new_tokens`` above ``max_new_tokens``; prompts and encoder inputs both
                or neither given.
        """
        m = self.manifest
        if not 0 <= min_new_tokens <= max_new_tokens:
            raise GenerationError(f"min_new_tokens must be in [0, max_new_tokens={max_new_tokens}], "
                                  f"got {min_new_tokens}")
        sampling = sampling or SamplingOptions()
        rng = np.random.default_rng(sampling.seed)
        values, fixed, batch = self._start(prompts, encoder_inputs, max_new_tokens)
        mask, positions = values.get("attention_mask"), values.get("position_ids")
        eos = np.asarray(m.eos_token_ids or (-1,), dtype=np.int64)
        finished = np.zeros(batch, dtype=bool)
        out = self.prefill.run(self._feeds(self.prefill, values))
        for step in range(max_new_tokens):
            if "logits" not in out:
                raise GenerationError(f"the graph returned no 'logits' (outputs: {sorted(out)})")
            logits = self._apply_rules(np.asarray(out["logits"])[:, -1, :], step, max_new_tokens,
                                       min_new_tokens)
            if logits_callback is not None:
                logits_callback(step, logits)
            tokens = next_tokens(logits, sampling, rng)
            tokens = np.where(finished, m.pad_token_id, tokens)
            if stop_on_eos:
                finished = finished | np.isin(tokens, eos)
            yield GenerationStep(step, tokens, finished.copy())
            if step + 1 == max_new_tokens or (stop_on_eos and finished.all()):
                return
            if m.is_encoder_decoder:
                values = {"decoder_input_ids": tokens[:, None], **fixed}
            else:
                mask = np.concatenate([mask, np.ones((mask.shape[0], 1), dtype=np.int64)], axis=1)
                positions = (positions[:, -1:] + 1).astype(np.int64)
                values = {"input_ids": tokens[:, None], "attention_mask": mask, "position_ids": positions}
            if m.cache.static_length is not None:
                if step == 0:
                    out = _static_buffers(out, m.cache.static_length, mask.shape[1] - 1)
                values["attention_mask"] = _static_mask(mask, m.cache.static_length)
            for feed, produced in m.cache.feeds.items():
                values[feed] = out[produced]
            out = self.decode.run(self._feeds(self.decode, values))

    def generate(self, prompts: Sequence[Sequence[int]] | None = None, **options) -> GenerationOutput:
        """Run :meth:`stream` to the end and collect the tokens per row (keyword options as
        :meth:`stream`)."""
        rows: list[list[int]] = []
        done: list[bool] = []
        stopped: list[str] = []
        steps = 0
        for step in self.stream(prompts, **options):
            if not rows:
                rows = [[] for _ in step.tokens]
                done, stopped = [False] * len(rows), ["length"] * len(rows)
            steps += 1
            for i, t in enumerate(step.tokens.tolist()):
                if not done[i]:
                    rows[i].append(int(t))
                if step.finished[i] and not done[i]:
                    done[i], stopped[i] = True, "eos"
        lengths = [len(p) for p in prompts] if prompts is not None else [0] * len(rows)
        return GenerationOutput(rows, lengths, steps, stopped)
