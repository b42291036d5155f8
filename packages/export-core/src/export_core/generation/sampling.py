"""Choosing the next token from logits, in numpy: greedy, temperature, top-k, top-p, seeded."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["SamplingOptions", "next_tokens"]


@dataclass(frozen=True)
class SamplingOptions:
    """How the next token is chosen.

    Attributes:
        do_sample: draw from the distribution (``False``: greedy, the arg-max).
        temperature: logits are divided by it before sampling (> 0).
        top_k: keep the ``top_k`` most likely tokens (0: all).
        top_p: keep the smallest set of most likely tokens whose probability reaches ``top_p``
            (1.0: all).
        seed: seeds the generator; the same seed gives the same tokens.
    """

    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.temperature <= 0:
            raise ValueError(f"temperature must be > 0, got {self.temperature}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


def next_tokens(logits: np.ndarray, options: SamplingOptions, rng: np.random.Generator) -> np.ndarray:
    """The next token of each row.

    Args:
        logits: float ``(batch, vocab)``, the last position's logits.
        options: greedy or sampling settings.
        rng: the generator sampling draws from.

    Returns:
        int64 ``(batch,)``.
    """
    logits = np.asarray(logits, dtype=np.float64)
    if not options.do_sample:
        return logits.argmax(axis=-1).astype(np.int64)
    scores = logits / options.temperature
    if options.top_k and options.top_k < scores.shape[-1]:
        kth = np.sort(scores, axis=-1)[:, -options.top_k][:, None]
        scores = np.where(scores < kth, -np.inf, scores)
    if options.top_p < 1.0:
        order = np.argsort(-scores, axis=-1)
        sorted_scores = np.take_along_axis(scores, order, axis=-1)
        probs = _softmax(sorted_scores)
        cumulative = np.cumsum(probs, axis=-1)
        # drop a token once the ones before it already reach top_p (the first always stays)
        drop_sorted = (cumulative - probs) >= options.top_p
        drop = np.zeros_like(drop_sorted)
        np.put_along_axis(drop, order, drop_sorted, axis=-1)
        scores = np.where(drop, -np.inf, scores)
    probs = _softmax(scores)
    return np.array([rng.choice(probs.shape[-1], p=row) for row in probs], dtype=np.int64)


def _softmax(x: np.ndarray) -> np.ndarray:
    z = x - np.max(x, axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)
