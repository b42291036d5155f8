"""The generate loop over exported graphs: prefill, then one decode step per token.

Backend-neutral and torch-free: a backend gives a :class:`GraphSession` per graph (ONNX Runtime,
the ExecuTorch runtime) and this module feeds them numpy arrays. Batches are left-padded, as
``generate`` expects for decoder-only models; ``position_ids`` follow ``generate``'s rule
(``cumsum(attention_mask) - 1``, 1 at padding).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .manifest import GenerationError, GenerationManifest
from .sampling import SamplingOptions, next_tokens

__all__ = ["GraphSession", "GenerationStep", "GenerationOutput", "GenerationLoop", "left_pad"]


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


def _positions(mask: np.ndarray) -> np.ndarray:
    pos = np.cumsum(mask, axis=-1) - 1
    return np.where(mask == 0, 1, pos).astype(np.int64)


class GenerationLoop:
    """Greedy or sampled generation from a prefill and a decode graph.

    Args:
        manifest: the export's :class:`GenerationManifest`.
        sessions: ``{"prefill": session, "decode": session}``.
    """

    def __init__(self, manifest: GenerationManifest, sessions: Mapping[str, GraphSession]) -> None:
        self.manifest = manifest
        self.prefill = sessions["prefill"]
        self.decode = sessions["decode"]

    def check_request(self, prompt_length: int, batch: int, max_new_tokens: int) -> None:
        """Refuse a request the graphs were not built for.

        Raises:
            GenerationError: the batch exceeds ``max_batch``, or prompt + new tokens exceed
                ``max_length``; the message gives the numbers and the option to raise them.
        """
        m = self.manifest
        if batch > m.max_batch:
            raise GenerationError(f"batch {batch} exceeds the export's maximum batch {m.max_batch}; "
                                  "re-export with a larger --max-batch")
        if max_new_tokens < 1:
            raise GenerationError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
        if prompt_length + max_new_tokens > m.max_length:
            raise GenerationError(
                f"prompt ({prompt_length} tokens) + max_new_tokens ({max_new_tokens}) = "
                f"{prompt_length + max_new_tokens} exceeds the export's maximum length "
                f"{m.max_length}; lower max_new_tokens or re-export with a larger --max-length")

    def _feeds(self, session: GraphSession, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [n for n in session.input_names if n not in values]
        if missing:
            raise GenerationError(f"the loop has no value for graph input(s) {missing}")
        return {n: values[n] for n in session.input_names}

    def stream(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        max_new_tokens: int = 32,
        sampling: SamplingOptions | None = None,
        stop_on_eos: bool = True,
        min_new_tokens: int = 0,
        logits_callback: Callable[[int, np.ndarray], None] | None = None,
    ) -> Iterator[GenerationStep]:
        """Generate, yielding each step's tokens as soon as they are chosen.

        Args:
            prompts: token ids per row (different lengths are left-padded).
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
                ``min_new_tokens`` above ``max_new_tokens``.
        """
        m = self.manifest
        if not 0 <= min_new_tokens <= max_new_tokens:
            raise GenerationError(f"min_new_tokens must be in [0, max_new_tokens={max_new_tokens}], "
                                  f"got {min_new_tokens}")
        sampling = sampling or SamplingOptions()
        rng = np.random.default_rng(sampling.seed)
        ids, mask = left_pad(prompts, m.pad_token_id)
        self.check_request(ids.shape[1], ids.shape[0], max_new_tokens)
        eos = np.asarray(m.eos_token_ids or (-1,), dtype=np.int64)
        finished = np.zeros(ids.shape[0], dtype=bool)
        positions = _positions(mask)
        values = {"input_ids": ids, "attention_mask": mask, "position_ids": positions}
        out = self.prefill.run(self._feeds(self.prefill, values))
        for step in range(max_new_tokens):
            if "logits" not in out:
                raise GenerationError(f"the graph returned no 'logits' (outputs: {sorted(out)})")
            logits = np.asarray(out["logits"])[:, -1, :]
            if step < min_new_tokens and m.eos_token_ids:
                logits = logits.copy()
                logits[:, list(m.eos_token_ids)] = -np.inf
            if logits_callback is not None:
                logits_callback(step, logits)
            tokens = next_tokens(logits, sampling, rng)
            tokens = np.where(finished, m.pad_token_id, tokens)
            if stop_on_eos:
                finished = finished | np.isin(tokens, eos)
            yield GenerationStep(step, tokens, finished.copy())
            if step + 1 == max_new_tokens or (stop_on_eos and finished.all()):
                return
            mask = np.concatenate([mask, np.ones((mask.shape[0], 1), dtype=np.int64)], axis=1)
            positions = (positions[:, -1:] + 1).astype(np.int64)
            values = {"input_ids": tokens[:, None], "attention_mask": mask, "position_ids": positions}
            for feed, produced in m.cache.feeds.items():
                values[feed] = out[produced]
            out = self.decode.run(self._feeds(self.decode, values))

    def generate(self, prompts: Sequence[Sequence[int]], **options) -> GenerationOutput:
        """Run :meth:`stream` to the end and collect the tokens per row (keyword options as
        :meth:`stream`)."""
        rows: list[list[int]] = [[] for _ in prompts]
        done = [False] * len(prompts)
        stopped = ["length"] * len(prompts)
        steps = 0
        for step in self.stream(prompts, **options):
            steps += 1
            for i, t in enumerate(step.tokens.tolist()):
                if not done[i]:
                    rows[i].append(int(t))
                if step.finished[i] and not done[i]:
                    done[i], stopped[i] = True, "eos"
        return GenerationOutput(rows, [len(p) for p in prompts], steps, stopped)
