"""Export sweep: export every tiny zoo model to each backend and record coverage.

For each model type, :func:`~export_sweep.sweep.job.export_job` builds the tiny model
(:mod:`export_sweep.zoo`) once, captures it once where the backends share a capture, exports it
with dynamic shapes to each backend of the typed table (:mod:`~export_sweep.sweep.backends`) and
validates it against eager at two input sets; :func:`~export_sweep.sweep.run.run_sweep` does so
in isolated workers, local or Ray (:mod:`~export_sweep.sweep.executors`), with a resumable
results file, and :mod:`~export_sweep.sweep.coverage` renders and checks COVERAGE.md. The skip
lists (:mod:`~export_sweep.sweep.skips`) are data and must shrink.

The backends are imported lazily inside the jobs: importing this package costs only ``torch``.

Command line: ``export-sweep --subset ci --backend all -j 2 --out sweep-results.json``.
"""

from export_sweep.sweep.backends import BACKEND_TABLE, BACKENDS, Backend, get_backend
from export_sweep.sweep.checkpoint import JobProgress
from export_sweep.sweep.coverage import compare, coverage_markdown, parse_coverage
from export_sweep.sweep.executors import (
    Executor,
    Limits,
    LocalExecutor,
    RayExecutor,
    make_executor,
)
from export_sweep.sweep.job import capture_once, export_backend, export_job, load_model
from export_sweep.sweep.run import JOB_TARGET, STATUSES, TypeJob, plan_jobs, run_sweep, totals
from export_sweep.sweep.skips import (
    EXPORT_SKIPS,
    ONNX_DISABLE_OPTIMIZE,
    SkipEntry,
    applicable_skip,
    disable_optimize,
    validate_entries,
)
from export_sweep.sweep.subsets import SUBSETS, subset

__all__ = [
    "BACKENDS",
    "BACKEND_TABLE",
    "EXPORT_SKIPS",
    "JOB_TARGET",
    "ONNX_DISABLE_OPTIMIZE",
    "STATUSES",
    "SUBSETS",
    "Backend",
    "Executor",
    "JobProgress",
    "Limits",
    "LocalExecutor",
    "RayExecutor",
    "SkipEntry",
    "TypeJob",
    "applicable_skip",
    "capture_once",
    "compare",
    "coverage_markdown",
    "disable_optimize",
    "export_backend",
    "export_job",
    "get_backend",
    "load_model",
    "make_executor",
    "parse_coverage",
    "plan_jobs",
    "run_sweep",
    "subset",
    "totals",
    "validate_entries",
]
