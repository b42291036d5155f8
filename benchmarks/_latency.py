"""Latency of eager PyTorch, ONNX Runtime and the ExecuTorch runtime on the same batch, measured
side by side in one process."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["median_ms", "onnx_runtime_call", "side_by_side"]


def median_ms(fn: Callable[[], Any], iters: int, warmup: int = 3) -> float:
    """Median wall time of ``fn()`` in milliseconds over ``iters`` calls after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1e3)
    return statistics.median(samples)


def onnx_runtime_call(path: str, batch: Mapping[str, Any]) -> Callable[[], Any]:
    """A call that runs ``model.onnx`` at ``path`` in ONNX Runtime (CPU) on ``batch`` (tensors by
    input name; names the model does not take are dropped)."""
    import onnxruntime as ort

    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    feeds = {k: v.numpy() for k, v in batch.items() if k in names}
    return lambda: sess.run(None, feeds)


def side_by_side(calls: Mapping[str, Callable[[], Callable[[], Any]]], iters: int,
                 rounds: int = 3) -> dict[str, float]:
    """Median latency (ms) of each call, in ``rounds`` alternating blocks of ``iters // rounds``
    calls each, so a noisy stretch of the machine falls on every runtime alike.

    ``calls`` maps a name to a factory that loads its runtime once (the first round) and returns
    the call to time; runtimes are loaded in the given order, each just before its first block,
    so a runtime's thread pool does not run while an earlier one is timed the first time.
    """
    loaded: dict[str, Callable[[], Any]] = {}
    blocks: dict[str, list[float]] = {name: [] for name in calls}
    per_block = max(1, iters // rounds)
    for _ in range(rounds):
        for name, factory in calls.items():
            if name not in loaded:
                loaded[name] = factory()
            blocks[name].append(median_ms(loaded[name], per_block))
    return {name: statistics.median(values) for name, values in blocks.items()}
