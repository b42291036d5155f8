"""``OnnxExporter``: capture with ``torch.export``, then the ONNX stages, then ONNX Runtime."""

from __future__ import annotations

import re
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from export_core.axes import axis_bounds, axis_names, model_config
from export_core.budget import check_budget, weight_bytes
from export_core.errors import ExportError, OutputError, TranslationError
from export_core.exporter import (
    CaptureResult,
    DynamoConfig,
    DynamoExporter,
    ExportRun,
    Lowered,
    Prepared,
    first_line,
)
from export_core.fixes import FixContext, apply_fx_node_fixes
from export_core.stages import StageListener

from . import workarounds as _workarounds  # noqa: F401  (registers the ONNX workarounds)
from .artifacts import ARTIFACT_PATTERNS, VERSION_PACKAGES
from .axis_names import rename_symbolic_dims
from .external_data import external_data_files
from .ir_fixes import apply_ir_fixes
from .opsets import check_opset
from .runner import OrtRunner
from .stages import BACKEND, ONNX_STAGES
from .translations import translation_table
from .workarounds.refix_after_decompositions import REFIXED, TRANSLATED

__all__ = ["EXTERNAL_DATA_THRESHOLD", "OnnxConfig", "OnnxExporter", "OnnxLowered"]

EXTERNAL_DATA_THRESHOLD = 2 * 1024**3
"""Models whose initializers exceed this many bytes are saved with external data beside them."""


@dataclass
class OnnxConfig(DynamoConfig):
    """Options of an ONNX export.

    Attributes:
        opset: the ONNX opset version (``None``: torch.onnx's default).
        optimize: run the onnxscript optimizer after translation.
        providers: ONNX Runtime execution providers used for validation.
        external_data_threshold: initializers above this many bytes in all are saved in
            ``model.onnx.data`` beside ``model.onnx`` (default 2 GiB, the protobuf limit).

    Raises:
        InputError: ``opset`` is outside :data:`~export_onnx.opsets.SUPPORTED_OPSETS`.
    """

    opset: int | None = None
    optimize: bool = True
    providers: tuple[str, ...] = ("CPUExecutionProvider",)
    external_data_threshold: int = EXTERNAL_DATA_THRESHOLD

    def __post_init__(self) -> None:
        super().__post_init__()
        check_opset(self.opset)


@dataclass(frozen=True)
class OnnxLowered(Lowered):
    """The ONNX stages' result.

    Attributes:
        program: the ``ONNXProgram``.
        fixes: names of the FX node fixes and IR fixes that changed the program.
        translations: names of the custom translations the program used.
    """

    fixes: tuple[str, ...] = ()
    translations: tuple[str, ...] = ()


class OnnxExporter(DynamoExporter):
    """Exports a model to ONNX and validates it in ONNX Runtime.

    Stages (:data:`~export_onnx.stages.ONNX_STAGES`) after the capture: torch patches, ONNX
    patches (the node fixes re-run after ``run_decompositions``), FX node fixes, the ONNX
    translation, ONNX IR fixes; the patches stay installed until translation ends.
    """

    backend = BACKEND
    stages = ONNX_STAGES
    version_packages = VERSION_PACKAGES
    artifact_patterns = ARTIFACT_PATTERNS

    def __init__(self, config: OnnxConfig | None = None, *, listener: StageListener | None = None):
        super().__init__(config or OnnxConfig(), listener=listener)
        self.config: OnnxConfig

    def lower(self, capture: CaptureResult, prepared: Prepared, run: ExportRun) -> OnnxLowered:
        """Run the ONNX stages on the captured program.

        Raises:
            BudgetError: (stage ``translate``, before translating) the model's weights exceed
                ``config.max_artifact_bytes``.
            FixError: a node or IR fix failed.
            TranslationError: ``torch.onnx`` could not translate the program.
        """
        cfg = self.config
        with ExitStack() as patches:
            # ── ONNX stage 1: torch patches ──
            run.install_patches(patches, BACKEND, "torch_patches")
            # ── ONNX stage 2: ONNX patches ──
            run.install_patches(patches, BACKEND, "onnx_patches")
            # ── ONNX stage 3: FX node fixes ──
            with run.stage("fx_node_fixes"):
                fixed = apply_fx_node_fixes(capture.program, BACKEND, stage="fx_node_fixes")
            # ── ONNX stage 4: ONNX translation ──
            with run.stage("translate"):
                check_budget("the model's weights (a lower bound of model.onnx)",
                             weight_bytes(capture.module), cfg.max_artifact_bytes,
                             "max_artifact_bytes", "translate")
                try:
                    onnx_program = torch.onnx.export(
                        fixed.program,
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
                    raise TranslationError(
                        f"torch.onnx could not translate the program: {_onnx_cause(e)}"
                    ) from e
        # ── ONNX stage 5: ONNX IR fixes ──
        with run.stage("ir_fixes"):
            ir = apply_ir_fixes(onnx_program.model, FixContext(BACKEND, "ir_fixes", cfg, capture))
        # Axis names and bounds: dims named batch / sequence / height / ..., not s18 / s41.
        axes = axis_names(capture.program, capture.input_names)
        rename_symbolic_dims(onnx_program.model, {a.symbol: a.name for a in axes})
        bounds = axis_bounds(capture.program, axes, model_config(capture.module),
                             capture.input_names)
        if bounds.dims:  # a static program has no dynamic axis: its report has no bounds
            run.report.extra["bounds"] = bounds.as_dict()
        for notice in bounds.notices:
            self.warn(notice)
        fixes = tuple(dict.fromkeys([*fixed.applied, *run.session.observed(REFIXED), *ir.applied]))
        translations = tuple(run.session.observed(TRANSLATED))
        run.report.fixes["applied"] = list(fixes)
        run.report.extra["translations"] = {"used": list(translations)}
        run.report.extra["opset"] = onnx_program.model.opset_imports.get("", None)
        return OnnxLowered(onnx_program, cfg.atol, cfg.rtol, fixes, translations)

    def save(self, lowered: Lowered, staging: Path, run: ExportRun) -> list[Path]:
        """Save ``model.onnx`` into ``staging``; above ``config.external_data_threshold`` bytes
        of initializers with its weights in ``model.onnx.data`` beside it.

        Raises:
            OutputError: (stage ``save``) an external-data location is not a plain file name in
                the staging directory.
        """
        program = lowered.program
        size = sum(
            v.const_value.nbytes
            for v in program.model.graph.initializers.values()
            if v.const_value is not None
        )
        path = staging / "model.onnx"
        if size <= self.config.external_data_threshold:
            program.save(str(path))
            return [path]
        program.save(str(path), external_data=True)
        try:
            data = external_data_files(path)
        except ValueError as e:
            raise OutputError(f"model.onnx was saved with unsafe external data: {e}",
                              stage="save") from e
        run.report.extra["external_data"] = data
        return [path, *(staging / name for name in data)]

    def generation_session(self, path: Path, spec: Any) -> Any:
        """One saved graph of a generative export in the runtime (see
        :meth:`DynamoExporter.generation_session`)."""
        from .generation import open_session

        return open_session(path, spec)

    def runner(self, lowered: Lowered, saved: Sequence[Path], capture: CaptureResult) -> OrtRunner:
        """An ONNX Runtime session over the saved file (its external-data locations checked
        again), or over the in-memory model.

        Raises:
            RuntimeLoadError: ONNX Runtime cannot load the model, or an external-data location
                is not a plain file name beside it.
        """
        model = saved[0] if saved else lowered.program.model_proto.SerializeToString()
        return OrtRunner(model, capture.input_names, list(capture.kwargs), self.config.providers)


def _onnx_cause(e: BaseException) -> str:
    found = re.findall(r"<class '([\w\.]+)'>: ([^\n]+)", str(e))
    if found:
        return f"{found[0][0].split('.')[-1]}: {found[0][1]}"
    return first_line(e)
