"""Run the export sweep in isolated workers, recording results as they arrive (resumable).

One :class:`~export_core.zoo.isolate.Job` per ``(model type, backend)``: a backend that crashes,
runs out of memory or time costs only that pair. Results are written after every job to a JSON
file ``{"versions": {...}, "results": {model_type: record}}`` (record as
:func:`~export_core.sweep.job.export_job` returns it); pairs already recorded are skipped.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from export_core.sweep.job import BACKENDS, first_line
from export_core.zoo.isolate import JobResult

__all__ = [
    "STATUSES",
    "load_results",
    "run_sweep",
    "totals",
    "versions",
    "write_results",
]

STATUSES: tuple[str, ...] = ("pass", "fail", "skip", "xfail", "xpass")
"""Per-backend statuses, in report order."""

_VERSION_DISTS = ("torch", "transformers", "onnxscript", "onnxruntime", "executorch")


def versions() -> dict[str, str]:
    """Installed versions of the libraries the sweep depends on (``"not installed"`` if absent)."""
    out: dict[str, str] = {}
    for dist in _VERSION_DISTS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


def load_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a results file; an absent file reads as empty results."""
    p = Path(path)
    if not p.is_file():
        return {"versions": {}, "results": {}}
    data = json.loads(p.read_text())
    data.setdefault("results", {})
    return data


def write_results(path: str | os.PathLike[str], data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically (through a temporary file)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(p)


def _failed_job(res: JobResult) -> dict[str, Any]:
    """A backend record for a job the worker could not finish (timeout, oom, crash)."""
    stage = {"timeout": "timeout", "oom": "oom"}.get(res.status, "worker")
    return {
        "status": "fail",
        "stage": stage,
        "error": first_line(res.error or res.status),
        "seconds": round(res.seconds, 3),
    }


def _merge(results: dict[str, Any], model_type: str, backend: str, res: JobResult) -> None:
    from export_core.zoo.catalog import model_class_name, model_modality

    rec = results.setdefault(model_type, {"model_type": model_type, "backends": {}})
    if res.ok:
        value = dict(res.value)
        rec["backends"][backend] = value["backends"][backend]
        for key in ("class_name", "modality", "build"):
            rec[key] = value[key]
    else:
        rec.setdefault("class_name", model_class_name(model_type) or "")
        rec.setdefault("modality", str(model_modality(model_type)))
        rec.setdefault("build", {"status": "unknown", "error": None, "seconds": None})
        rec["backends"][backend] = _failed_job(res)
    if res.peak_rss_mb:
        rec.setdefault("peak_rss_mb", {})[backend] = round(res.peak_rss_mb, 1)


def _progress(total: int) -> tuple[Callable[[str], None], Callable[[], None]]:
    """``(advance(line), close())`` over a rich progress bar on stderr."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    console = Console(stderr=True)
    bar = Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    task = bar.add_task("export sweep", total=total)
    bar.start()

    def advance(line: str) -> None:
        bar.console.print(line, highlight=False, markup=False, soft_wrap=True)
        bar.advance(task)

    return advance, bar.stop


def run_sweep(
    model_types: Iterable[str],
    out: str | os.PathLike[str],
    *,
    backends: Sequence[str] = BACKENDS,
    workers: int = 2,
    memory_mb: int = 4096,
    timeout_s: float = 180.0,
    progress: bool = True,
    redo_stages: Collection[str] = (),
) -> dict[str, Any]:
    """Export ``model_types`` to ``backends`` in isolated workers, recording every result.

    Args:
        model_types: the types to sweep.
        out: results JSON; ``(type, backend)`` pairs already recorded there are skipped.
        backends: of :data:`~export_core.sweep.job.BACKENDS`.
        workers: worker processes.
        memory_mb: address-space budget of one job (MiB).
        timeout_s: wall-time limit of one job (s).
        progress: show a progress bar and one line per finished job on stderr.
        redo_stages: also re-run recorded pairs whose result stopped at one of these stages
            (``bounds``, ``timeout``, ...) or has one of these statuses (``pass``), replacing
            their records: re-measures what a fix changed without a full sweep.

    Returns:
        The results data (also written to ``out``).
    """
    from export_core.zoo.isolate import Job, WorkerPool

    data = load_results(out)
    data["versions"] = versions()
    results: dict[str, Any] = data["results"]
    def recorded(t: str, b: str) -> bool:
        rec = results.get(t, {}).get("backends", {}).get(b)
        return rec is not None and not ({rec.get("stage"), rec.get("status")} & set(redo_stages))

    todo = [(t, b) for t in dict.fromkeys(model_types) for b in backends if not recorded(t, b)]
    say = print if progress else (lambda *a, **k: None)
    say(
        f"export sweep: {len(todo)} exports to run ({len(results)} types already recorded), "
        f"{workers} workers",
        file=sys.stderr,
        flush=True,
    )
    if not todo:
        write_results(out, data)
        return data
    jobs = [
        Job("export_core.sweep.job:export_job", (t,), {"backends": (b,)}, key=f"{t}\t{b}")
        for t, b in todo
    ]
    advance, close = _progress(len(jobs)) if progress else ((lambda line: None), (lambda: None))
    start = time.monotonic()
    try:
        with WorkerPool(workers, memory_mb=memory_mb, timeout_s=timeout_s) as pool:
            for job, res in pool.imap_unordered(jobs):
                t, b = job.key.split("\t")
                _merge(results, t, b, res)
                write_results(out, data)
                r = results[t]["backends"][b]
                err = f"  [{r.get('stage')}] {(r.get('error') or '')[:120]}" if r["error"] else ""
                advance(f"{r['status']:5s} {b:10s} {t:36s} {r['seconds'] or 0:7.1f}s{err}")
    finally:
        close()
    elapsed = time.monotonic() - start
    data["wall_seconds_last_run"] = round(elapsed, 1)
    data["wall_seconds"] = round(float(data.get("wall_seconds") or 0.0) + elapsed, 1)
    data["workers"] = workers
    write_results(out, data)
    return data


def totals(
    data: dict[str, Any], model_types: Iterable[str] | None = None
) -> dict[str, dict[str, Any]]:
    """Totals per modality: ``{modality: {"types", "built", backend: {status: count}}}``.

    Args:
        data: the results data.
        model_types: restrict to these types (default: all recorded).
    """
    results = data.get("results", {})
    keys = list(results) if model_types is None else [t for t in model_types if t in results]
    out: dict[str, dict[str, Any]] = {}
    for t in keys:
        rec = results[t]
        mod = rec.get("modality", "other")
        row = out.setdefault(mod, {"types": 0, "built": 0})
        row["types"] += 1
        # "unknown": the worker timed out or died before reporting; the model was being
        # exported, so it counts as built (its backends are recorded as failures).
        if rec.get("build", {}).get("status") in ("ok", "unknown"):
            row["built"] += 1
        for b, r in rec.get("backends", {}).items():
            counts = row.setdefault(b, defaultdict(int))
            counts[r["status"]] += 1
    return {
        m: {k: (dict(v) if isinstance(v, defaultdict) else v) for k, v in row.items()}
        for m, row in sorted(out.items())
    }
