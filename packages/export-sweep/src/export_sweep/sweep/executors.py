"""Where the sweep's jobs run: the local worker pool (the default) or Ray tasks.

Both run each :class:`~export_sweep.zoo.isolate.Job` in an isolated worker subprocess with the
same limits: an address-space cap (``memory_mb`` on top of the worker's baseline after imports)
and a deadline (the job's ``timeout_s``). A job that raises, crashes, runs out of memory or
hangs yields a failed :class:`~export_sweep.zoo.isolate.JobResult`, never a lost job, so
:func:`~export_sweep.sweep.run.run_sweep` does not care which executor it has:

- :class:`LocalExecutor`: long-lived workers on this machine
  (:class:`~export_sweep.zoo.isolate.WorkerPool`).
- :class:`RayExecutor`: one Ray task per job (``num_cpus=1``, ``max_retries=0``); the task
  runs the job in an isolated subprocess on its node (one long-lived worker subprocess per Ray
  worker process), so a crash or hang is the job's failure record, never a lost task. ``ray`` is
  the optional extra ``export-sweep[ray]``, imported only here.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from export_sweep.errors import SweepError, first_line
from export_sweep.zoo.isolate import DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT_S, Job, JobResult, Worker

__all__ = [
    "DEFAULT_PRELOAD",
    "Executor",
    "Limits",
    "LocalExecutor",
    "RayExecutor",
    "make_executor",
]

DEFAULT_PRELOAD: tuple[str, ...] = ("torch", "transformers", "transformers.modeling_utils")
"""Modules a worker imports before the job's limits apply."""


@dataclass(frozen=True)
class Limits:
    """Limits of every job an executor runs.

    Attributes:
        memory_mb: address-space budget of one job, in MiB, on top of the worker's baseline.
        timeout_s: wall-time limit of a job that sets no ``timeout_s`` of its own, in seconds.
        preload: modules each worker imports before the limits apply (not counted).
    """

    memory_mb: int = DEFAULT_MEMORY_MB
    timeout_s: float = DEFAULT_TIMEOUT_S
    preload: tuple[str, ...] = DEFAULT_PRELOAD


class Executor(Protocol):
    """Runs jobs in isolated workers and yields each result as it arrives."""

    workers: int
    """How many jobs run at once (for progress messages)."""

    def imap_unordered(self, jobs: Sequence[Job]) -> Generator[tuple[Job, JobResult], None, None]:
        """Run ``jobs``; yield ``(job, result)`` pairs in the order they finish.

        Every job yields exactly one result; failures are results, never exceptions.
        Closing the generator early stops the jobs still running.
        """
        ...


class LocalExecutor:
    """Jobs in a :class:`~export_sweep.zoo.isolate.WorkerPool` of local worker processes.

    Args:
        workers: worker processes (one per core at most).
        limits: memory and time limits, preloaded modules.
    """

    def __init__(self, workers: int = 2, limits: Limits | None = None) -> None:
        self.workers = max(1, workers)
        self.limits = limits or Limits()

    def imap_unordered(self, jobs: Sequence[Job]) -> Generator[tuple[Job, JobResult], None, None]:
        """See :meth:`Executor.imap_unordered`."""
        from export_sweep.zoo.isolate import WorkerPool

        pool = WorkerPool(
            self.workers,
            memory_mb=self.limits.memory_mb,
            timeout_s=self.limits.timeout_s,
            preload=self.limits.preload,
        )
        with pool:
            yield from pool.imap_unordered(jobs)


# ── Ray ─────────────────────────────────────────────────────────────────────────────────────────
_NODE_WORKERS: dict[tuple[int, tuple[str, ...]], Worker] = {}
"""Per Ray worker process: the long-lived isolated worker subprocess, by (memory, preload)."""


def run_on_node(job: Job, limits: Limits) -> JobResult:
    """The body of a Ray task: run ``job`` in an isolated worker subprocess on this node.

    The worker subprocess is kept for the next task of this Ray worker process (it is restarted
    after a crash, an out-of-memory or a timeout), so a task does not pay the imports again.

    Args:
        job: the job (its ``timeout_s`` is the deadline when set).
        limits: memory and time limits, preloaded modules.

    Returns:
        The job's result; failures are reported in it, never raised.
    """
    key = (limits.memory_mb, limits.preload)
    worker = _NODE_WORKERS.get(key)
    if worker is None:
        worker = _NODE_WORKERS[key] = Worker(memory_mb=limits.memory_mb, preload=limits.preload)
    return worker.run(job, timeout_s=limits.timeout_s)


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise SweepError(
            "--ray needs the ray package: pip install 'export-sweep[ray]'"
            f" ({first_line(e, 120)})"
        ) from e
    return ray


class RayExecutor:
    """Jobs as Ray tasks, each running its job in an isolated subprocess with the same limits.

    Args:
        address: the Ray cluster to connect to (``"auto"``, ``"127.0.0.1:6379"``,
            ``"ray://head:10001"``); ignored when this process is already connected.
        limits: memory and time limits, preloaded modules.

    Raises:
        SweepError: ``ray`` is not installed, or the cluster cannot be reached (when the first
            jobs are submitted).
    """

    def __init__(self, address: str = "auto", limits: Limits | None = None) -> None:
        self.address = address
        self.limits = limits or Limits()
        self._ray = _import_ray()
        self.workers = 0

    def _connect(self) -> bool:
        """Connect to the cluster; returns whether this call connected (and must disconnect)."""
        ray = self._ray
        if ray.is_initialized():
            return False
        try:
            ray.init(address=self.address, log_to_driver=False, configure_logging=False)
        except Exception as e:  # noqa: BLE001 - one line for the CLI, whatever Ray raised
            raise SweepError(
                f"cannot connect to the Ray cluster at {self.address!r}: {first_line(e, 200)}"
            ) from e
        return True

    def imap_unordered(self, jobs: Sequence[Job]) -> Generator[tuple[Job, JobResult], None, None]:
        """See :meth:`Executor.imap_unordered`; a task that Ray loses (its worker process or
        node died) is recorded as a ``WorkerCrash`` failure of its job."""
        ray = self._ray
        connected = self._connect()
        try:
            self.workers = int(ray.cluster_resources().get("CPU", 0)) or 1
            task = ray.remote(num_cpus=1, max_retries=0)(run_on_node)
            pending = {task.remote(job, self.limits): job for job in jobs}
            try:
                while pending:
                    done, _ = ray.wait(list(pending), num_returns=1)
                    for ref in done:
                        job = pending.pop(ref)
                        yield job, self._result(ref)
            finally:
                for ref in pending:
                    ray.cancel(ref, force=True)
        finally:
            if connected:
                ray.shutdown()

    def _result(self, ref: Any) -> JobResult:
        try:
            return self._ray.get(ref)
        except Exception as e:  # noqa: BLE001 - a lost task is its job's failure
            return JobResult(
                "fail",
                error=f"WorkerCrash: Ray task failed: {first_line(e, 200)}",
                error_type="WorkerCrash",
            )


def make_executor(
    *, workers: int = 2, limits: Limits | None = None, ray_address: str | None = None
) -> Executor:
    """The local pool, or Ray when ``ray_address`` is given.

    Raises:
        SweepError: ``ray_address`` is given and ``ray`` is not installed.
    """
    if ray_address:
        return RayExecutor(ray_address, limits)
    return LocalExecutor(workers, limits)
