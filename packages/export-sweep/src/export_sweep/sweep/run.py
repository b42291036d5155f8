"""Run the export sweep, one isolated job per model type, recording results as they arrive.

A job builds one model type once and exports it to every backend still to measure
(:func:`~export_sweep.sweep.job.export_job`); its deadline is ``timeout_s`` per backend. The
job keeps a progress file (:mod:`~export_sweep.sweep.checkpoint`): when it crashes, runs out of
memory or overruns, the finished backends keep their records, the running backend is recorded
as the failure (stage ``timeout``, ``oom`` or ``worker``, as when each backend ran alone) and the
backends that never started run again as jobs of their own. A backend whose export finished but
took longer than ``timeout_s`` is recorded as a timeout, as it would have been alone.

Results are written after every job to ``{"versions": {...}, "results": {model_type: record}}``
(:mod:`export_sweep.results`); pairs already recorded are skipped. The jobs run on an
:class:`~export_sweep.sweep.executors.Executor`: the local worker pool, or Ray.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from export_sweep.errors import first_line
from export_sweep.results import load_results, versions, write_results
from export_sweep.sweep.backends import BACKENDS, get_backend
from export_sweep.sweep.checkpoint import JobProgress
from export_sweep.sweep.executors import DEFAULT_PRELOAD, Executor, Limits, LocalExecutor
from export_sweep.zoo.isolate import Job, JobResult

__all__ = [
    "JOB_TARGET",
    "STATUSES",
    "TypeJob",
    "plan_jobs",
    "run_sweep",
    "totals",
]

STATUSES: tuple[str, ...] = ("pass", "fail", "skip", "xfail", "xpass")
"""Per-backend statuses, in report order."""

JOB_TARGET = "export_sweep.sweep.job:export_job"
"""The job every worker runs: ``export_job(model_type, backends, progress_path=...)``."""


@dataclass(frozen=True)
class TypeJob:
    """One model type to export to some backends in one worker.

    Attributes:
        model_type: the ``config.model_type``.
        backends: the backends to export it to, in order.
    """

    model_type: str
    backends: tuple[str, ...]

    @property
    def key(self) -> str:
        """The job's key (``"bert\\tonnx,executorch"``), unique among the jobs of a round."""
        return f"{self.model_type}\t{','.join(self.backends)}"

    @classmethod
    def from_key(cls, key: str) -> TypeJob:
        """The inverse of :attr:`key`."""
        model_type, _, backends = key.partition("\t")
        return cls(model_type, tuple(backends.split(",")))

    def job(self, timeout_s: float, target: str = JOB_TARGET) -> Job:
        """The isolated job: deadline ``timeout_s`` per backend, with a progress file."""
        return Job(
            target,
            (self.model_type,),
            {"backends": self.backends},
            key=self.key,
            timeout_s=timeout_s * len(self.backends),
            progress_kwarg="progress_path",
        )


def plan_jobs(
    results: dict[str, Any],
    model_types: Iterable[str],
    backends: Sequence[str],
    redo: Collection[str] = (),
) -> list[TypeJob]:
    """One job per model type with the backends not yet recorded (or to redo).

    Args:
        results: the ``results`` of a results file.
        model_types: the types to sweep.
        backends: the backends to sweep.
        redo: re-run recorded pairs whose result stopped at one of these stages or has one of
            these statuses.

    Returns:
        The jobs, in the order of ``model_types``; a type with nothing to run has none.
    """
    wanted = set(redo)

    def recorded(t: str, b: str) -> bool:
        rec = results.get(t, {}).get("backends", {}).get(b)
        return rec is not None and not ({rec.get("stage"), rec.get("status")} & wanted)

    jobs = []
    for t in dict.fromkeys(model_types):
        todo = tuple(b for b in backends if not recorded(t, b))
        if todo:
            jobs.append(TypeJob(t, todo))
    return jobs


def _failed(res: JobResult, seconds: float, error: str | None = None,
            in_stage: str | None = None) -> dict[str, Any]:
    """A backend record for an export the worker could not finish (timeout, oom, crash);
    ``in_stage``: the export stage it was in (from the progress file), added to the error and
    kept as ``in_stage``."""
    stage = {"timeout": "timeout", "oom": "oom"}.get(res.status, "worker")
    text = first_line(error or res.error or res.status)
    record = {"status": "fail", "stage": stage, "error": text, "seconds": round(seconds, 3)}
    if in_stage:
        record["error"] = f"{text} (in export stage {in_stage})"
        record["in_stage"] = in_stage
    return record


def _timed_out(timeout_s: float, seconds: float) -> dict[str, Any]:
    return {
        "status": "fail",
        "stage": "timeout",
        "error": f"Timeout: no result after {timeout_s:.0f} s",
        "seconds": round(seconds, 3),
    }


@dataclass(frozen=True)
class _Outcome:
    """What one finished job contributes: backend records, type fields, backends to re-run."""

    records: dict[str, dict[str, Any]]
    model: dict[str, Any]
    rerun: tuple[str, ...]


def _outcome(tj: TypeJob, res: JobResult, timeout_s: float) -> _Outcome:
    """Turn a job's result (and its progress file) into backend records."""
    if res.ok:
        value = dict(res.value)
        records = {b: value["backends"][b] for b in tj.backends if b in value["backends"]}
        model = {k: value[k] for k in ("class_name", "modality", "build", "capture") if k in value}
        rerun: tuple[str, ...] = ()
    else:
        progress = JobProgress.from_json(res.progress)
        records = {b: r for b, r in progress.finished.items() if b in tj.backends}
        model = dict(progress.model)
        running = progress.running if progress.phase == "export" else None
        if running is None:
            # Died while building or capturing, which every backend needs: each fails alike.
            rest = [b for b in tj.backends if b not in records]
            records.update({b: _failed(res, res.seconds) for b in rest})
            rerun = ()
        else:
            elapsed = max(0.0, res.seconds - progress.started)
            never = tuple(b for b in tj.backends if b not in records and b != running)
            # An earlier backend (or the build) overran: this one did not get its own budget.
            # It runs again alone, once (a job of one backend is never re-run).
            short = (
                res.status == "timeout" and len(tj.backends) > 1 and elapsed < timeout_s * 0.95
            )
            if short:
                rerun = (running, *never)
            else:
                records[running] = _failed(res, elapsed, in_stage=progress.stage)
                rerun = never
    for b, r in records.items():  # a backend slower than its limit alone is a timeout
        if (r.get("seconds") or 0.0) > timeout_s and r.get("stage") != "timeout":
            records[b] = _timed_out(timeout_s, r["seconds"])
    return _Outcome(records, model, rerun)


def _merge(results: dict[str, Any], tj: TypeJob, res: JobResult, outcome: _Outcome) -> None:
    from export_sweep.zoo.catalog import model_class_name, model_modality

    t = tj.model_type
    rec = results.setdefault(t, {"model_type": t, "backends": {}})
    rec["backends"].update(outcome.records)
    for key, value in outcome.model.items():
        rec[key] = value
    rec.setdefault("class_name", model_class_name(t) or "")
    rec.setdefault("modality", str(model_modality(t)))
    rec.setdefault("build", {"status": "unknown", "error": None, "seconds": None})
    if res.peak_rss_mb:
        for b in outcome.records:
            rec.setdefault("peak_rss_mb", {})[b] = round(res.peak_rss_mb, 1)


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


def _preload(backends: Sequence[str]) -> tuple[str, ...]:
    """Worker preload: torch, transformers and the backend packages the sweep exports to."""
    return (*DEFAULT_PRELOAD, *(get_backend(b).module for b in backends))


def run_sweep(
    model_types: Iterable[str],
    out: str | Any,
    *,
    backends: Sequence[str] = BACKENDS,
    workers: int = 2,
    memory_mb: int = 4096,
    timeout_s: float = 180.0,
    progress: bool = True,
    redo_stages: Collection[str] = (),
    executor: Executor | None = None,
    ray_address: str | None = None,
    job_target: str = JOB_TARGET,
) -> dict[str, Any]:
    """Export ``model_types`` to ``backends`` in isolated workers, recording every result.

    Args:
        model_types: the types to sweep.
        out: results JSON; ``(type, backend)`` pairs already recorded there are skipped.
        backends: of :data:`~export_sweep.sweep.backends.BACKENDS`.
        workers: local worker processes (ignored with ``executor`` or ``ray_address``).
        memory_mb: address-space budget of one job (MiB).
        timeout_s: wall-time limit of one backend's export (s); a job gets this per backend.
        progress: show a progress bar and one line per finished export on stderr.
        redo_stages: also re-run recorded pairs whose result stopped at one of these stages
            (``bounds``, ``timeout``, ...) or has one of these statuses (``pass``), replacing
            their records: re-measures what a fix changed without a full sweep.
        executor: where the jobs run; default a :class:`LocalExecutor` of ``workers``, or a
            :class:`~export_sweep.sweep.executors.RayExecutor` when ``ray_address`` is given.
        ray_address: run the jobs as Ray tasks on this cluster (``"auto"``, ``"host:port"``).
        job_target: the job each worker runs (``"module:function"``, called like
            :func:`~export_sweep.sweep.job.export_job`); tests substitute faulty jobs.

    Returns:
        The results data (also written to ``out``).

    Raises:
        SweepError: ``ray_address`` is given and Ray is missing or unreachable.
    """
    from export_sweep.sweep.executors import make_executor

    data = load_results(out)
    data["versions"] = versions()
    results: dict[str, Any] = data["results"]
    plan = plan_jobs(results, model_types, backends, redo_stages)
    pairs = sum(len(tj.backends) for tj in plan)
    limits = Limits(memory_mb=memory_mb, timeout_s=timeout_s, preload=_preload(backends))
    if executor is None:
        executor = make_executor(workers=workers, limits=limits, ray_address=ray_address)
    say = print if progress else (lambda *a, **k: None)
    where = "Ray" if not isinstance(executor, LocalExecutor) else f"{executor.workers} workers"
    say(
        f"export sweep: {pairs} exports to run ({len(results)} types already recorded) in "
        f"{len(plan)} jobs, {where}",
        file=sys.stderr,
        flush=True,
    )
    if not plan:
        write_results(out, data)
        return data
    advance, close = _progress(pairs) if progress else ((lambda line: None), (lambda: None))
    start = time.monotonic()
    worker_seconds: dict[str, float] = defaultdict(float)

    def record(job: Job, res: JobResult) -> list[TypeJob]:
        """Merge one finished job, write the file, print its lines; returns jobs to re-run."""
        tj = TypeJob.from_key(job.key)
        outcome = _outcome(tj, res, timeout_s)
        _merge(results, tj, res, outcome)
        worker_seconds[tj.model_type] += res.seconds
        results[tj.model_type]["worker_seconds"] = round(worker_seconds[tj.model_type], 3)
        write_results(out, data)
        for b, r in outcome.records.items():
            err = f"  [{r.get('stage')}] {(r.get('error') or '')[:120]}" if r["error"] else ""
            advance(f"{r['status']:5s} {b:10s} {tj.model_type:36s} {r['seconds'] or 0:7.1f}s{err}")
        return [TypeJob(tj.model_type, (b,)) for b in outcome.rerun]

    try:
        while plan:
            jobs = [tj.job(timeout_s, job_target) for tj in plan]
            plan = []
            with closing(executor.imap_unordered(jobs)) as finished:
                for job, res in finished:
                    plan += record(job, res)
    finally:
        close()
        # Also on Ctrl-C / SIGTERM: a resumed sweep's wall time is the sum of its runs.
        elapsed = time.monotonic() - start
        data["wall_seconds_last_run"] = round(elapsed, 1)
        data["wall_seconds"] = round(float(data.get("wall_seconds") or 0.0) + elapsed, 1)
        # the wall time sums every run: the widest run's worker count goes with it
        data["workers"] = max(int(data.get("workers") or 0), executor.workers)
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
