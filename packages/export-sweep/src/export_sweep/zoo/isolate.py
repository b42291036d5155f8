"""Run jobs in separate processes with memory and time limits.

A *job* is a dotted callable path (``"package.module:function"``) with arguments. It runs in a
worker subprocess whose address space is capped with ``RLIMIT_AS`` (baseline after imports plus
the job's budget) and whose wall time is watched by the parent; a job that raises, runs out of
memory, crashes the interpreter or overruns its time yields a :class:`JobResult`, never an
exception in the caller. One bad job cannot end a sweep.

Two ways to run:

- :func:`run_isolated` — one job in a fresh process (pays the torch import, ~4 s).
- :class:`WorkerPool` — long-lived workers (one per core) that run many jobs each and are
  restarted after a crash, an out-of-memory or a timeout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import pickle
import queue
import resource
import select
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from export_sweep.zoo.cache import zoo_cache_root

__all__ = [
    "DEFAULT_MEMORY_MB",
    "DEFAULT_TIMEOUT_S",
    "Job",
    "JobResult",
    "JobStatus",
    "Worker",
    "WorkerPool",
    "extra_address_space",
    "run_isolated",
]

DEFAULT_MEMORY_MB = 3072
"""Address-space budget of one job, on top of the worker's baseline after imports."""
DEFAULT_TIMEOUT_S = 180.0
"""Wall-time limit of one job."""

JobStatus = Literal["ok", "fail", "timeout", "oom"]


@contextlib.contextmanager
def extra_address_space(megabytes: int) -> Iterator[None]:
    """Raise this process's soft ``RLIMIT_AS`` by ``megabytes`` MiB for the block (up to the
    hard limit), then restore it. No-op when the soft limit is unlimited or ``megabytes`` <= 0.

    A job calls it around work that *reserves* address space it will mostly not touch (the
    up-front arena of an ExecuTorch program), so the cap keeps guarding what it is for: memory
    the job really uses.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if megabytes <= 0 or soft == resource.RLIM_INFINITY:
        yield
        return
    raised = soft + megabytes * 1024 * 1024
    if hard != resource.RLIM_INFINITY:
        raised = min(raised, hard)
    resource.setrlimit(resource.RLIMIT_AS, (raised, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))

_WORKER_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "2",
    "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "PYTHONWARNINGS": "ignore",
}


def _worker_env() -> dict[str, str]:
    """Environment of a worker: offline, single-threaded, quiet, and with bytecode caching.

    Where the parent forbids writing bytecode next to the sources (``PYTHONDONTWRITEBYTECODE``,
    read-only site-packages), workers write it under a private prefix instead: compiling
    ``transformers`` from source costs each fresh worker ~8 s.
    """
    env = dict(os.environ)
    env.update(_WORKER_ENV)
    if "PYTHONPYCACHEPREFIX" not in env:
        env["PYTHONPYCACHEPREFIX"] = str(zoo_cache_root() / "pycache")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


@dataclass(frozen=True)
class Job:
    """A callable to run in a worker.

    Attributes:
        target: ``"package.module:function"`` (the function must be importable at top level).
        args: positional arguments (picklable).
        kwargs: keyword arguments (picklable).
        key: a label for reports; defaults to the target.
        timeout_s: wall-time limit of this job (s); ``None``: the runner's default.
        progress_kwarg: when set, the runner creates an empty progress file, passes its path as
            this keyword argument, and returns what the job wrote there (JSON) in
            :attr:`JobResult.progress`, also when the job crashed or timed out.
    """

    target: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    key: str = ""
    timeout_s: float | None = None
    progress_kwarg: str | None = None

    @property
    def label(self) -> str:
        """``key`` or, when empty, ``target``."""
        return self.key or self.target


@dataclass(frozen=True)
class JobResult:
    """Outcome of one isolated job.

    Attributes:
        status: ``"ok"``, ``"fail"`` (raised or crashed), ``"timeout"`` or ``"oom"``.
        value: the callable's return value when ``ok`` (must be picklable), else ``None``.
        error: first line of the error (``"ValueError: ..."``), ``None`` when ``ok``.
        error_type: exception class name, or ``"WorkerCrash"`` / ``"Timeout"``.
        traceback: the formatted traceback, when the job raised.
        seconds: wall time of the job in the worker (or until it was killed), in seconds.
        peak_rss_mb: peak resident memory of the job, in MiB (``None`` when unknown).
        progress: the JSON the job last wrote to its progress file (see
            :attr:`Job.progress_kwarg`); ``None`` when it wrote none.
    """

    status: JobStatus
    value: Any = None
    error: str | None = None
    error_type: str | None = None
    traceback: str | None = None
    seconds: float = 0.0
    peak_rss_mb: float | None = None
    progress: Any = None

    @property
    def ok(self) -> bool:
        """Whether the job returned normally."""
        return self.status == "ok"


# ── Framing: 8-byte length + pickle ────────────────────────────────────────────────────────────
def _send(fd: int, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    payload = struct.pack("<Q", len(data)) + data
    view = memoryview(payload)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _recv_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    chunks: list[bytes] = []
    while n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                raise TimeoutError
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _recv(fd: int, deadline: float | None) -> Any:
    head = _recv_exact(fd, 8, deadline)
    if head is None:
        raise EOFError
    (size,) = struct.unpack("<Q", head)
    body = _recv_exact(fd, size, deadline)
    if body is None:
        raise EOFError
    return pickle.loads(body)


# ── Parent side ─────────────────────────────────────────────────────────────────────────────────
class Worker:
    """One long-lived worker subprocess that runs jobs sequentially.

    Args:
        memory_mb: address-space budget of each job (MiB), on top of the worker's baseline.
        preload: modules imported once at worker start (``"transformers"`` saves ~4 s a job).
        log_path: file receiving the worker's stdout/stderr; a temporary file by default.
    """

    def __init__(
        self,
        *,
        memory_mb: int = DEFAULT_MEMORY_MB,
        preload: tuple[str, ...] = ("torch", "transformers", "transformers.modeling_utils"),
        log_path: str | None = None,
    ) -> None:
        self.memory_mb = memory_mb
        self.preload = preload
        self._log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        self._to_worker: int | None = None
        self._from_worker: int | None = None
        self._log_file: Any = None
        self.jobs_run = 0

    @property
    def alive(self) -> bool:
        """Whether the subprocess is running."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the subprocess (no-op when already running)."""
        if self.alive:
            return
        self.close()
        job_r, job_w = os.pipe()
        res_r, res_w = os.pipe()
        env = _worker_env()
        if self._log_path:
            self._log_file = open(self._log_path, "ab")  # noqa: SIM115 - lives with the worker
        else:
            self._log_file = tempfile.TemporaryFile()  # noqa: SIM115
        cmd = [
            sys.executable,
            "-m",
            "export_sweep.zoo._worker",
            str(job_r),
            str(res_w),
            ",".join(self.preload),
        ]
        self._proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=self._log_file,
            pass_fds=(job_r, res_w),
            env=env,
            start_new_session=True,
        )
        os.close(job_r)
        os.close(res_w)
        self._to_worker, self._from_worker = job_w, res_r

    def log_tail(self, n_bytes: int = 4000) -> str:
        """Last bytes of the worker's output (for crash reports)."""
        f = self._log_file
        if f is None:
            return ""
        try:
            f.flush()
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - n_bytes))
            return f.read().decode("utf-8", "replace")
        except Exception:  # noqa: BLE001
            return ""

    def kill(self) -> None:
        """Kill the subprocess and its process group."""
        if self._proc is not None and self._proc.poll() is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait()

    def close(self) -> None:
        """Stop the subprocess (politely, then by force) and release its pipes."""
        if self._proc is not None and self._proc.poll() is None and self._to_worker is not None:
            try:
                _send(self._to_worker, None)
                self._proc.wait(timeout=5)
            except Exception:  # noqa: BLE001
                pass
        self.kill()
        for fd in (self._to_worker, self._from_worker):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._to_worker = self._from_worker = None
        self._proc = None
        if self._log_file is not None and not self._log_path:
            self._log_file.close()
        elif self._log_file is not None:
            self._log_file.close()
        self._log_file = None

    def run(self, job: Job, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> JobResult:
        """Run one job; restart the worker afterwards when it crashed, ran out of memory or
        timed out.

        Args:
            job: the job.
            timeout_s: wall-time limit in seconds (the worker start-up is not counted), unless
                the job sets its own ``timeout_s``.

        Returns:
            The job's result (never raises for job failures).
        """
        if job.timeout_s is not None:
            timeout_s = job.timeout_s
        if job.progress_kwarg is None:
            return self._run(job, timeout_s)
        fd, path = tempfile.mkstemp(prefix="export-sweep-progress-", suffix=".json")
        os.close(fd)
        try:
            kwargs = {**job.kwargs, job.progress_kwarg: path}
            result = self._run(dataclasses.replace(job, kwargs=kwargs), timeout_s)
            return dataclasses.replace(result, progress=_read_progress(path))
        finally:
            os.unlink(path)

    def _run(self, job: Job, timeout_s: float) -> JobResult:
        self.start()
        assert self._to_worker is not None and self._from_worker is not None
        # Wait for the worker's ready message (imports) without counting it against the job.
        start = time.monotonic()
        try:
            _send(
                self._to_worker,
                {
                    "target": job.target,
                    "args": job.args,
                    "kwargs": job.kwargs,
                    "memory_mb": self.memory_mb,
                },
            )
            reply = _recv(self._from_worker, start + timeout_s + 120.0)
            while isinstance(reply, dict) and reply.get("kind") == "started":
                start = time.monotonic()
                reply = _recv(self._from_worker, start + timeout_s)
        except TimeoutError:
            self.kill()
            self.close()
            return JobResult(
                "timeout",
                error=f"Timeout: no result after {timeout_s:.0f} s",
                error_type="Timeout",
                seconds=time.monotonic() - start,
            )
        except (EOFError, BrokenPipeError, OSError):
            rc = self._proc.wait() if self._proc is not None else None
            tail = self.log_tail()
            self.close()
            status: JobStatus = "oom" if _looks_oom(tail, rc) else "fail"
            sig = f"signal {-rc}" if isinstance(rc, int) and rc < 0 else f"exit {rc}"
            last = next((ln for ln in reversed(tail.strip().splitlines()) if ln.strip()), "")
            return JobResult(
                status,
                error=f"WorkerCrash: worker died ({sig}): {last[:200]}",
                error_type="WorkerCrash",
                seconds=time.monotonic() - start,
            )
        self.jobs_run += 1
        result = JobResult(**reply)
        if result.status == "oom":
            self.close()
        return result

    def __enter__(self) -> Worker:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_progress(path: str) -> Any:
    """The JSON a job wrote to its progress file; ``None`` when empty or torn."""
    try:
        text = open(path).read()  # noqa: SIM115 - small file
        return json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return None


def _looks_oom(text: str, rc: int | None) -> bool:
    low = text.lower()
    return (
        "memoryerror" in low
        or "bad_alloc" in low
        or "cannot allocate memory" in low
        or "can't allocate memory" in low
        or rc == -signal.SIGKILL
    )


def run_isolated(
    target: str | Job,
    *args: Any,
    memory_mb: int = DEFAULT_MEMORY_MB,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    preload: tuple[str, ...] = (),
    **kwargs: Any,
) -> JobResult:
    """Run one job in a fresh subprocess with memory and time limits.

    Args:
        target: ``"package.module:function"``, or a whole :class:`Job` (then ``args`` and
            ``kwargs`` must be empty).
        *args: positional arguments of the function (picklable).
        memory_mb: address-space budget (MiB) on top of the process baseline.
        timeout_s: wall-time limit of the call, in seconds (a :class:`Job`'s own
            ``timeout_s`` wins).
        preload: modules to import before the limits apply.
        **kwargs: keyword arguments of the function (picklable).

    Returns:
        The result; failures are reported in it, never raised.
    """
    job = target if isinstance(target, Job) else Job(target, args, kwargs)
    worker = Worker(memory_mb=memory_mb, preload=preload)
    try:
        return worker.run(job, timeout_s=timeout_s)
    finally:
        worker.close()


class WorkerPool:
    """A fixed set of long-lived workers that run jobs in parallel.

    Args:
        workers: number of worker processes (one per core at most).
        memory_mb: address-space budget of each job (MiB).
        timeout_s: wall-time limit of each job (s).
        preload: modules each worker imports once at start.
        max_jobs_per_worker: restart a worker after this many jobs (bounds leaks).
    """

    def __init__(
        self,
        workers: int = 2,
        *,
        memory_mb: int = DEFAULT_MEMORY_MB,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        preload: tuple[str, ...] = ("torch", "transformers", "transformers.modeling_utils"),
        max_jobs_per_worker: int = 100,
    ) -> None:
        self.n = max(1, workers)
        self.memory_mb = memory_mb
        self.timeout_s = timeout_s
        self.preload = preload
        self.max_jobs_per_worker = max_jobs_per_worker
        self._workers: list[Worker] = []

    def imap_unordered(self, jobs: Iterable[Job]) -> Iterator[tuple[Job, JobResult]]:
        """Run ``jobs``, yielding ``(job, result)`` pairs as they finish."""
        todo: queue.Queue[Job | None] = queue.Queue()
        done: queue.Queue[tuple[Job, JobResult] | None] = queue.Queue()
        count = 0
        for job in jobs:
            todo.put(job)
            count += 1
        for _ in range(self.n):
            todo.put(None)

        def loop(worker: Worker) -> None:
            try:
                while True:
                    job = todo.get()
                    if job is None:
                        break
                    if worker.jobs_run >= self.max_jobs_per_worker:
                        worker.close()
                        worker.jobs_run = 0
                    try:
                        result = worker.run(job, timeout_s=self.timeout_s)
                    except Exception as e:  # noqa: BLE001 - never lose a job
                        worker.close()
                        result = JobResult(
                            "fail", error=f"{type(e).__name__}: {e}", error_type=type(e).__name__
                        )
                    done.put((job, result))
            finally:
                worker.close()
                done.put(None)

        self._workers = [
            Worker(memory_mb=self.memory_mb, preload=self.preload)
            for _ in range(min(self.n, max(1, count)))
        ]
        threads = [threading.Thread(target=loop, args=(w,), daemon=True) for w in self._workers]
        for t in threads:
            t.start()
        finished = 0
        try:
            while finished < len(threads):
                item = done.get()
                if item is None:
                    finished += 1
                    continue
                yield item
        finally:
            while True:  # drain so threads stop after their current job
                try:
                    todo.get_nowait()
                except queue.Empty:
                    break
            for _ in threads:
                todo.put(None)
            for w in self._workers:
                w.kill()
            for t in threads:
                t.join(timeout=10)

    def close(self) -> None:
        """Stop every worker."""
        for w in self._workers:
            w.close()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
