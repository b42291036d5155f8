"""Build the whole zoo in isolated workers and report (resumable).

:func:`zoo_job` is the job one worker runs for one model type; :func:`build_zoo` runs it for many
types in a :class:`~export_sweep.zoo.isolate.WorkerPool`, recording each result in a JSON file as
it arrives (types already recorded are skipped, so an interrupted sweep resumes);
:func:`summarize` turns the records into totals per modality and failures grouped by reason.
The results file is read and written by :mod:`export_sweep.results`.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from export_sweep.results import load_results, versions, write_results
from export_sweep.zoo.isolate import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT_S,
    Job,
    JobResult,
    WorkerPool,
)

__all__ = [
    "ZooSummary",
    "build_zoo",
    "failure_reason",
    "summarize",
    "zoo_job",
]


def zoo_job(model_type: str, *, save: bool = False) -> dict[str, Any]:
    """Build one tiny model and run its eager forward; the job a sweep worker runs.

    Args:
        model_type: a ``config.model_type`` key.
        save: also write (or reuse) the cached model directory and reload it once.

    Returns:
        A JSON-able record: class, modality, parameter count, attention implementation, input
        recipe and shapes, seconds to build, and the saved directory when ``save``.

    Raises:
        ZooBuildError: when the build fails (the worker reports it as a failed job).
    """
    from export_sweep.zoo.build import build_tiny_model, save_tiny_model

    t0 = time.perf_counter()
    tiny = build_tiny_model(model_type)
    record: dict[str, Any] = {
        "class_name": tiny.class_name,
        "modality": str(tiny.modality),
        "num_parameters": tiny.num_parameters,
        "attn_implementation": tiny.attn_implementation,
        "recipe": tiny.inputs.recipe,
        "shrink": tiny.shrink,
        "input_sets": len(tiny.inputs.sets),
        "shapes_differ": tiny.inputs.shapes_differ,
        "inputs": tiny.inputs.describe(),
        "forward_ok": True,
        "build_seconds": round(time.perf_counter() - t0, 3),
    }
    if save:
        record["directory"] = str(save_tiny_model(model_type))
    return record


def _record(job_result: JobResult, modality: str) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "status": job_result.status,
        "seconds": round(job_result.seconds, 3),
        "peak_rss_mb": round(job_result.peak_rss_mb, 1) if job_result.peak_rss_mb else None,
    }
    if job_result.ok:
        rec.update(job_result.value)
    else:
        rec["modality"] = modality
        rec["forward_ok"] = False
        rec["error"] = job_result.error
        rec["reason"] = failure_reason(job_result)
    return rec


def failure_reason(result: JobResult | dict[str, Any]) -> str:
    """A short, number-free reason to group failures by.

    Args:
        result: a failed :class:`JobResult` or a recorded result dictionary.

    Returns:
        ``"<status>: <stage>: <ExceptionType>: <message without numbers and names>"``.
    """
    if isinstance(result, JobResult):
        status, error = result.status, result.error or ""
    else:
        status, error = result.get("status", "fail"), result.get("error") or ""
    if status in ("timeout", "oom"):
        return status
    stage = ""
    m = re.match(r"\w+: \[(\w+)\] [\w.-]+: (.*)", error)
    if m:
        stage, error = m.group(1), m.group(2)
    msg = re.sub(r"\d+", "N", error)
    msg = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "'…'", msg)
    msg = re.sub(r"\([^()]*\)", "(…)", msg)
    return f"{stage or 'job'}: {msg[:140]}"


def build_zoo(
    model_types: Iterable[str],
    out: str | os.PathLike[str],
    *,
    workers: int = 2,
    memory_mb: int = DEFAULT_MEMORY_MB,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    retry_failed: bool = False,
    save: bool = False,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Build tiny models for ``model_types`` in isolated workers, recording each result.

    Args:
        model_types: the types to build.
        out: JSON results file; types already recorded there are skipped (resume).
        workers: worker processes (at most one per core).
        memory_mb: address-space budget of one build (MiB).
        timeout_s: wall-time limit of one build (s).
        retry_failed: rebuild types whose recorded status is not ``ok``.
        save: also write the cached model directories (see :func:`save_tiny_model`).
        progress: called with one line per finished type (defaults to stderr).

    Returns:
        The results data (also written to ``out``).
    """
    from export_sweep.zoo.catalog import model_modality

    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    path = Path(out)
    data = load_results(path)
    data["versions"] = versions()
    results: dict[str, Any] = data.setdefault("results", {})
    todo = [
        t
        for t in dict.fromkeys(model_types)
        if t not in results or (retry_failed and results[t].get("status") != "ok")
    ]
    say(f"zoo: {len(todo)} to build ({len(results)} already recorded), {workers} workers")
    jobs = [Job("export_sweep.zoo.batch:zoo_job", (t,), {"save": save}, key=t) for t in todo]
    start = time.monotonic()
    with WorkerPool(workers, memory_mb=memory_mb, timeout_s=timeout_s) as pool:
        for i, (job, res) in enumerate(pool.imap_unordered(jobs), 1):
            rec = _record(res, str(model_modality(job.key)))
            results[job.key] = rec
            write_results(path, data)
            mark = "ok " if res.ok else res.status
            detail = "" if res.ok else f"  {(res.error or '')[:150]}"
            say(f"[{i}/{len(todo)}] {mark:7s} {job.key:40s} {res.seconds:6.1f}s{detail}")
    data["wall_seconds_last_run"] = round(time.monotonic() - start, 1)
    write_results(path, data)
    return data


@dataclass(frozen=True)
class ZooSummary:
    """Totals of a zoo build.

    Attributes:
        total: model types recorded.
        built: types whose eager forward ran.
        by_modality: ``modality -> (built, total)``.
        failures: ``reason -> [model types]``, largest groups first.
        seconds: sum of per-type build seconds.
    """

    total: int
    built: int
    by_modality: dict[str, tuple[int, int]]
    failures: dict[str, list[str]]
    seconds: float

    @property
    def rate(self) -> float:
        """``built / total`` (0 when empty)."""
        return self.built / self.total if self.total else 0.0

    def format(self) -> str:
        """A multi-line human-readable report."""
        lines = [
            f"built (eager forward ok): {self.built}/{self.total} = {self.rate:.1%}",
            f"sum of build seconds: {self.seconds:.0f} s",
        ]
        for mod, (ok, n) in sorted(self.by_modality.items()):
            lines.append(f"  {mod:16s} {ok:4d}/{n:<4d} {ok / n if n else 0:.0%}")
        if self.failures:
            lines.append("failures by reason:")
            for reason, types in self.failures.items():
                lines.append(f"  ({len(types)}) {reason}")
                lines.append(f"      {', '.join(sorted(types))}")
        return "\n".join(lines)


def summarize(data: dict[str, Any], model_types: Iterable[str] | None = None) -> ZooSummary:
    """Totals of a results file, optionally restricted to ``model_types``.

    Args:
        data: the results data (see :func:`load_results`).
        model_types: restrict to these types (types not recorded are ignored).

    Returns:
        The summary.
    """
    results: dict[str, Any] = data.get("results", {})
    keys = list(results) if model_types is None else [t for t in model_types if t in results]
    by_mod: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    failures: dict[str, list[str]] = defaultdict(list)
    built = 0
    seconds = 0.0
    for t in keys:
        rec = results[t]
        mod = rec.get("modality", "other")
        by_mod[mod][1] += 1
        seconds += rec.get("seconds") or 0.0
        if rec.get("status") == "ok" and rec.get("forward_ok"):
            built += 1
            by_mod[mod][0] += 1
        else:
            failures[rec.get("reason") or failure_reason(rec)].append(t)
    ordered = dict(sorted(failures.items(), key=lambda kv: (-len(kv[1]), kv[0])))
    return ZooSummary(
        total=len(keys),
        built=built,
        by_modality={k: (v[0], v[1]) for k, v in by_mod.items()},
        failures=ordered,
        seconds=seconds,
    )
