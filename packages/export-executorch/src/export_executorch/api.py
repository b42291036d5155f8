"""``export_executorch.export``: one call from a model and inputs to a validated ``.pte``."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import torch

from export_core.exporter import CaptureResult, ExportResult
from export_core.stages import StageListener

from .exporter import ExecutorchConfig, ExecutorchExporter

__all__ = ["export"]


def export(
    model: torch.nn.Module,
    inputs: dict[str, Any] | tuple[Any, ...],
    *,
    output: str | os.PathLike[str] | None = None,
    backend: str = "xnnpack",
    dynamic: bool = True,
    dynamic_shapes: Any = None,
    validate: bool = True,
    validation_inputs: Sequence[dict[str, Any] | tuple[Any, ...]] | None = None,
    max_batch: int | None = None,
    max_seq: int | None = None,
    max_image_size: int | None = None,
    max_audio_samples: int | None = None,
    max_frames: int | None = None,
    constant_kwargs: dict[str, Any] | None = None,
    strict: bool = False,
    task: str | None = None,
    atol: float = 1e-4,
    rtol: float = 1e-3,
    max_artifact_bytes: int | None = None,
    max_arena_bytes: int | None = None,
    listener: StageListener | None = None,
    capture: CaptureResult | None = None,
) -> ExportResult:
    """Export ``model`` to an ExecuTorch program, run it in ``executorch.runtime`` against
    eager PyTorch, and report.

    Args:
        model: any ``torch.nn.Module``.
        inputs: ``forward`` keyword arguments (dict) or positional arguments (tuple). Axes meant
            to be dynamic need example sizes >= 2 (size 1 specialises); they are then admitted
            down to 1.
        output: directory for ``model.pte`` and ``export_report.json``; ``None``: in memory.
        backend: ``"xnnpack"`` (CPU, float32, XNNPACK delegate), ``"portable"`` (CPU, float32,
            portable kernels) or ``"cuda"`` (bfloat16, AOTInductor; needs a CUDA GPU).
        dynamic: ``Dim.AUTO`` on every input axis (ignored when ``dynamic_shapes`` is given).
        dynamic_shapes: ``torch.export``'s ``dynamic_shapes`` structure. A declared
            ``Dim(max=N)`` is the program's bound (memory is planned for N); a declared ``Dim``
            without ``max`` gets the bound of its axis role (``max_batch``, ``max_seq``, ...),
            with a warning; the report's ``bounds.dims`` gives each axis's range and its
            ``source``.
        validate: compare with eager at the export shapes and at ``validation_inputs`` (or at
            shapes derived from the dynamic axes when omitted; a static export at its own
            shapes on a second set of input values, with ``bounds: None``). ``False``: the
            report's validation is ``{"status": "skipped", "passed": None}``.
        validation_inputs: further input sets at other shapes.
        max_batch: upper bound of batch axes (default 8).
        max_seq: upper bound of sequence axes (default: the config's position limit, <= 512);
            above what the model accepts, the program's bound is the model's (the report's
            ``bounds`` says so and a warning is logged or sent to ``listener.warning``).
        max_image_size: upper bound of image height / width (default: ``config.image_size``,
            else 224).
        max_audio_samples: upper bound of waveform axes (``input_values``), in samples
            (default: 1 s at ``config.sampling_rate``, else 16000). A bound left to its
            default is raised to the example inputs' size when they are larger.
        max_frames: upper bound of video frame axes (axis 1 of a 5-d floating input, such as
            ``pixel_values`` ``(batch, frames, channels, height, width)``; default:
            ``config.num_frames`` / ``frames_per_clip``, else 64).
        constant_kwargs: ``forward`` keyword arguments fixed at export (dict inputs only).
        strict: trace with TorchDynamo.
        task: recorded in the report.
        atol, rtol: validation tolerances per element (the CUDA backend raises them to its
            bfloat16 minimum).
        max_artifact_bytes: refuse, before lowering, a model whose weights alone exceed this
            many bytes (``None``: no budget).
        max_arena_bytes: refuse, after memory planning and before the save, a program whose
            planned activation arena exceeds this many bytes (``None``: no budget).
        listener: receives stage start/finish events and the delegation line (progress display).
        capture: a capture of ``model`` on ``inputs`` made earlier
            (``export_core.DynamoExporter(config).capture(model, inputs)`` with the same
            ``dynamic`` / ``dynamic_shapes`` / ``strict`` / ``constant_kwargs``); the export
            lowers a copy of its program instead of capturing again (several backends can
            share one capture). Only for backends that capture at the model's dtype.

    Returns:
        An ``ExportResult``: ``.path`` (``model.pte`` when ``output`` is set), ``.report``
        (with ``backend``, ``bounds``, ``delegation`` and ``memory`` beside the contract's keys),
        ``.program`` (the ``ExecutorchProgramManager``).

    Raises:
        export_core.InputError: unknown backend, a bound given explicitly below an example size,
            contradictory options (``dynamic=False`` with ``dynamic_shapes`` or a ``max_*``
            bound), a ``dynamic_shapes`` that does not match ``inputs`` (stage
            ``dynamic_shapes``).
        export_core.BudgetError: the weights exceed ``max_artifact_bytes`` (stage ``lower``)
            or the planned arena ``max_arena_bytes`` (stage ``to_executorch``).
        export_core.ExportError: a subclass naming the failed stage (``CaptureError``,
            ``LoweringError``, ``RuntimeLoadError``, ``ValidationError``, ``OutputError``).
    """
    config = ExecutorchConfig(
        dynamic=dynamic,
        dynamic_shapes=dynamic_shapes,
        strict=strict,
        constant_kwargs=dict(constant_kwargs or {}),
        backend=backend,
        max_batch=max_batch,
        max_seq=max_seq,
        max_image_size=max_image_size,
        max_audio_samples=max_audio_samples,
        max_frames=max_frames,
        atol=atol,
        rtol=rtol,
        max_artifact_bytes=max_artifact_bytes,
        max_arena_bytes=max_arena_bytes,
    )
    return ExecutorchExporter(config, listener=listener).export(
        model, inputs, output=output, validate=validate, validation_inputs=validation_inputs,
        task=task, capture=capture,
    )
