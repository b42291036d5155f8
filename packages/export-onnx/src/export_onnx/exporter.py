"""``OnnxExporter``: capture with ``torch.export``, then five ONNX stages, then ONNX Runtime."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from export_core.errors import ExportError, TranslationError
from export_core.exporter import CaptureResult, DynamoConfig, DynamoExporter, StagedFile, first_line
from export_core.fixes import apply_fx_node_fixes
from export_core.report import ExportReport
from export_core.stages import StageListener, StageRecorder

from . import workarounds as _workarounds  # noqa: F401  (registers the ONNX workarounds)
from .ir_fixes import apply_ir_fixes
from .patches import refixed_after_decompositions, translations_used
from .runner import OrtRunner
from .translations import translation_table

__all__ = ["OnnxConfig", "OnnxExporter", "EXTERNAL_DATA_THRESHOLD"]

EXTERNAL_DATA_THRESHOLD = 2 * 1024**3
"""Models whose initializers exceed this many bytes are saved with external data beside them."""


@dataclass
class OnnxConfig(DynamoConfig):
    """Options of an ONNX export.

    Attributes:
        opset: the ONNX opset version (``None``: torch.onnx's default).
        optimize: run the onnxscript optimizer after translation.
        providers: ONNX Runtime execution providers used for validation.
    """

    opset: int | None = None
    optimize: bool = True
    providers: tuple[str, ...] = ("CPUExecutionProvider",)


class OnnxExporter(DynamoExporter):
    """Exports a model to ONNX and validates it in ONNX Runtime.

    Stages after :meth:`~export_core.exporter.DynamoExporter.capture`: torch patches, ONNX
    patches re-applied after ``run_decompositions``, FX node fixes, the ONNX translation table,
    ONNX IR fixes.
    """

    backend = "onnx"
    patch_backends = ("onnx",)
    version_packages = ("export-onnx", "onnx", "onnxscript", "onnx-ir", "onnxruntime")

    def __init__(self, config: OnnxConfig | None = None, *, listener: StageListener | None = None):
        super().__init__(config or OnnxConfig(), listener=listener)
        self.config: OnnxConfig

    def lower(self, capture: CaptureResult, recorder: StageRecorder, report: ExportReport) -> Any:
        """Run the ONNX stages on the captured program; returns the ``ONNXProgram``.

        Raises:
            FixError: a node or IR fix failed.
            TranslationError: ``torch.onnx`` could not translate the program.
        """
        cfg = self.config
        applied: list[str] = []
        # ── Stage 1: torch patches ───────────────────────────────────────────────────────────
        # Installed by DynamoExporter.export around capture and lowering (patch_backends).
        # ── Stage 2: ONNX patches ────────────────────────────────────────────────────────────
        # The "onnx" patch on ExportedProgram.run_decompositions re-runs the node fixes on the
        # program torch.onnx decomposes internally (export_onnx.patches).
        refixed_after_decompositions()
        translations_used()
        # ── Stage 3: FX node fixes ───────────────────────────────────────────────────────────
        with recorder.stage("fx_node_fixes"):
            applied += apply_fx_node_fixes(capture.program, "onnx")
        # ── Stage 4: ONNX translation ────────────────────────────────────────────────────────
        with recorder.stage("translate"):
            try:
                onnx_program = torch.onnx.export(
                    capture.program,
                    args=capture.args,
                    kwargs=capture.kwargs,
                    dynamo=True,
                    input_names=capture.input_names,
                    output_names=capture.output_names,
                    opset_version=cfg.opset,
                    custom_translation_table=translation_table(),
                    optimize=cfg.optimize,
                    verify=False,
                    report=False,
                    verbose=False,
                )
            except ExportError:
                raise
            except Exception as e:
                raise TranslationError(f"torch.onnx could not translate the program: {_onnx_cause(e)}") from e
            for name in refixed_after_decompositions():
                if name not in applied:
                    applied.append(name)
            report.extra["translations"] = {"used": translations_used()}
        # ── Stage 5: ONNX IR fixes ───────────────────────────────────────────────────────────
        with recorder.stage("ir_fixes"):
            applied += apply_ir_fixes(onnx_program.model)
        report.fixes["applied"] = applied
        report.extra["opset"] = _opset(onnx_program)
        return onnx_program

    def save(self, program: Any, out_dir: Path, report: ExportReport) -> list[StagedFile]:
        """Save ``model.onnx`` (with ``model.onnx.data`` beside it above 2 GB) under temporary
        names in ``out_dir``."""
        size = sum(
            v.const_value.nbytes
            for v in program.model.graph.initializers.values()
            if v.const_value is not None
        )
        if size <= EXTERNAL_DATA_THRESHOLD:
            staged = StagedFile.beside(out_dir / "model.onnx")
            program.save(str(staged.tmp))
            return [staged]
        staging = out_dir / f".staging-{os.getpid()}"
        staging.mkdir(exist_ok=True)
        program.save(str(staging / "model.onnx"), external_data=True)
        return [StagedFile(f, out_dir / f.name) for f in sorted(staging.iterdir(), key=lambda p: p.suffix != ".onnx")]

    def runner(self, program: Any, path: Path | None, capture: CaptureResult) -> OrtRunner:
        model = path if path is not None else program.model_proto.SerializeToString()
        return OrtRunner(model, capture.input_names, list(capture.kwargs), self.config.providers)


def _opset(program: Any) -> int | None:
    return program.model.opset_imports.get("", None)


def _onnx_cause(e: BaseException) -> str:
    import re

    found = re.findall(r"<class '([\w\.]+)'>: ([^\n]+)", str(e))
    if found:
        return f"{found[0][0].split('.')[-1]}: {found[0][1]}"
    return first_line(e)
