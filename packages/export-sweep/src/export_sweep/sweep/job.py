"""The sweep job: build one tiny model, capture it once, export it to each backend, validated.

:func:`export_job` runs inside a zoo worker (:class:`~export_sweep.zoo.isolate.WorkerPool`, or
a Ray task, see :mod:`~export_sweep.sweep.executors`), one job per model type. The model is
built (or loaded from the zoo cache) once; when two or more of the requested backends take a
shared capture (their ``export`` has a ``capture`` keyword), it is captured once with
:meth:`export_core.DynamoExporter.capture` and each backend works on that program instead of
capturing again. The backends are imported lazily, inside the job, through the typed table of
:mod:`~export_sweep.sweep.backends`; a backend whose package is missing is reported as ``skip``.
Progress (the running backend, the finished records) goes to a progress file
(:mod:`~export_sweep.sweep.checkpoint`) so a crash costs only the backend that was running.
"""

from __future__ import annotations

import copy
import gc
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from export_sweep.errors import first_line
from export_sweep.sweep.backends import BACKENDS, Backend, get_backend
from export_sweep.sweep.checkpoint import JobProgress, StageProgress
from export_sweep.sweep.skips import SkipEntry, applicable_skip
from export_sweep.zoo.isolate import extra_address_space

__all__ = [
    "MIN_VALIDATED_SHAPES",
    "LoadedModel",
    "SharedCapture",
    "backend_record",
    "capture_once",
    "cli_class_mismatch",
    "export_backend",
    "ExportOne",
    "export_job",
    "failure",
    "fired_workarounds",
    "load_model",
    "not_installed",
    "run_job",
    "vacuous_error",
]


@dataclass(frozen=True)
class LoadedModel:
    """A tiny model ready to export.

    Attributes:
        model: the eager model, in ``eval()`` mode.
        inputs: its :class:`~export_sweep.zoo.inputs.ExampleInputs`.
        class_name: the model class.
        modality: the input modality.
        seconds: wall time to build or load it, in seconds.
    """

    model: Any
    inputs: Any
    class_name: str
    modality: str
    seconds: float


@dataclass(frozen=True)
class SharedCapture:
    """The outcome of the one capture a job's backends share.

    Attributes:
        capture: the :class:`export_core.CaptureResult`, ``None`` when the capture failed.
        error: the first line of the capture error, ``None`` on success.
        stage: the failed stage (``"capture"`` or ``"inputs"``), ``None`` on success.
        seconds: wall time of the capture, in seconds.
    """

    capture: Any
    error: str | None
    stage: str | None
    seconds: float

    def record(self, backends: Sequence[str]) -> dict[str, Any]:
        """The type record's ``capture`` field: status, error, seconds, and the backends that
        shared it."""
        return {
            "status": "ok" if self.capture is not None else "fail",
            "error": self.error,
            "seconds": round(self.seconds, 3),
            "backends": list(backends),
        }


def load_model(model_type: str) -> LoadedModel:
    """The tiny model of ``model_type``: from the zoo cache when it holds the type, else built.

    Raises:
        ZooBuildError: the model cannot be built.
    """
    from export_sweep.zoo.build import (
        ZOO_METADATA,
        build_tiny_model,
        load_tiny_model,
        zoo_cache_dir,
    )
    from export_sweep.zoo.catalog import model_modality

    t0 = time.perf_counter()
    cached = zoo_cache_dir() / model_type
    if (cached / ZOO_METADATA).is_file():
        meta = json.loads((cached / ZOO_METADATA).read_text())
        model, inputs = load_tiny_model(cached)
        class_name = meta["class_name"]
        modality = str(meta.get("modality") or model_modality(model_type))
    else:
        tiny = build_tiny_model(model_type)
        model, inputs = tiny.model, tiny.inputs
        class_name, modality = tiny.class_name, str(tiny.modality)
    return LoadedModel(model, inputs, class_name, modality, time.perf_counter() - t0)


def capture_once(model: Any, inputs: Any) -> SharedCapture:
    """Capture ``model`` on ``inputs.first`` with dynamic shapes, for every backend to share.

    Args:
        model: the eager model.
        inputs: its :class:`~export_sweep.zoo.inputs.ExampleInputs`.

    Returns:
        The capture, or its error (never raises for a model that does not capture).
    """
    from export_core import DynamoConfig, DynamoExporter, ExportError

    t0 = time.perf_counter()
    try:
        capture = DynamoExporter(DynamoConfig(dynamic=True)).capture(model, inputs.first)
    except ExportError as e:
        return SharedCapture(None, first_line(e), e.stage, time.perf_counter() - t0)
    except Exception as e:  # noqa: BLE001 - a capture bug is a failure of this model
        return SharedCapture(None, first_line(e), "capture", time.perf_counter() - t0)
    return SharedCapture(capture, None, None, time.perf_counter() - t0)


def export_backend(
    model: Any,
    inputs: Any,
    backend: str | Backend,
    *,
    class_name: str = "",
    skips: Iterable[SkipEntry] | None = None,
    optimize_off: Iterable[SkipEntry] | None = None,
    capture: SharedCapture | None = None,
    listener: Any = None,
) -> dict[str, Any]:
    """Export ``model`` to one backend with dynamic shapes and validate it at both input sets.

    Args:
        model: the eager model.
        inputs: its :class:`~export_sweep.zoo.inputs.ExampleInputs` (``first`` is exported,
            ``second`` validates).
        backend: a backend name of :data:`~export_sweep.sweep.backends.BACKENDS`, or a
            :class:`~export_sweep.sweep.backends.Backend` record.
        class_name: the model class, looked up in the skip lists.
        skips: ``EXPORT_SKIPS`` override (tests).
        optimize_off: ``ONNX_DISABLE_OPTIMIZE`` override (tests).
        capture: a shared capture; used when the backend's export takes ``capture``. A failed
            shared capture is this backend's ``capture`` failure.
        listener: a stage listener (:class:`~export_sweep.sweep.checkpoint.StageProgress`)
            given to the backend's export when it takes one.

    Returns:
        ``{"status": "pass"|"fail"|"skip"|"xfail"|"xpass", "stage", "error", "seconds"}`` plus
        ``"skip_reason"`` when a skip-list entry applies, the backend's options when it has any
        (``"optimize": False``), and, when the export returned, ``"validated_shapes"`` (input
        sets compared with eager; fewer than :data:`MIN_VALIDATED_SHAPES` is a failure) and
        ``"workarounds"`` (:func:`fired_workarounds`). A validation that passed only because
        every eager output is about zero (``validation.vacuous``) is a ``validate`` failure.
    """

    spec = get_backend(backend)
    try:
        export = spec.export_function()
    except Exception as e:  # noqa: BLE001 - any import failure means "not installed" here
        return not_installed(spec, e)
    options = spec.options(class_name, optimize_off)
    kwargs: dict[str, Any] = {"dynamic": True, "validate": True, **options}
    if inputs.second is not None:
        kwargs["validation_inputs"] = [inputs.second]
    if listener is not None and Backend.accepts_listener(export):
        kwargs["listener"] = listener
    extra: dict[str, Any] = dict(options)
    shared = capture is not None and Backend.accepts_capture(export)

    t0 = time.perf_counter()
    status, stage, error = "pass", None, None
    if shared and capture.capture is None:
        status, stage, error = "fail", capture.stage or "capture", capture.error
    else:
        if shared:
            kwargs["capture"] = capture.capture
        try:
            with extra_address_space(spec.reserve_mb):
                result = export(model, inputs.first, **kwargs)
            report = getattr(result, "report", {}) or {}
            extra["validated_shapes"] = len((report.get("validation") or {}).get("checks") or [])
            extra["workarounds"] = fired_workarounds(report)
            if report.get("status") in ("failed", "fail", "error"):
                status, stage = "fail", report.get("stage")
                error = first_line(str(report.get("error") or report.get("status")))
            elif extra["validated_shapes"] < MIN_VALIDATED_SHAPES:
                status, stage = "fail", "validate"
                error = (f"OneShapeValidation: validated at {extra['validated_shapes']} input "
                         f"shape(s); a pass needs {MIN_VALIDATED_SHAPES} of different sizes")
            elif (report.get("validation") or {}).get("vacuous"):
                status, stage = "fail", "validate"
                error = vacuous_error(report["validation"])
            del result
        except Exception as e:  # noqa: BLE001 - an exporter bug is a failure of this model
            status, stage, error = failure(e)
    return backend_record(status, stage, error, time.perf_counter() - t0, class_name=class_name,
                          backend=spec.name, skips=skips, extra=extra)


def vacuous_error(validation: dict[str, Any]) -> str:
    """The sweep's error line for a vacuous pass (``report["validation"]["vacuous"]``): the eager
    outputs were all within the tolerances of zero, so the pass checked nothing about the
    artifact (a tiny model whose weights initialised near zero is the usual cause)."""
    sizes = [c.get("eager_max_abs") for c in validation.get("checks") or ()]
    largest = max((x for x in sizes if isinstance(x, (int, float)) and x == x), default=0.0)
    return (f"VacuousValidation: every eager output is within atol={validation.get('atol')} of "
            f"zero (largest |eager| {largest:.3g}), so an artifact returning zeros would pass too")


def cli_class_mismatch(model: Any, class_name: str) -> str | None:
    """Why ``export-onnx DIR`` / ``export-executorch DIR`` would not export ``model``, or ``None``.

    ``DIR`` is the directory ``model.save_pretrained`` writes (its config's ``architectures``
    name ``class_name``); the command-line tools load it with
    :func:`export_core.loading.model_class_for`'s class. When that class is another one (or none),
    a sweep pass would not mean that the command-line tools export this model.

    Args:
        model: the eager ``transformers`` model (without a ``config`` there is nothing to check).
        class_name: its class name, as the zoo records it.

    Returns:
        ``"CliClassMismatch: ..."`` naming both classes, or ``None`` when they agree.
    """
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "to_dict"):
        return None
    from export_core.loading import model_class_for

    config = copy.copy(config)
    config.architectures = [class_name]
    try:
        loaded_by = model_class_for(config)
    except Exception as e:  # noqa: BLE001 - the loader's own failure is the mismatch
        loaded_by = f"nothing ({first_line(e)})"
    if loaded_by == class_name:
        return None
    return (f"CliClassMismatch: the command-line tools load {loaded_by or 'no class'} from a "
            f"directory saved from {class_name}, so they would not export the model this sweep "
            "exported")


def backend_record(
    status: str,
    stage: str | None,
    error: str | None,
    seconds: float,
    *,
    class_name: str,
    backend: str,
    skips: Iterable[SkipEntry] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One backend's record ``{"status", "stage", "error", "seconds", **extra}``, with the skip
    lists applied: a listed class's pass is ``xpass`` and its failure ``xfail``, with the
    entry's reason as ``skip_reason``.

    Args:
        status: ``"pass"`` or ``"fail"``.
        stage: the failed stage, ``None`` on a pass.
        error: the first line of the error, ``None`` on a pass.
        seconds: wall time of the export, in seconds.
        class_name: the model class, looked up in the skip lists.
        backend: the backend name.
        skips: ``EXPORT_SKIPS`` override (tests).
        extra: more fields of the record.
    """
    extra = dict(extra or {})
    entry = applicable_skip(class_name, backend, entries=skips)
    if entry is not None:
        status = "xpass" if status == "pass" else "xfail"
        extra["skip_reason"] = entry.reason
    return {"status": status, "stage": stage, "error": error, "seconds": round(seconds, 3), **extra}


def failure(error: BaseException) -> tuple[str, str, str]:
    """``("fail", stage, first error line)`` of an exception an export raised: an
    ``ExportError``'s stage, ``internal`` for any other exception (an exporter bug)."""
    from export_core.errors import ExportError

    stage = (getattr(error, "stage", None) or "export") if isinstance(error, ExportError) else "internal"
    return "fail", stage, first_line(error)


def not_installed(backend: Backend, error: BaseException) -> dict[str, Any]:
    """The ``skip`` record of a backend whose package does not import."""
    return {
        "status": "skip",
        "stage": "import",
        "error": f"{backend.distribution} not installed ({first_line(error)})",
        "seconds": 0.0,
    }


MIN_VALIDATED_SHAPES = 2
"""Input shapes an export must match eager at to count as a pass (the export's own and one of
different sizes); an export validated at fewer is a ``validate`` failure in the sweep."""


def fired_workarounds(report: dict[str, Any]) -> list[str]:
    """The names of the workarounds that acted in one export, sorted: the patches that fired,
    the FX / IR fixes that changed the program and the ONNX translations used (names as in
    :func:`export_core.registry.describe`), and a capture strategy other than the default one as
    ``capture:<strategy>`` (``capture:static-image-axes``)."""
    names: set[str] = set((report.get("patches") or {}).get("fired") or ())
    strategy = report.get("capture_strategy")
    if strategy and strategy != "default":
        names.add(f"capture:{strategy}")
    names.update((report.get("fixes") or {}).get("applied") or ())
    names.update((report.get("translations") or {}).get("used") or ())
    return sorted(str(n) for n in names)


def _shares_capture(backends: Sequence[str]) -> bool:
    """Whether two or more of ``backends`` are installed and take a shared capture."""
    n = 0
    for name in backends:
        try:
            n += Backend.accepts_capture(get_backend(name).export_function())
        except Exception:  # noqa: BLE001 - not installed: it will be recorded as skip
            continue
    return n >= 2


ExportOne = Callable[[LoadedModel, str, "SharedCapture | None", StageProgress], dict[str, Any]]
"""``(loaded model, backend, shared capture or None, stage listener) -> backend record`` of one
job kind; the listener (given to the export as ``listener``) keeps the running export stage in
the job's progress file."""


def run_job(
    model_type: str,
    backends: Sequence[str],
    *,
    load: Callable[[str], LoadedModel],
    export_one: ExportOne,
    progress_path: str | os.PathLike[str] | None = None,
    share_capture: bool = False,
) -> dict[str, Any]:
    """Build one model type with ``load`` and run ``export_one`` for each backend, keeping a
    progress file: the frame of every job kind (:func:`export_job`, and
    :func:`~export_sweep.sweep.generate.generate_job`).

    Args:
        model_type: a ``config.model_type`` key.
        backends: the backends, in order.
        load: builds (or loads) the model; any exception is the type's build failure.
        export_one: one backend's export and check; returns its record.
        progress_path: a file to keep a :class:`~export_sweep.sweep.checkpoint.JobProgress` in.
        share_capture: capture once (:func:`capture_once`) for the backends and pass it to
            ``export_one``, when two or more backends take a shared capture.

    Returns:
        The type record (see :func:`export_job`).
    """
    from export_sweep.zoo.catalog import model_class_name, model_modality

    t_job = time.perf_counter()
    rec: dict[str, Any] = {"model_type": model_type, "backends": {}}
    progress = JobProgress(phase="build").write(progress_path)
    try:
        loaded = load(model_type)
    except Exception as e:  # noqa: BLE001 - a build failure is recorded, not raised
        reason = first_line(e)
        rec.update(
            class_name=model_class_name(model_type) or "",
            modality=str(model_modality(model_type)),
            build={"status": "fail", "error": reason, "seconds": None},
        )
        for b in backends:
            rec["backends"][b] = {
                "status": "skip",
                "stage": "build",
                "error": f"build failed: {reason}",
                "seconds": 0.0,
            }
        progress.with_changes(phase="done", finished=dict(rec["backends"])).write(progress_path)
        return rec
    rec.update(
        class_name=loaded.class_name,
        modality=loaded.modality,
        build={"status": "ok", "error": None, "seconds": round(loaded.seconds, 3)},
    )
    model_fields = {k: rec[k] for k in ("class_name", "modality", "build")}
    progress = progress.with_changes(model=model_fields)

    shared: SharedCapture | None = None
    if share_capture and len(backends) > 1 and _shares_capture(backends):
        progress = progress.with_changes(phase="capture").write(progress_path)
        shared = capture_once(loaded.model, loaded.inputs)
        rec["capture"] = shared.record(backends)
        progress = progress.with_changes(model={**model_fields, "capture": rec["capture"]})

    for b in backends:
        progress = progress.with_changes(
            phase="export", running=b, started=round(time.perf_counter() - t_job, 3), stage=None
        ).write(progress_path)
        rec["backends"][b] = export_one(loaded, b, shared, StageProgress(progress, progress_path))
        gc.collect()
        progress = progress.with_changes(
            running=None, stage=None, finished={**progress.finished, b: rec["backends"][b]}
        )
    progress.with_changes(phase="done").write(progress_path)
    return rec


def export_job(
    model_type: str,
    backends: Sequence[str] = BACKENDS,
    *,
    progress_path: str | os.PathLike[str] | None = None,
    share_capture: bool = True,
) -> dict[str, Any]:
    """Build (or load from the zoo cache) one tiny model and export it to each backend.

    Args:
        model_type: a ``config.model_type`` key.
        backends: backends to export to, of :data:`~export_sweep.sweep.backends.BACKENDS`.
        progress_path: a file to keep a :class:`~export_sweep.sweep.checkpoint.JobProgress`
            in (the running backend and each finished backend's record).
        share_capture: capture once for the backends that take a shared capture (when two or
            more do); ``False``: each backend captures the model itself.

    Returns:
        A JSON-able record ``{"model_type", "class_name", "modality", "build": {"status",
        "error", "seconds"}, "backends": {backend: {"status", "stage", "error", "seconds",
        ...}}}`` plus ``"capture": {"status", "error", "seconds", "backends"}`` when the
        backends shared one capture. A failed build marks every backend ``skip`` with the
        build error; a failed shared capture is each sharing backend's ``capture`` failure. A
        pass whose model the command-line tools would not load from its saved directory
        (:func:`cli_class_mismatch`) is a ``load`` failure.
    """

    def export_one(loaded: LoadedModel, backend: str, shared: SharedCapture | None,
                   listener: StageProgress) -> dict[str, Any]:
        record = export_backend(loaded.model, loaded.inputs, backend, class_name=loaded.class_name,
                                capture=shared, listener=listener)
        if record["status"] == "pass":
            mismatch = cli_class_mismatch(loaded.model, loaded.class_name)
            if mismatch is not None:
                record.update(status="fail", stage="load", error=mismatch)
        return record

    return run_job(
        model_type,
        backends,
        load=load_model,
        export_one=export_one,
        progress_path=progress_path,
        share_capture=share_capture,
    )
