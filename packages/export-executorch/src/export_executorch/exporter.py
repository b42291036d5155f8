"""``ExecutorchExporter``: backend preparation, the capture, the ExecuTorch stages, the runtime."""

from __future__ import annotations

import copy
import dataclasses
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree

from export_core.budget import check_budget, weight_bytes
from export_core.errors import ExportError, InputError, LoweringError
from export_core.exporter import (
    CaptureResult,
    DynamoConfig,
    DynamoExporter,
    ExportRun,
    Lowered,
    Prepared,
    first_line,
    flat_feed,
)
from export_core.fixes import FixContext, apply_fx_node_fixes, apply_fx_program_fixes
from export_core.stages import StageListener

from . import workarounds as _workarounds  # noqa: F401  (registers the ExecuTorch workarounds)
from .backend_names import ARTIFACT_PATTERNS, PROGRAM_NAME, VERSION_PACKAGES
from .backends import BackendPreparation, check_backend, prepare_backend
from .bounds import ROLE_OPTIONS, BoundsPlan, bound_data_dependent_sizes, symbolic_sizes
from .delegation import delegation_summary, format_delegation
from .memory import arena_warning, format_bytes, memory_plan
from .runner import ExecutorchRunner
from .stages import EXECUTORCH_STAGES
from .workarounds.dim_bounds import bound_dynamic_dims
from .workarounds.python_sym_ops import admit_python_sym_ops, edge_config_admitting

__all__ = ["PROGRAM_NAME", "ExecutorchConfig", "ExecutorchExporter", "ExecutorchLowered"]




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
        max_frames: upper bound of video frame axes (``None``: the config's ``num_frames`` /
            ``frames_per_clip``, else 64).

        max_arena_bytes: budget of the planned activation arena in bytes (``None``: none),
            checked after memory planning, before the save
            (:class:`~export_core.errors.BudgetError`).

    A derived bound (``None``) below the example inputs' size is raised to it; see
    :mod:`export_executorch.bounds`.

    Raises:
        InputError: (at construction) contradictory options (a ``max_*`` bound on a static
            export, and those of :class:`~export_core.exporter.DynamoConfig`).
    """

    backend: str = "xnnpack"
    max_batch: int | None = None
    max_seq: int | None = None
    max_image_size: int | None = None
    max_audio_samples: int | None = None
    max_frames: int | None = None
    max_arena_bytes: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.is_static:
            given = [f"{name}={getattr(self, name)}" for name in ROLE_OPTIONS.values()
                     if getattr(self, name) is not None]
            if given:
                raise InputError(
                    f"{', '.join(given)} contradicts a static export (dynamic=False / --static): "
                    "a static program accepts the example shapes only; drop one of them"
                )

    def _budget_fields(self) -> tuple[str, ...]:
        return ("max_arena_bytes",)


@dataclass(frozen=True)
class ExecutorchLowered(Lowered):
    """The ExecuTorch stages' result.

    Attributes:
        program: the ``ExecutorchProgramManager``.
        preparation: the backend's :class:`~export_executorch.backends.BackendPreparation`.
        bounds: the ranges given to the dynamic dimensions.
        delegation: the delegation summary (nodes delegated, ops left on portable kernels).
        memory: the planned memory (arena bytes, ...).
        fixes: names of the FX program and node fixes that changed the program.
    """

    preparation: BackendPreparation | None = None
    bounds: BoundsPlan | None = None
    delegation: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, Any] = field(default_factory=dict)
    fixes: tuple[str, ...] = ()


def _bounds_text(bounds: BoundsPlan | None) -> str:
    """``"x[0] <= 8, x[1] <= 64"``: the upper bounds the arena is planned for."""
    dims = bounds.dims if bounds is not None else []
    return ", ".join(f"{d.input}[{d.axis}] <= {d.max}" for d in dims) or "static shapes"


def _planning_data_dependent_sizes(backend_config: Any, bounds: BoundsPlan | None) -> Any:
    """``backend_config`` (``None``: ExecuTorch's default) whose symbolic-shape evaluation, the
    pass that turns every tensor's shape into its upper bound for memory planning, first bounds
    the data-dependent sizes (:func:`~export_executorch.bounds.bound_data_dependent_sizes`).

    The bounds go in at that pass, not earlier: ``to_executorch`` re-traces the program and
    creates new unbacked symbols for every data-dependent size before it plans memory."""
    if bounds is None or not bounds.dims:
        return backend_config
    from executorch.exir import ExecutorchBackendConfig
    from executorch.exir.passes.sym_shape_eval_pass import ConstraintBasedSymShapeEvalPass

    class DataDependentBoundsSymShapeEvalPass(ConstraintBasedSymShapeEvalPass):
        def call(self, graph_module: torch.fx.GraphModule) -> Any:
            bound_data_dependent_sizes(symbolic_sizes(graph_module), bounds)
            return super().call(graph_module)

    config = backend_config if backend_config is not None else ExecutorchBackendConfig()
    return dataclasses.replace(config, sym_shape_eval_pass=DataDependentBoundsSymShapeEvalPass())


def _cast_floats(value: Any, dtype: torch.dtype) -> Any:
    def cast(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != dtype:
            return x.to(dtype)
        return x

    return pytree.tree_map(cast, value)


class ExecutorchExporter(DynamoExporter):
    """Exports a model to an ExecuTorch ``.pte`` program and checks it in ``executorch.runtime``.

    Stages (:data:`~export_executorch.stages.EXECUTORCH_STAGES`): backend preparation before the
    capture; after it torch patches and ExecuTorch patches (installed until the program is
    emitted), FX program fixes (the dynamic-dimension bounds first), FX node fixes,
    ``to_edge_transform_and_lower`` and ``to_executorch``.

    Args:
        config: the options; ``config.backend`` picks the backend.
        listener: receives stage events and the one-line delegation summary (``info``).

    Raises:
        InputError: ``config.backend`` is not a known backend.
    """

    stages = EXECUTORCH_STAGES
    version_packages = VERSION_PACKAGES
    artifact_patterns = ARTIFACT_PATTERNS

    def __init__(
        self, config: ExecutorchConfig | None = None, *, listener: StageListener | None = None
    ) -> None:
        super().__init__(config or ExecutorchConfig(), listener=listener)
        self.config: ExecutorchConfig
        check_backend(self.config.backend)

    @property
    def backend(self) -> str:  # type: ignore[override]
        """``"executorch.<backend>"``: the registry key whose workarounds run (its parent
        ``"executorch"`` is included by ``export_core.registry.backend_chain``)."""
        return f"executorch.{check_backend(self.config.backend)}"

    def prepare(
        self, model: torch.nn.Module, inputs: dict[str, Any] | tuple[Any, ...], run: ExportRun
    ) -> Prepared:
        """Prepare the backend (:data:`~export_executorch.backends._BACKEND_PREPARE`) and cast
        the model and float inputs to its dtype.

        A dtype other than the model's (bfloat16 for CUDA) is applied to a copy of the model;
        the caller's model is not changed and stays the float32 eager reference.

        Raises:
            LoweringError: (stage ``prepare``) the backend cannot be used here.
            InputError: (stage ``prepare``) a shared capture was given for a backend that
                captures at another dtype.
        """
        # ── ExecuTorch stage 1: backend preparation ──
        with run.stage("prepare"):
            prep = prepare_backend(self.config.backend)
            param = next(iter(model.parameters()), None)
            if param is not None and param.is_floating_point() and param.dtype != prep.dtype:
                if run.shared_capture:
                    raise InputError(
                        f"the {prep.name} backend captures at {prep.dtype}; a capture shared "
                        f"from a {param.dtype} model cannot be used, export without capture="
                    )
                model = copy.deepcopy(model).to(prep.dtype).eval()
                inputs = _cast_floats(inputs, prep.dtype)
            run.report.extra["backend"] = prep.name
            run.report.extra["dtype"] = str(prep.dtype).removeprefix("torch.")
        return Prepared(model, inputs, prep)

    def lower(self, capture: CaptureResult, prepared: Prepared, run: ExportRun) -> ExecutorchLowered:
        """Bound the dynamic dimensions, run the FX fixes, lower and emit.

        Raises:
            InputError: (stage ``fx_program_fixes``) a bound is below an example size.
            BudgetError: the weights exceed ``max_artifact_bytes`` (stage ``lower``, before
                lowering) or the planned arena ``max_arena_bytes`` (stage ``to_executorch``,
                before the save).
            FixError: an FX program or node fix failed.
            LoweringError: ``to_edge_transform_and_lower`` or ``to_executorch`` failed.
        """
        cfg = self.config
        prep: BackendPreparation = prepared.backend
        key = prep.registry_key
        report = run.report
        notices: list[str] = []
        with ExitStack() as patches:
            # ── ExecuTorch stage 2: torch patches ──
            run.install_patches(patches, key, "torch_patches")
            # ── ExecuTorch stage 3: ExecuTorch patches ──
            run.install_patches(patches, key, "executorch_patches")
            # ── ExecuTorch stage 4: FX program fixes ──
            with run.stage("fx_program_fixes"):
                context = FixContext(key, "fx_program_fixes", cfg, capture)
                program_fixes = apply_fx_program_fixes(capture.program, key, context,
                                                       stage="fx_program_fixes")
                bounds: BoundsPlan | None = program_fixes.details.get(bound_dynamic_dims.__name__)
                if bounds is not None:
                    # a static program has no dynamic axis: it reports no bounds
                    report.extra["bounds"] = bounds.as_dict() if bounds.dims else None
                    # the shape environment is shared with other copies of the capture
                    patches.callback(bounds.restore_shape_env)
                    notices.extend(bounds.notices)
                admitted = program_fixes.details.get(admit_python_sym_ops.__name__)
                if admitted is not None:
                    report.extra["admitted_sym_functions"] = admitted.names
            # ── ExecuTorch stage 5: FX node fixes ──
            with run.stage("fx_node_fixes"):
                node_fixes = apply_fx_node_fixes(program_fixes.program, key, stage="fx_node_fixes")
            fixes = tuple(dict.fromkeys([*program_fixes.applied, *node_fixes.applied]))
            report.fixes["applied"] = list(fixes)
            # ── ExecuTorch stage 6: edge lowering and partitioning ──
            with run.stage("lower"):
                from executorch.exir import to_edge_transform_and_lower  # seconds, the first time

                check_budget("the model's weights (a lower bound of model.pte)",
                             weight_bytes(capture.module), cfg.max_artifact_bytes,
                             "max_artifact_bytes", "lower")
                try:
                    program = node_fixes.program
                    if prep.decompositions:
                        program = program.run_decompositions(prep.decompositions)
                    edge = to_edge_transform_and_lower(
                        program,
                        partitioner=list(prep.partitioners) or None,
                        compile_config=edge_config_admitting(prep.compile_config, admitted),
                    )
                except ExportError:
                    raise
                except Exception as e:
                    raise LoweringError(
                        f"to_edge_transform_and_lower failed for {prep.name}: {first_line(e)}"
                    ) from e
                summary = delegation_summary(edge.exported_program())
                report.extra["delegation"] = summary
            # ── ExecuTorch stage 7: ExecuTorch program ──
            with run.stage("to_executorch"):
                try:
                    manager = edge.to_executorch(_planning_data_dependent_sizes(
                        prep.backend_config, bounds))
                except ExportError:
                    raise
                except Exception as e:
                    raise LoweringError(f"to_executorch failed: {first_line(e)}", stage="to_executorch") from e
                memory = memory_plan(manager)
                check_budget(f"the planned activation arena ({_bounds_text(bounds)})",
                             memory["arena_bytes"], cfg.max_arena_bytes, "max_arena_bytes",
                             "to_executorch")
                warning = arena_warning(memory["arena_bytes"], report.extra.get("bounds") or {})
                if warning:
                    memory["warning"] = warning
                report.extra["memory"] = memory
                if bounds is not None and bounds.dims:  # now with the data-dependent sizes
                    report.extra["bounds"] = bounds.as_dict()
        info = getattr(self.listener, "info", None)
        if callable(info):
            info(f"{format_delegation(summary, prep.name)}; planned arena "
                 f"{format_bytes(memory['arena_bytes'])}")
            if warning:
                info(f"warning: {warning}")
        for notice in notices:
            self.warn(notice)
        return ExecutorchLowered(
            manager, max(cfg.atol, prep.atol), max(cfg.rtol, prep.rtol),
            preparation=prep, bounds=bounds, delegation=summary, memory=memory, fixes=fixes,
        )

    def admissible_validation_sets(
        self,
        capture: CaptureResult,
        lowered: Lowered,
        inputs: dict[str, Any] | tuple[Any, ...],
        sets: Sequence[dict[str, Any] | tuple[Any, ...]],
        run: ExportRun,
    ) -> list[dict[str, Any] | tuple[Any, ...]]:
        """Drop the validation sets the program cannot accept; the report's
        ``validation_sets_skipped`` counts them.

        A static export (``dynamic=False`` and no ``dynamic_shapes``) accepts only the example
        shapes; a dynamic one accepts any size within the range its bounds gave each dynamic
        axis. Axes ``torch.export`` specialised are not checked here: a set that changes one
        fails validation, as it should.
        """
        bounds = getattr(lowered, "bounds", None)
        order = list(capture.kwargs)
        ref = [tuple(x.shape) for x in flat_feed(inputs, order) if isinstance(x, torch.Tensor)]
        ranges = {(d.input, d.axis): (d.min, d.max) for d in (bounds.dims if bounds else [])}
        kept = []
        for candidate in sets:
            leaves = [x for x in flat_feed(candidate, order) if isinstance(x, torch.Tensor)]
            shapes = [tuple(x.shape) for x in leaves]
            if self.config.is_static:
                ok = shapes == ref
            else:
                ok = all(lo <= shape[axis] <= hi
                         for name, shape in zip(capture.input_names, shapes)
                         for axis in range(len(shape))
                         for lo, hi in [ranges.get((name, axis), (0, shape[axis]))])
            if ok:
                kept.append(candidate)
        if len(kept) < len(sets):
            run.report.extra["validation_sets_skipped"] = len(sets) - len(kept)
        return kept

    def save(self, lowered: Lowered, staging: Path, run: ExportRun) -> list[Path]:
        """Write ``model.pte`` (and, for CUDA, its ``.ptd`` data files) into ``staging``; the
        program is first, its data files follow."""
        program = lowered.program
        saved = [staging / PROGRAM_NAME]
        with open(saved[0], "wb") as f:
            program.write_to_file(f)
        for name, cord in (getattr(program, "_tensor_data", None) or {}).items():
            data = staging / (name if name.endswith(".ptd") else f"{name}.ptd")
            saved.append(data)
            with open(data, "wb") as f:
                cord.write_to_file(f)
        run.report.extra.setdefault("memory", {})["program_bytes"] = saved[0].stat().st_size
        return saved

    def generation_session(self, path: Path, spec: Any) -> Any:
        """One saved graph of a generative export in the runtime (see
        :meth:`DynamoExporter.generation_session`)."""
        from .generation import open_session

        return open_session(path, spec)

    def runner(
        self, lowered: Lowered, saved: Sequence[Path], capture: CaptureResult
    ) -> ExecutorchRunner:
        """Load the program (from the staged file when saved, else from memory) in
        ``executorch.runtime``.

        Raises:
            RuntimeLoadError: the program cannot be loaded (missing kernel, unsupported op,
                missing delegate).
        """
        prep = getattr(lowered, "preparation", None) or prepare_backend(self.config.backend)
        program = lowered.program
        data_path: Path | None = None
        keepalive: tempfile.TemporaryDirectory[str] | None = None
        if prep.external_data:
            if len(saved) > 1:
                data_path = saved[1]
            else:
                keepalive = tempfile.TemporaryDirectory(prefix="export-executorch-")
                program.write_tensor_data_to_file(keepalive.name)
                ptds = sorted(Path(keepalive.name).glob("*.ptd"))
                data_path = ptds[0] if ptds else None
        return ExecutorchRunner(
            saved[0] if saved else program.buffer,
            list(capture.kwargs),
            dtype=prep.dtype,
            data_path=data_path,
            runtime_backend=prep.runtime_backend,
            keepalive=keepalive,
        )
