"""Test-only sweep jobs with injected faults, run by the real workers (local pool or Ray).

``run_sweep(..., job_target="sweep_faults:fault_job")`` runs :func:`fault_job` in the isolated
workers instead of :func:`export_sweep.sweep.job.export_job` (the test puts this folder on the
workers' ``PYTHONPATH``). By model type:

- ``crash-me``: the worker segfaults while "building" (every requested backend fails).
- ``hang-me``: the worker sleeps past its deadline.
- ``linear-*``: the real job on a tiny ``Linear`` model (no zoo build) with fake backends whose
  behaviour the type names: ``linear-ok`` (both pass, and they require the shared capture),
  ``linear-crash-second`` (``executorch`` segfaults after ``onnx`` passed), ``linear-hang-first``
  (``onnx`` hangs; ``executorch`` then runs in a job of its own and passes). The hanging and the
  crashing fake report a stage to the job's stage listener first, as an exporter does.
- any other type: the real job, unchanged.
"""

from __future__ import annotations

import os
import signal
import time
from types import SimpleNamespace
from typing import Any

__all__ = ["fault_job"]


class _Linear:
    """Built lazily so that importing this module costs no torch."""

    @staticmethod
    def make() -> tuple[Any, Any]:
        import torch

        from export_sweep.zoo.inputs import ExampleInputs

        model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()).eval()
        g = torch.Generator().manual_seed(0)
        inputs = ExampleInputs(
            sets=((torch.randn(2, 4, generator=g),), (torch.randn(3, 4, generator=g),)),
            recipe="test",
        )
        return model, inputs


def _report(checks: int = 2) -> SimpleNamespace:
    return SimpleNamespace(report={"status": "ok", "validation": {"checks": [{}] * checks}})


def _needs_capture(model: Any, inputs: Any, *, capture: Any = None, **options: Any) -> Any:
    import torch

    if not isinstance(getattr(capture, "program", None), torch.export.ExportedProgram):
        raise AssertionError(f"no shared capture given: {capture!r}")
    return _report()


def _passes(model: Any, inputs: Any, **options: Any) -> Any:
    return _report()


def _segfaults(model: Any, inputs: Any, *, listener: Any = None, **options: Any) -> Any:
    if listener is not None:  # as an exporter reports its stages
        listener.stage_started(SimpleNamespace(name="runtime"))
    os.kill(os.getpid(), signal.SIGSEGV)


def _hangs(model: Any, inputs: Any, *, listener: Any = None, **options: Any) -> Any:
    if listener is not None:
        listener.stage_started(SimpleNamespace(name="lower"))
    time.sleep(3600)


_FAKES = {
    "linear-ok": {"onnx": "_needs_capture", "executorch": "_needs_capture"},
    "linear-crash-second": {"onnx": "_passes", "executorch": "_segfaults"},
    "linear-hang-first": {"onnx": "_hangs", "executorch": "_passes"},
}


def fault_job(model_type: str, backends: Any = ("onnx", "executorch"), **kwargs: Any) -> Any:
    """The sweep job, with the faults the module docstring lists."""
    from dataclasses import replace

    from export_sweep.sweep import job

    if model_type == "crash-me":
        os.kill(os.getpid(), signal.SIGSEGV)
    if model_type == "hang-me":
        time.sleep(3600)
    if model_type not in _FAKES:
        return job.export_job(model_type, backends, **kwargs)
    fakes = _FAKES[model_type]
    real_load, real_get = job.load_model, job.get_backend
    model, inputs = _Linear.make()
    job.load_model = lambda t: job.LoadedModel(model, inputs, "Linear", "other", 0.0)
    job.get_backend = lambda name: replace(
        real_get(name), module=__name__, function=fakes[real_get(name).name]
    )
    try:  # the worker runs further jobs: restore the real pieces afterwards
        return job.export_job(model_type, backends, **kwargs)
    finally:
        job.load_model, job.get_backend = real_load, real_get
