"""export-sweep: the tiny-model zoo and the coverage sweep of the exporters.

- :mod:`export_sweep.zoo`: a tiny random-weight model and example inputs for every model type
  of the installed ``transformers``, built in isolated workers and cached on disk.
- :mod:`export_sweep.sweep`: exports each tiny model to ONNX and ExecuTorch (the backends are
  the extras ``[onnx]``, ``[executorch]``, ``[all]``), locally or on Ray (``[ray]``), and
  renders and checks COVERAGE.md.
- :mod:`export_sweep.results`: the results file both write.

Command line: ``export-sweep`` (``run``, ``coverage``, ``check``, ``zoo``).
"""

from export_sweep.errors import SweepError, first_line
from export_sweep.results import load_results, versions, write_results
from export_sweep.sweep import run_sweep
from export_sweep.zoo import build_tiny_model, load_tiny_model, save_tiny_model

__version__ = "0.1.0"

__all__ = [
    "SweepError",
    "build_tiny_model",
    "first_line",
    "load_results",
    "load_tiny_model",
    "run_sweep",
    "save_tiny_model",
    "versions",
    "write_results",
]
