"""The sweep job: build one tiny model and export it to each backend, validated against eager.

:func:`export_job` runs inside a zoo worker (:class:`~export_core.zoo.isolate.WorkerPool`). The
backends are imported lazily, inside the job: ``export_core`` does not depend on them, and a
backend whose package is missing is reported as ``skip``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from export_core.sweep.skips import SkipEntry, applicable_skip, disable_optimize

__all__ = ["BACKENDS", "BACKEND_MODULES", "export_backend", "export_job", "first_line"]

BACKENDS: tuple[str, ...] = ("onnx", "executorch")
"""Backends the sweep knows, in report order."""

BACKEND_MODULES: dict[str, tuple[str, str]] = {
    "onnx": ("export_onnx", "export-onnx"),
    "executorch": ("export_executorch", "export-executorch"),
}
"""``backend -> (module, distribution)``."""


def first_line(e: BaseException | str, limit: int = 300) -> str:
    """``"ExcType: first line of the message"`` (or the string's first line), truncated."""
    if isinstance(e, BaseException):
        text = str(e).strip().splitlines()
        msg = text[0] if text else ""
        out = f"{type(e).__name__}: {msg}" if msg else type(e).__name__
    else:
        lines = e.strip().splitlines()
        out = lines[0] if lines else ""
    return out[:limit]


def _load_model(model_type: str) -> tuple[Any, Any, str, str, float]:
    """``(model, inputs, class_name, modality, build_seconds)``: from the zoo cache when it holds
    the type, else built."""
    from export_core.zoo.build import ZOO_METADATA, build_tiny_model, load_tiny_model, zoo_cache_dir
    from export_core.zoo.catalog import model_modality

    t0 = time.perf_counter()
    cached = zoo_cache_dir() / model_type
    if (cached / ZOO_METADATA).is_file():
        import json

        meta = json.loads((cached / ZOO_METADATA).read_text())
        model, inputs = load_tiny_model(cached)
        class_name = meta["class_name"]
        modality = str(meta.get("modality") or model_modality(model_type))
    else:
        tiny = build_tiny_model(model_type)
        model, inputs = tiny.model, tiny.inputs
        class_name, modality = tiny.class_name, str(tiny.modality)
    return model, inputs, class_name, modality, time.perf_counter() - t0


def export_backend(
    model: Any,
    inputs: Any,
    backend: str,
    *,
    class_name: str = "",
    skips: Iterable[SkipEntry] | None = None,
    optimize_off: Iterable[SkipEntry] | None = None,
) -> dict[str, Any]:
    """Export ``model`` to one backend with dynamic shapes and validate it at both input sets.

    Args:
        model: the eager model.
        inputs: its :class:`~export_core.zoo.inputs.ExampleInputs` (``first`` is exported,
            ``second`` validates).
        backend: ``"onnx"`` or ``"executorch"``.
        class_name: the model class, looked up in the skip lists.
        skips: ``EXPORT_SKIPS`` override (tests).
        optimize_off: ``ONNX_DISABLE_OPTIMIZE`` override (tests).

    Returns:
        ``{"status": "pass"|"fail"|"skip"|"xfail"|"xpass", "stage", "error", "seconds"}`` plus
        ``"skip_reason"`` when a skip-list entry applies, ``"optimize": False`` when the ONNX
        optimizer was disabled, and ``"validated_shapes"`` (input sets compared with eager) when
        the export returned.
    """
    import importlib

    module_name, dist = BACKEND_MODULES[backend]
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # noqa: BLE001 - any import failure means "not installed" here
        return {
            "status": "skip",
            "stage": "import",
            "error": f"{dist} not installed ({first_line(e)})",
            "seconds": 0.0,
        }
    kwargs: dict[str, Any] = {"dynamic": True, "validate": True}
    if inputs.second is not None:
        kwargs["validation_inputs"] = [inputs.second]
    extra: dict[str, Any] = {}
    if backend == "onnx" and disable_optimize(class_name, optimize_off):
        kwargs["optimize"] = False
        extra["optimize"] = False
    from export_core.errors import ExportError

    t0 = time.perf_counter()
    status, stage, error = "pass", None, None
    try:
        result = module.export(model, inputs.first, **kwargs)
        report = getattr(result, "report", {}) or {}
        extra["validated_shapes"] = len((report.get("validation") or {}).get("checks") or [])
        if report.get("status") in ("failed", "fail", "error"):
            status, stage = "fail", report.get("stage")
            error = first_line(str(report.get("error") or report.get("status")))
    except ExportError as e:
        status, stage, error = "fail", getattr(e, "stage", "export"), first_line(e)
    except Exception as e:  # noqa: BLE001 - an exporter bug is a failure of this model, not the sweep
        status, stage, error = "fail", "internal", first_line(e)
    seconds = round(time.perf_counter() - t0, 3)
    entry = applicable_skip(class_name, backend, entries=skips)
    if entry is not None:
        status = "xpass" if status == "pass" else "xfail"
        extra["skip_reason"] = entry.reason
    return {"status": status, "stage": stage, "error": error, "seconds": seconds, **extra}


def export_job(model_type: str, backends: Sequence[str] = BACKENDS) -> dict[str, Any]:
    """Build (or load from the zoo cache) one tiny model and export it to each backend.

    Args:
        model_type: a ``config.model_type`` key.
        backends: backends to export to, of :data:`BACKENDS`.

    Returns:
        A JSON-able record ``{"model_type", "class_name", "modality", "build": {"status",
        "error", "seconds"}, "backends": {backend: {"status", "stage", "error", "seconds"}}}``.
        A failed build marks every backend ``skip`` with the build error.
    """
    from export_core.zoo.catalog import model_class_name, model_modality

    rec: dict[str, Any] = {"model_type": model_type, "backends": {}}
    try:
        model, inputs, class_name, modality, build_s = _load_model(model_type)
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
        return rec
    rec.update(
        class_name=class_name,
        modality=modality,
        build={"status": "ok", "error": None, "seconds": round(build_s, 3)},
    )
    for b in backends:
        rec["backends"][b] = export_backend(model, inputs, b, class_name=class_name)
    return rec
