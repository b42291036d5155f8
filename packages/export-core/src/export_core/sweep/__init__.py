"""Export sweep: export every tiny zoo model to each backend and record coverage.

For each model type, :func:`~export_core.sweep.job.export_job` builds the tiny model
(:mod:`export_core.zoo`), exports it with dynamic shapes to ONNX and ExecuTorch, and validates
it against eager at two input sets; :func:`~export_core.sweep.run.run_sweep` does so in isolated
workers with a resumable results file, and :mod:`~export_core.sweep.coverage` renders and checks
COVERAGE.md. The skip lists (:mod:`~export_core.sweep.skips`) are data and must shrink.

The backends are imported lazily inside the jobs: importing this package costs only ``torch``.

Command line: ``export-sweep --subset ci --backend all -j 2 --out sweep-results.json``.
"""

from export_core.sweep.coverage import compare, coverage_markdown, parse_coverage
from export_core.sweep.job import BACKENDS, export_backend, export_job
from export_core.sweep.run import load_results, run_sweep, totals, versions, write_results
from export_core.sweep.skips import (
    EXPORT_SKIPS,
    ONNX_DISABLE_OPTIMIZE,
    SkipEntry,
    applicable_skip,
    disable_optimize,
    validate_entries,
)
from export_core.sweep.subsets import SUBSETS, subset

__all__ = [
    "BACKENDS",
    "EXPORT_SKIPS",
    "ONNX_DISABLE_OPTIMIZE",
    "SUBSETS",
    "SkipEntry",
    "applicable_skip",
    "compare",
    "coverage_markdown",
    "disable_optimize",
    "export_backend",
    "export_job",
    "load_results",
    "parse_coverage",
    "run_sweep",
    "subset",
    "totals",
    "validate_entries",
    "versions",
    "write_results",
]
