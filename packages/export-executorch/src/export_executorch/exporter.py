"""``ExecutorchExporter``: capture with ``torch.export``, five ExecuTorch stages, then the runtime."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree

from export_core.errors import ExportError, LoweringError
from export_core.exporter import (
    CaptureResult,
    DynamoConfig,
    DynamoExporter,
    StagedFile,
    first_line,
    flat_feed,
)
from export_core.fixes import apply_fx_node_fixes, apply_fx_program_fixes
from export_core.patching import PatchSession
from export_core.report import ExportReport
from export_core.stages import StageListener, StageRecorder

from . import workarounds as _workarounds  # noqa: F401  (registers the ExecuTorch workarounds)
from .backends import BackendPreparation, check_backend, prepare_backend
from .bounds import BoundsPlan, apply_dim_bounds, dim_limits
from .delegation import delegation_summary, format_delegation
from .memory import arena_warning, format_bytes, memory_plan
from .runner import ExecutorchRunner

__all__ = ["ExecutorchConfig", "ExecutorchExporter", "PROGRAM_NAME"]

PROGRAM_NAME = "model.pte"
"""File name of the program in the output directory."""


@dataclass
class ExecutorchConfig(DynamoConfig):
    """Options of an ExecuTorch export.

    Attributes:
        backend: ``"xnnpack"`` (default), ``"portable"`` or ``"cuda"``.
        max_batch: upper bound of batch axes (``None``: 8).
        max_seq: upper bound of sequence axes (``None``: the config's position limit, at most
            512).
        max_image_size: upper bound of image height / width (``None``: the config's
            ``image_size``, else 224).
        max_audio_samples: upper bound of waveform axes, in samples (``None``: 1 s at the
            config's ``sampling_rate``, else 16000).

    A derived bound (``None``) below the example inputs' size is raised to it; see
    :mod:`export_executorch.bounds`.
    """

    backend: str = "xnnpack"
    max_batch: int | None = None
    max_seq: int | None = None
    max_image_size: int | None = None
    max_audio_samples: int | None = None


def _model_config(module: torch.nn.Module) -> Any:
    inner = getattr(module, "model", module)
    return getattr(inner, "config", None) or getattr(module, "config", None)


def _cast_floats(value: Any, dtype: torch.dtype) -> Any:
    def cast(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != dtype:
            return x.to(dtype)
        return x

    return pytree.tree_map(cast, value)


class ExecutorchExporter(DynamoExporter):
    """Exports a model to an ExecuTorch ``.pte`` program and checks it in ``executorch.runtime``.

    Stages: (1) backend preparation, before capture; (2) torch patches and (3) ExecuTorch
    patches, installed for the whole export; after capture (4) bounds and FX program fixes,
    (5) FX node fixes; then ``to_edge_transform_and_lower`` and ``to_executorch``.

    Args:
        config: the options; ``config.backend`` picks the backend.
        listener: receives stage events and the one-line delegation summary (``info``).

    Raises:
        InputError: ``config.backend`` is not a known backend.
    """

    backend = "executorch"
    version_packages = ("export-executorch", "executorch")

    def __init__(
        self, config: ExecutorchConfig | None = None, *, listener: StageListener | None = None
    ) -> None:
        super().__init__(config or ExecutorchConfig(), listener=listener)
        self.config: ExecutorchConfig
        check_backend(self.config.backend)
        self.preparation: BackendPreparation | None = None
        self._staged_data: list[Path] = []
        self._bounds: BoundsPlan | None = None

    @property
    def patch_backends(self) -> tuple[str, ...]:  # type: ignore[override]
        """``("executorch.<backend>",)``: the registry key installed for the whole export (torch
        patches and ExecuTorch patches); its parent ``"executorch"`` is included by
        ``export_core.registry.backend_chain``."""
        return (f"executorch.{check_backend(self.config.backend)}",)

    # ── Stage 1: backend preparation ─────────────────────────────────────────────────────────
    def capture(
        self,
        model: torch.nn.Module,
        inputs: dict[str, Any] | tuple[Any, ...],
        recorder: StageRecorder | None = None,
        session: PatchSession | None = None,
    ) -> CaptureResult:
        """Prepare the backend (:data:`~export_executorch.backends._BACKEND_PREPARE`), cast the
        model and float inputs to its dtype, then capture.

        A dtype other than the model's (bfloat16 for CUDA) is applied to a copy of the model;
        the caller's model is not changed and stays the float32 eager reference.

        Raises:
            LoweringError: (stage ``prepare``) the backend cannot be used here.
            CaptureError: ``torch.export`` failed.
        """
        recorder = recorder or StageRecorder(self.listener)
        with recorder.stage("prepare"):
            prep = prepare_backend(self.config.backend)
            self.preparation = prep
            param = next(iter(model.parameters()), None)
            if param is not None and param.is_floating_point() and param.dtype != prep.dtype:
                import copy

                model = copy.deepcopy(model).to(prep.dtype).eval()
                inputs = _cast_floats(inputs, prep.dtype)
            self.atol, self.rtol = max(self.atol, prep.atol), max(self.rtol, prep.rtol)
        return super().capture(model, inputs, recorder, session)

    def lower(self, capture: CaptureResult, recorder: StageRecorder, report: ExportReport) -> Any:
        """Bound the dynamic dimensions, run the FX fixes, lower and emit; returns the
        ``ExecutorchProgramManager``.

        Raises:
            InputError: (stage ``bounds``) a bound is below an example size.
            FixError: an FX program or node fix failed.
            LoweringError: ``to_edge_transform_and_lower`` or ``to_executorch`` failed.
        """
        from executorch.exir import to_edge_transform_and_lower

        cfg = self.config
        prep = self.preparation or prepare_backend(cfg.backend)
        key = prep.registry_key
        applied: list[str] = []
        report.extra["backend"] = prep.name
        report.extra["dtype"] = str(prep.dtype).removeprefix("torch.")
        # ── Stage 2: torch patches ───────────────────────────────────────────────────────────
        # Registered with register_patch("executorch" | "executorch.<backend>", ...); installed
        # by DynamoExporter.export around capture and lowering (patch_backends).
        # ── Stage 3: ExecuTorch patches ──────────────────────────────────────────────────────
        # Same registry and installation: patches on executorch.* internals that crash on valid
        # dynamic-shape graphs (export_executorch.workarounds).
        # ── Stage 4: FX program fixes ────────────────────────────────────────────────────────
        program = capture.program
        with recorder.stage("bounds"):
            limits = dim_limits(
                _model_config(capture.module),
                max_batch=cfg.max_batch, max_seq=cfg.max_seq, max_image_size=cfg.max_image_size,
                max_audio_samples=cfg.max_audio_samples,
            )
            plan = apply_dim_bounds(program, capture.input_names, limits)
            self._bounds = plan
            report.extra["bounds"] = plan.as_dict()
        with recorder.stage("fx_program_fixes"):
            program, names = apply_fx_program_fixes(program, key)
            applied += names
        # ── Stage 5: FX node fixes ───────────────────────────────────────────────────────────
        with recorder.stage("fx_node_fixes"):
            applied += apply_fx_node_fixes(program, key)
        report.fixes["applied"] = applied
        # Lowering: edge dialect, partitioning, delegate preprocessing, then emission.
        with recorder.stage("lower"):
            try:
                if prep.decompositions:
                    program = program.run_decompositions(prep.decompositions)
                edge = to_edge_transform_and_lower(
                    program,
                    partitioner=list(prep.partitioners) or None,
                    compile_config=prep.compile_config,
                )
            except ExportError:
                raise
            except Exception as e:
                raise LoweringError(
                    f"to_edge_transform_and_lower failed for {prep.name}: {first_line(e)}"
                ) from e
            summary = delegation_summary(edge.exported_program())
            report.extra["delegation"] = summary
        with recorder.stage("to_executorch"):
            try:
                manager = edge.to_executorch(prep.backend_config)
            except ExportError:
                raise
            except Exception as e:
                raise LoweringError(f"to_executorch failed: {first_line(e)}", stage="to_executorch") from e
            memory = memory_plan(manager)
            warning = arena_warning(memory["arena_bytes"], report.extra["bounds"])
            if warning:
                memory["warning"] = warning
            report.extra["memory"] = memory
        info = getattr(self.listener, "info", None)
        if callable(info):
            info(f"{format_delegation(summary, prep.name)}; planned arena "
                 f"{format_bytes(memory['arena_bytes'])}")
            if warning:
                info(f"warning: {warning}")
        return manager

    def admissible_validation_sets(
        self,
        capture: CaptureResult,
        inputs: dict[str, Any] | tuple[Any, ...],
        sets: Sequence[dict[str, Any] | tuple[Any, ...]],
        report: ExportReport,
    ) -> list[dict[str, Any] | tuple[Any, ...]]:
        """Drop the validation sets the program cannot accept; the report's
        ``validation_sets_skipped`` counts them.

        A static export (``dynamic=False`` and no ``dynamic_shapes``) accepts only the example
        shapes; a dynamic one accepts any size within the range its bounds stage gave each
        dynamic axis (``report["bounds"]["dims"]``). Axes ``torch.export`` specialised are not
        checked here: a set that changes one fails validation, as it should.
        """
        order = list(capture.kwargs)
        ref = [tuple(x.shape) for x in flat_feed(inputs, order) if isinstance(x, torch.Tensor)]
        static = not self.config.dynamic and self.config.dynamic_shapes is None
        ranges = {(d.input, d.axis): (d.min, d.max) for d in (self._bounds.dims if self._bounds else [])}
        kept = []
        for candidate in sets:
            leaves = [x for x in flat_feed(candidate, order) if isinstance(x, torch.Tensor)]
            shapes = [tuple(x.shape) for x in leaves]
            if static:
                ok = shapes == ref
            else:
                ok = all(lo <= shape[axis] <= hi
                         for name, shape in zip(capture.input_names, shapes)
                         for axis in range(len(shape))
                         for lo, hi in [ranges.get((name, axis), (0, shape[axis]))])
            if ok:
                kept.append(candidate)
        if len(kept) < len(sets):
            report.extra["validation_sets_skipped"] = len(sets) - len(kept)
        return kept

    def save(self, program: Any, out_dir: Path, report: ExportReport) -> list[StagedFile]:
        """Write ``model.pte`` (and, for CUDA, its ``.ptd`` data files) under temporary names."""
        staged = [StagedFile.beside(out_dir / PROGRAM_NAME)]
        self._staged_data = []
        with open(staged[0].tmp, "wb") as f:
            program.write_to_file(f)
        for name, cord in (getattr(program, "_tensor_data", None) or {}).items():
            data = StagedFile.beside(out_dir / (name if name.endswith(".ptd") else f"{name}.ptd"))
            staged.append(data)
            self._staged_data.append(data.tmp)
            with open(data.tmp, "wb") as f:
                cord.write_to_file(f)
        report.extra.setdefault("memory", {})["program_bytes"] = staged[0].tmp.stat().st_size
        return staged

    def runner(self, program: Any, path: Path | None, capture: CaptureResult) -> ExecutorchRunner:
        """Load the program (from ``path`` when saved, else from memory) in
        ``executorch.runtime``.

        Raises:
            RuntimeLoadError: the program cannot be loaded (missing kernel, unsupported op,
                missing delegate).
        """
        prep = self.preparation or prepare_backend(self.config.backend)
        data_path = None
        if prep.external_data:
            data_path = self._external_data(program, path)
        return ExecutorchRunner(
            path if path is not None else program.buffer,
            list(capture.kwargs),
            dtype=prep.dtype,
            data_path=data_path,
            runtime_backend=prep.runtime_backend,
        )

    def _external_data(self, program: Any, path: Path | None) -> Path | None:
        """The ``.ptd`` staged beside a saved program, or one written to a temporary directory
        kept for the runner's lifetime."""
        if path is not None and self._staged_data:
            return self._staged_data[0]
        import tempfile

        self._tmpdir = tempfile.TemporaryDirectory(prefix="export-executorch-")
        program.write_tensor_data_to_file(self._tmpdir.name)
        ptds = sorted(Path(self._tmpdir.name).glob("*.ptd"))
        return ptds[0] if ptds else None
