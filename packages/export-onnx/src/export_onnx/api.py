"""``export_onnx.export``: one call from a model and inputs to a validated ONNX artifact."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torch

from export_core.exporter import CaptureResult, ExportResult
from export_core.stages import StageListener

from .exporter import OnnxConfig, OnnxExporter

__all__ = ["export"]


def export(
    model: torch.nn.Module,
    inputs: dict[str, Any] | tuple[Any, ...],
    *,
    output: str | os.PathLike[str] | None = None,
    dynamic: bool = True,
    dynamic_shapes: Any = None,
    validate: bool = True,
    validation_inputs: Sequence[dict[str, Any] | tuple[Any, ...]] | None = None,
    opset: int | None = None,
    optimize: bool = True,
    constant_kwargs: dict[str, Any] | None = None,
    strict: bool = False,
    task: str | None = None,
    atol: float = 1e-4,
    rtol: float = 1e-3,
    max_artifact_bytes: int | None = None,
    listener: StageListener | None = None,
    capture: CaptureResult | None = None,
) -> ExportResult:
    """Export ``model`` to ONNX, check it in ONNX Runtime against eager PyTorch, and report.

    Args:
        model: any ``torch.nn.Module``.
        inputs: ``forward`` keyword arguments (dict) or positional arguments (tuple). Axes meant
            to be dynamic need example sizes >= 2 (size 1 specialises).
        output: directory for ``model.onnx`` and ``export_report.json``; ``None``: in memory.
        dynamic: ``Dim.AUTO`` on every input axis (ignored when ``dynamic_shapes`` is given).
        dynamic_shapes: ``torch.export``'s ``dynamic_shapes`` structure.
        validate: compare with eager at the export shapes and at ``validation_inputs`` (or at
            shapes derived from the dynamic axes when omitted; a static export at its own
            shapes on a second set of input values). ``False``: the report's validation is
            ``{"status": "skipped", "passed": None}``.
        validation_inputs: further input sets at other shapes.
        opset: ONNX opset version, 18 to 23 (:data:`export_onnx.opsets.SUPPORTED_OPSETS`).
        optimize: run the onnxscript optimizer.
        constant_kwargs: ``forward`` keyword arguments fixed at export (dict inputs only).
        strict: trace with TorchDynamo.
        task: recorded in the report.
        atol, rtol: validation tolerances per element.
        max_artifact_bytes: refuse, before translation, a model whose weights alone exceed
            this many bytes (``None``: no budget).
        listener: receives stage start/finish events (progress display).
        capture: a capture of ``model`` on ``inputs`` made earlier
            (``export_core.DynamoExporter(config).capture(model, inputs)`` with the same
            ``dynamic`` / ``dynamic_shapes`` / ``strict`` / ``constant_kwargs``); the export
            lowers a copy of its program instead of capturing again (several backends can
            share one capture).

    Returns:
        An ``ExportResult``: ``.path`` (``model.onnx`` when ``output`` is set), ``.report``,
        ``.program`` (the ``ONNXProgram``).

    Raises:
        export_core.InputError: ``opset`` outside the supported range, contradictory options
            (``dynamic=False`` with ``dynamic_shapes``), a ``dynamic_shapes`` that does not
            match ``inputs`` (stage ``dynamic_shapes``).
        export_core.BudgetError: (stage ``translate``) the weights exceed
            ``max_artifact_bytes``.
        export_core.ExportError: a subclass naming the failed stage; ``OutputError`` (stage
            ``output``) when another export holds ``output``. A failure leaves an earlier
            successful export in ``output`` as it was (see :mod:`export_core.output`).
    """
    config = OnnxConfig(
        dynamic=dynamic,
        dynamic_shapes=dynamic_shapes,
        strict=strict,
        constant_kwargs=dict(constant_kwargs or {}),
        opset=opset,
        optimize=optimize,
        atol=atol,
        rtol=rtol,
        max_artifact_bytes=max_artifact_bytes,
    )
    return OnnxExporter(config, listener=listener).export(
        model, inputs, output=output, validate=validate, validation_inputs=validation_inputs,
        task=task, capture=capture,
    )
