"""``DynamoExporter``: the capture every backend shares, around ``torch.export.export``.

Backend exporters subclass it, declare their stages (:class:`~export_core.stages.StagePlan`) and
implement the hooks the export flow calls in stage order: ``prepare`` (before capture), ``lower``
(the backend's stages after capture), ``save``, ``runner`` and ``admissible_validation_sets``.
Each hook takes the previous step's typed result and returns its own; the state of one export
(:class:`ExportRun`) is passed along, never kept on the exporter.
"""

from __future__ import annotations

import copy
import inspect
import logging
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree

from . import workarounds as _workarounds  # noqa: F401  (registers the capture-level patches)
from .dynamic_shapes import (
    auto_dynamic_shapes,
    check_dynamic_shapes,
    resized_inputs,
    revalued_inputs,
    static_image_axes,
)
from .errors import CaptureError, ExportError, InputError, OutputError, ValidationError, first_line
from .fixes import apply_fx_node_fixes
from .naming import distinct_output_names, leaf_names
from .output import commit_export, lock_output, prepare_output, record_failure, staging_directory
from .patching import EXPORT_LOCK, PatchSession, apply_patches, output_repacks
from .pytree import register_pytree_nodes
from .registry import DYNAMO_PLAN
from .report import ExportReport, package_versions
from .stages import StageListener, StagePlan, StageRecorder, StageTiming
from .symbolic_budget import budget_exceeded, symbolic_budget
from .validation import VACUOUS, ValidationResult, input_shapes, random_ops, skipped_validation
from .validation import validate as _validate
from .warning_filters import quiet_unactionable_warnings

__all__ = [
    "DynamoConfig",
    "CaptureResult",
    "DynamoExporter",
    "ExportResult",
    "ExportRun",
    "Lowered",
    "Prepared",
    "flat_feed",
    "SignatureAdapter",
    "describe_inputs",
    "first_line",
    "STATEFUL_CACHE_ATTRS",
]

logger = logging.getLogger(__name__)

STATEFUL_CACHE_ATTRS: tuple[str, ...] = (
    "_cos_cached",
    "_sin_cached",
    "_seq_len_cached",
    "cos_cached",
    "sin_cached",
    "max_seq_len_cached",
    "original_max_seq_len",
)
"""Attributes some models (re)compute inside ``forward`` (rotary caches); reset after capture so
tensors created while tracing do not leak into later eager calls."""


def describe_inputs(inputs: dict[str, Any] | tuple[Any, ...], names: Sequence[str] = ()) -> str:
    """``"x: float32 [2, 3], mask: int64 [2]"``: each top-level tensor input's dtype and shape
    (other values by type), for messages about inputs that do not fit the model."""
    items = inputs.items() if isinstance(inputs, dict) else zip(
        [*names, *(f"input_{i}" for i in range(len(names), len(inputs)))], inputs)
    parts = []
    for name, value in items:
        if isinstance(value, torch.Tensor):
            parts.append(f"{name}: {str(value.dtype).removeprefix('torch.')} {list(value.shape)}")
        else:
            parts.append(f"{name}: {type(value).__name__}")
    return ", ".join(parts)


@dataclass
class DynamoConfig:
    """Options of the capture and of the comparison with eager.

    Attributes:
        dynamic: make every axis dynamic (``Dim.AUTO``) unless ``dynamic_shapes`` is given.
        dynamic_shapes: an explicit ``torch.export`` ``dynamic_shapes`` structure; overrides
            ``dynamic``.
        strict: trace with TorchDynamo (``strict=True``) instead of the Python interpreter.
        constant_kwargs: ``forward`` keyword arguments fixed at export time (``use_cache=False``).
        atol, rtol: tolerances of the comparison with eager, per element (a backend may raise
            them to its own minimum for one export, e.g. bfloat16 on CUDA; never lowers them).
        max_artifact_bytes: budget of the artifact in bytes (``None``: none). The weights of
            the traced model are checked against it after the capture, before the backend's
            expensive stage (translation, lowering): :class:`~export_core.errors.BudgetError`.
        symbolic_budget_s: seconds of symbolic shape reasoning (guard evaluation and
            simplification) a capture with ``Dim.AUTO`` image axes may take before the model is
            captured again with a static height and width (the report's ``capture_strategy``
            then starts with ``static-image-axes``); ``None``: no budget, no fallback. Windowed
            vision attention (Swin) never finishes otherwise (pytorch/pytorch#141675).

    Raises:
        InputError: (at construction) contradictory options: ``dynamic=False`` with
            ``dynamic_shapes`` (a static export has none), a budget below 1 byte, a
            ``symbolic_budget_s`` that is not positive.
    """

    dynamic: bool = True
    dynamic_shapes: Any = None
    strict: bool = False
    constant_kwargs: dict[str, Any] = field(default_factory=dict)
    atol: float = 1e-4
    rtol: float = 1e-3
    max_artifact_bytes: int | None = None
    symbolic_budget_s: float | None = 30.0

    def __post_init__(self) -> None:
        if not self.dynamic and self.dynamic_shapes is not None:
            raise InputError(
                "dynamic=False contradicts dynamic_shapes: a static export has no dynamic axes; "
                "pass one of them"
            )
        if self.symbolic_budget_s is not None and not self.symbolic_budget_s > 0:
            raise InputError(f"symbolic_budget_s must be a positive number of seconds or None, "
                             f"got {self.symbolic_budget_s!r}")
        for name in ("max_artifact_bytes", *self._budget_fields()):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or value < 1):
                raise InputError(f"{name} must be a positive number of bytes, got {value!r}")

    def _budget_fields(self) -> tuple[str, ...]:
        """A backend's own budget options besides ``max_artifact_bytes``, checked like it."""
        return ()

    @property
    def is_static(self) -> bool:
        """Whether the export has static shapes (not dynamic and no ``dynamic_shapes``)."""
        return not self.dynamic and self.dynamic_shapes is None


@dataclass(frozen=True)
class CaptureResult:
    """The outcome of :meth:`DynamoExporter.capture`.

    A capture is backend-neutral (only the ``"dynamo"`` patches are installed while tracing), so
    one capture can be given to several backends' ``export(..., capture=...)``; each works on
    its own copy of the program (:meth:`fork`).

    Attributes:
        program: the ``ExportedProgram``.
        module: the module that was traced (the model behind a :class:`SignatureAdapter`).
        args, kwargs: the example inputs, as passed to ``torch.export.export``.
        dynamic_shapes: the ``dynamic_shapes`` used (``None`` for a static export).
        input_names: artifact input names, in order.
        output_names: artifact output names, in order.
        patches: the ``"dynamo"`` patches installed / fired / skipped while tracing.
        strategy: how ``torch.export`` succeeded (see :func:`_torch_export`).
        seconds: wall time of the capture stages, in seconds.
        fixes: the ``"dynamo"`` FX node fixes that rewrote the program (capture stage
            ``capture_node_fixes``), in the order they first fired.
    """

    program: torch.export.ExportedProgram
    module: torch.nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    dynamic_shapes: Any
    input_names: list[str]
    output_names: list[str]
    patches: PatchSession
    strategy: str = "default"
    seconds: float = 0.0
    fixes: tuple[str, ...] = ()

    def fork(self) -> CaptureResult:
        """A copy whose program can be rewritten without touching this one's (graph, node
        metadata, range constraints and symbol ranges are copied; weights are shared, no fix
        rewrites them)."""
        program = copy.deepcopy(self.program)
        _drop_pending_unbacked_symbols(program)
        return replace(self, program=program)


def _drop_pending_unbacked_symbols(program: torch.export.ExportedProgram) -> None:
    """Forget the unbacked symbols an earlier consumer of the capture created and never bound.

    The copies of a capture share its shape environment. A backend that re-traces its copy
    (ONNX's decompositions) can leave fresh unbacked symbols pending there; the next backend's
    re-trace then finds them at its first node and fails with ``PendingUnbackedSymbolNotFound:
    Pending unbacked symbols {u18, ...} not in returned outputs [Parameter(...)]``. They belong
    to no node of this copy.
    """
    for node in program.graph.nodes:
        value = node.meta.get("val")
        env = getattr(getattr(value, "fake_mode", None), "shape_env", None)
        if env is not None:
            env.pending_fresh_unbacked_symbols.clear()
            return


@dataclass
class ExportRun:
    """The state of one export, handed from stage to stage and never stored on the exporter.

    Attributes:
        plan: the exporter's stage plan.
        recorder: times the stages.
        report: the report being filled.
        session: every patch installed and fired in this export.
        shared_capture: the capture was given by the caller (``export(..., capture=...)``).
    """

    plan: StagePlan
    recorder: StageRecorder
    report: ExportReport
    session: PatchSession = field(default_factory=PatchSession)
    shared_capture: bool = False

    def stage(self, name: str) -> AbstractContextManager[None]:
        """Time the ``with`` block as stage ``name`` (see :class:`StageRecorder`)."""
        return self.recorder.stage(name)

    def install_patches(
        self, stack: ExitStack, backend: str, stage: str, session: PatchSession | None = None
    ) -> None:
        """Run patch stage ``stage``: install ``backend``'s patches registered at it, restored
        when ``stack`` closes (which also lets them see an exception raised before that).

        Args:
            stack: the ``ExitStack`` spanning the steps the patches must stay for.
            backend: the registry key (its parent keys' patches are installed too).
            stage: the patch stage.
            session: records what was installed and fired (default: this run's session).
        """
        with self.stage(stage):
            stack.enter_context(
                apply_patches(backend, self.session if session is None else session, stage=stage)
            )


@dataclass(frozen=True)
class Prepared:
    """What the backend's preparation returns (before capture).

    Attributes:
        model: the model to capture (a copy when the backend changed its dtype).
        inputs: the example inputs to capture with (cast like the model).
        backend: the backend's own preparation record (``None`` for the base exporter).
    """

    model: torch.nn.Module
    inputs: dict[str, Any] | tuple[Any, ...]
    backend: Any = None


@dataclass(frozen=True)
class Lowered:
    """What the backend's stages return: the in-memory program and what the later steps need.

    Backends return a subclass with their own fields (bounds, data files, ...).

    Attributes:
        program: the in-memory program (``ONNXProgram``, ``ExecutorchProgramManager``, or the
            ``ExportedProgram`` for the base exporter).
        atol, rtol: the tolerances this artifact is compared with.
    """

    program: Any
    atol: float
    rtol: float


def canonical_output(out: Any) -> Any:
    """``out`` rebuilt through its pytree (flatten, then unflatten), its numbers left out.

    A ``ModelOutput`` flattens in the order its fields were *assigned*; one rebuilt from its
    leaves (what ``torch.export``'s re-traces, such as ``run_decompositions``, do) has them in
    declaration order. A model that fills a field late (InternVL's and Aya Vision's
    ``image_outputs.pooler_output``, set after ``hidden_states``) would otherwise flatten in one
    order in eager and the capture, and in another in the re-traced program: the artifact's
    outputs would be named and compared out of order.

    Python numbers among the leaves (MaskFormer-Swin's ``hidden_states_spatial_dimensions``,
    ints of the image sides) become ``None``: with dynamic image axes they are ``SymInt`` s
    during the capture, which the program returns as outputs (ten scalar outputs of the ONNX
    model beside its two tensors) while an artifact's outputs are the model's tensors
    (:func:`~export_core.naming.leaf_names` with ``tensors_only``). Tensors are unchanged.
    """
    leaves, spec = pytree.tree_flatten(out)
    leaves = [None if isinstance(leaf, int | float | torch.SymInt | torch.SymFloat | torch.SymBool)
              else leaf for leaf in leaves]
    return pytree.tree_unflatten(leaves, spec)


class SignatureAdapter(torch.nn.Module):
    """Gives a model a flat ``forward`` signature named after its inputs.

    Models whose ``forward`` takes ``**kwargs`` would otherwise bundle inputs into one argument;
    the adapter's ``forward`` takes exactly ``input_names`` (positional or keyword) and calls the
    model with them as keywords, plus ``constant_kwargs``; its output is in the canonical
    order of :func:`canonical_output`.
    """

    def __init__(
        self, model: torch.nn.Module, input_names: Sequence[str], constant_kwargs: dict[str, Any]
    ) -> None:
        super().__init__()
        self.model = model
        self.input_names = tuple(input_names)
        self.constant_kwargs = dict(constant_kwargs)
        params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in input_names]
        sig = inspect.Signature(params)

        def forward(*args: Any, **kwargs: Any) -> Any:
            bound = sig.bind(*args, **kwargs)
            return canonical_output(self.model(**bound.arguments, **self.constant_kwargs))

        forward.__signature__ = sig  # type: ignore[attr-defined]
        self.forward = forward  # type: ignore[method-assign]

    def __deepcopy__(self, memo: dict[int, Any]) -> SignatureAdapter:
        """A copy around a copy of the model (the ``forward`` closure would call the original)."""
        return type(self)(copy.deepcopy(self.model, memo), self.input_names,
                          copy.deepcopy(self.constant_kwargs, memo))


@contextmanager
def _state_cleanup(model: torch.nn.Module) -> Iterator[None]:
    """Restore tensor attributes that ``forward`` creates or replaces during tracing."""
    saved: list[tuple[torch.nn.Module, dict[str, Any]]] = []
    for m in model.modules():
        snap = {
            k: v
            for k, v in vars(m).items()
            if k in STATEFUL_CACHE_ATTRS or isinstance(v, torch.Tensor)
        }
        saved.append((m, snap))
    try:
        yield
    finally:
        for m, snap in saved:
            for k in list(vars(m)):
                if k in snap:
                    continue
                if k in STATEFUL_CACHE_ATTRS or isinstance(vars(m)[k], torch.Tensor):
                    delattr(m, k)
            for k, v in snap.items():
                m.__dict__[k] = v


@contextmanager
def eval_mode(model: torch.nn.Module) -> Iterator[None]:
    """``model`` and every submodule in eval mode for the block; then each module's own
    ``training`` flag again (``model.train(was_training)`` would also switch submodules that were
    in eval mode under a wrapper in training mode, and leave their dropout on)."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training


def _is_constraint_violation(e: BaseException) -> bool:
    return "Constraints violated" in str(e) or "constraint" in type(e).__name__.lower()


UNSOLVABLE_CONSTRAINT = "cannot be solved using"
"""How torch's dimension-constraint solver says it gave up on a guard (its ``NotImplementedError``
for a congruence such as ``Eq(-x/2 + 4*((x/2)//4), 0)``, pytorch/pytorch#131897)."""


def unsolvable_constraint(error: BaseException) -> BaseException | None:
    """The solver's ``NotImplementedError`` behind ``error`` (itself, or in its cause/context
    chain), or ``None``: torch raises it instead of a constraint violation when a guard on a
    dynamic axis is a divisibility condition (an image side that must be a multiple of 8)."""
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        if isinstance(e, NotImplementedError) and UNSOLVABLE_CONSTRAINT in str(e):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None


def _torch_export(
    module: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    dynamic_shapes: Any,
    strict: bool,
    *,
    fallback_shapes: Any = None,
    symbolic_budget_s: float | None = None,
) -> tuple[torch.export.ExportedProgram, str]:
    """:func:`_export_attempts` on ``dynamic_shapes``, and on ``fallback_shapes`` when their
    symbolic shape reasoning runs over budget or ends in a constraint torch cannot solve.

    With ``fallback_shapes`` (the same structure with the image axes static,
    :func:`~export_core.dynamic_shapes.static_image_axes`) and a ``symbolic_budget_s``, the
    first capture's guard evaluation and simplification are limited to that many seconds
    (:func:`~export_core.symbolic_budget.symbolic_budget`); when they take longer (windowed
    vision attention with a dynamic height and width: pytorch/pytorch#141675), or when torch's
    constraint solver gives up on a divisibility guard (:func:`unsolvable_constraint`,
    pytorch/pytorch#131897: EfficientLoFTR's image sides must be multiples of 8), the model is
    captured again on ``fallback_shapes``, and the strategy is prefixed ``static-image-axes``.

    Returns:
        The program and the strategy that produced it (see :func:`_export_attempts`).

    Raises:
        CaptureError: every attempt failed.
    """
    if fallback_shapes is None or symbolic_budget_s is None:
        return _export_attempts(module, args, kwargs, dynamic_shapes, strict)
    try:
        with symbolic_budget(symbolic_budget_s):
            return _export_attempts(module, args, kwargs, dynamic_shapes, strict)
    except CaptureError as e:
        over = budget_exceeded(e)
        unsolvable = unsolvable_constraint(e) if over is None else None
        if over is None and unsolvable is None:
            raise
        reason = (str(over) if over is not None else
                  "torch's constraint solver gave up on a guard (" + " ".join(str(unsolvable).split()) + ")")
        logger.warning("capture: %s with dynamic image axes; capturing again with static "
                       "height and width", reason)
    program, strategy = _export_attempts(module, args, kwargs, fallback_shapes, strict)
    return program, "static-image-axes" + ("" if strategy == "default" else f"+{strategy}")


def _export_attempts(
    module: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    dynamic_shapes: Any,
    strict: bool,
) -> tuple[torch.export.ExportedProgram, str]:
    """``torch.export.export`` with a fallback for declared ranges the tracer cannot prove.

    A plain export comes first. When it fails because a declared range is wider than what the
    tracer can prove from the example (a guard such as ``n >= 5`` on a ``Dim(min=1)``: sizes
    are assumed to be >= 2 and some branches specialise), it retries with size-oblivious
    reasoning for backed sizes and runtime asserts instead of guards, as ``torch.onnx``'s own
    capture does; then once more with torch's suggested fixes applied to ``dynamic_shapes``.

    Returns:
        The program and the strategy that produced it: ``"default"``, ``"size-oblivious"`` or
        ``"size-oblivious+suggested-fixes"``.

    Raises:
        CaptureError: every attempt failed (the message is the first attempt's error).
    """
    try:
        return torch.export.export(module, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict), "default"
    except Exception as first:
        if dynamic_shapes is None or not _is_constraint_violation(first) or budget_exceeded(first):
            raise CaptureError(f"torch.export failed: {first_line(first)}") from first
        original: BaseException = first
        error: BaseException = first
    from torch.fx.experimental import _config as fx_config

    with fx_config.patch(backed_size_oblivious=True):
        try:
            program = torch.export.export(
                module, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict,
                prefer_deferred_runtime_asserts_over_guards=True,
            )
            return program, "size-oblivious"
        except Exception as e:
            if budget_exceeded(e):
                raise CaptureError(f"torch.export failed: {first_line(e)}") from e
            error = e
        try:
            from torch.export.dynamic_shapes import refine_dynamic_shapes_from_suggested_fixes

            refined = refine_dynamic_shapes_from_suggested_fixes(str(error), dynamic_shapes)
            program = torch.export.export(
                module, args, kwargs, dynamic_shapes=refined, strict=strict,
                prefer_deferred_runtime_asserts_over_guards=True,
            )
            return program, "size-oblivious+suggested-fixes"
        except Exception as e:
            if budget_exceeded(e):
                raise CaptureError(f"torch.export failed: {first_line(e)}") from e
    raise CaptureError(f"torch.export failed: {first_line(original)}") from original


class DynamoExporter:
    """Traces a model into an ``ExportedProgram`` with the capture-level workarounds.

    Subclasses declare their stages (:attr:`stages`, a :class:`~export_core.stages.StagePlan`)
    and implement the hooks :meth:`prepare`, :meth:`lower`, :meth:`save`, :meth:`runner` and
    :meth:`admissible_validation_sets`; each hook takes the previous step's typed result and
    returns its own. Nothing of one export is stored on the exporter, so one exporter object can
    run many exports, also from several threads (they are serialized by
    :data:`~export_core.patching.EXPORT_LOCK` while patches are installed).

    Args:
        config: the options.
        listener: receives stage start/finish events (progress display).
    """

    backend = "dynamo"
    """The registry key whose workarounds the backend stages run."""
    stages: StagePlan = DYNAMO_PLAN
    """The ordered stages an export runs."""
    version_packages: tuple[str, ...] = ()
    """Extra packages whose versions go in the report."""
    artifact_patterns: tuple[str, ...] = ("model.pt2",)
    """Glob patterns of the files this exporter writes into an output directory; a failed export
    removes them when no successful export's report vouches for them (:mod:`export_core.output`)."""

    def __init__(self, config: DynamoConfig | None = None, *, listener: StageListener | None = None):
        self.config = config or DynamoConfig()
        self.listener = listener

    def configured(self, **changes: Any) -> DynamoExporter:
        """A new exporter of the same kind and listener, with ``changes`` applied to a copy of
        the config (``exporter.configured(dynamic=False)``)."""
        return type(self)(replace(self.config, **changes), listener=self.listener)

    def warn(self, message: str) -> None:
        """Tell the user ``message`` (a line starting ``warning:``): through the listener's
        ``warning`` where it has one (the CLI's progress display), else the module's logger."""
        warn = getattr(self.listener, "warning", None)
        if callable(warn):
            warn(message)
        else:
            logging.getLogger(type(self).__module__).warning("%s", message)

    def new_run(self, task: str | None = None) -> ExportRun:
        """The fresh state of one export."""
        report = ExportReport(task=task, versions=package_versions(*self.version_packages))
        return ExportRun(self.stages, StageRecorder(self.stages, self.listener), report)

    def export(
        self,
        model: torch.nn.Module,
        inputs: dict[str, Any] | tuple[Any, ...],
        *,
        output: str | os.PathLike[str] | None = None,
        validate: bool = True,
        validation_inputs: Sequence[dict[str, Any] | tuple[Any, ...]] | None = None,
        task: str | None = None,
        capture: CaptureResult | None = None,
        earlier: Sequence[StageTiming] = (),
    ) -> ExportResult:
        """Capture, lower, save, load and validate; write the report.

        Stages run in the order of :attr:`stages`: ``output`` (directory checks, the output
        lock, a fresh staging directory), the backend's preparation, the capture stages (skipped
        when ``capture`` is given), the backend's stages (:meth:`lower`), ``save`` (into the
        staging directory), ``runtime`` (load the artifact from there), ``validate`` (compare
        with eager at the export shapes and at ``validation_inputs``, or at shapes derived from
        the dynamic axes; a static export at its own shapes on a second set of input values),
        then the files and the report are moved into ``output`` (:func:`export_core.output.commit_export`).
        On failure every patch is restored, an earlier successful export in ``output`` is left
        as it was and the failed report is written by :func:`export_core.output.record_failure`;
        on an interrupt (``KeyboardInterrupt``, SIGTERM) nothing in ``output`` changes.

        Args:
            model: any ``torch.nn.Module``.
            inputs: ``forward`` keyword arguments (dict) or positional arguments (tuple).
            output: directory for the artifact and ``export_report.json``; ``None`` keeps
                everything in memory.
            validate: compare with eager PyTorch (``False``: the report's validation is
                ``{"status": "skipped", "passed": null}``).
            validation_inputs: further input sets at other shapes (ignored by a static export).
                When the program's bounds admit none of them, the shapes derived from the
                dynamic axes are validated instead (the report's ``validation_sets_derived``).
            task: recorded in the report.
            capture: a capture of ``model`` on ``inputs`` made earlier (by :meth:`capture`,
                with the same dynamic-shape options): its program is copied and lowered, so
                several backends can share one capture.
            earlier: stages the caller timed before this export (the CLI's ``imports``,
                ``load`` and ``inputs``); they open the report's ``stages``.

        The work of the call is inside its stages (a backend's imports inside the stage that
        needs them), so the report's stage seconds add up to the call's wall time, less the
        bookkeeping around them (the report, moving the validated files into ``output``:
        milliseconds).

        Returns:
            An :class:`ExportResult`.

        Raises:
            ExportError: a subclass naming the failed stage (``CaptureError``,
                ``TranslationError``, ``LoweringError``, ``RuntimeLoadError``,
                ``ValidationError``, ``OutputError`` (also: another export holds ``output``),
                ...).
        """
        run = self.new_run(task)
        run.recorder.timings.extend(earlier)
        run.shared_capture = capture is not None
        report, recorder = run.report, run.recorder
        out_dir: Path | None = None
        staging: Path | None = None
        saved: list[Path] = []
        lowered: Lowered | None = None
        verdict: ValidationResult | None = None
        final_path: Path | None = None
        with ExitStack() as held, quiet_unactionable_warnings():
            try:
                # ── Artifact stage 1: output directory, lock and staging ──
                if output is not None:
                    with run.stage("output"):
                        out_dir = prepare_output(output)
                        held.enter_context(lock_output(out_dir))
                        staging = held.enter_context(staging_directory(out_dir))
                # eval mode until the comparison with eager is done (dropout off on both sides)
                held.enter_context(eval_mode(model))
                with EXPORT_LOCK:
                    prepared = self.prepare(model, inputs, run)
                    if capture is None:
                        capture = self.capture(prepared.model, prepared.inputs, run=run)
                    else:
                        capture = capture.fork()
                        run.session.merge(capture.patches)
                    report.inputs, report.outputs = capture.input_names, capture.output_names
                    report.extra["capture_strategy"] = capture.strategy
                    lowered = self.lower(capture, prepared, run)
                    report.fixes["applied"] = list(dict.fromkeys(
                        [*capture.fixes, *report.fixes.get("applied", [])]))
                # ── Artifact stage 2: save into the staging directory ──
                if staging is not None:
                    with run.stage("save"):
                        try:
                            saved = self.save(lowered, staging, run)
                        except ExportError:
                            raise
                        except OSError as e:
                            raise OutputError(f"cannot write the artifact into {staging}: {e}") from e
                # ── Artifact stage 3: load in the runtime ──
                with run.stage("runtime"):
                    runner = self.runner(lowered, saved, capture)
                # ── Artifact stage 4: compare with eager ──
                if validate:
                    # the eager reference runs under the lock too: a torch.export trace in another
                    # thread patches global torch state (Module.__call__, the fake mode)
                    with EXPORT_LOCK, run.stage("validate"):
                        static = self.config.is_static
                        if static:
                            # a static artifact accepts its own shapes only: other values there,
                            # the caller's sets of those shapes first (the caller knows which
                            # values its inputs may take, e.g. a grid that sizes the patches)
                            extra = [v for v in validation_inputs or ()
                                     if input_shapes(v) == input_shapes(inputs)]
                            extra = extra or [revalued_inputs(inputs)]
                        elif validation_inputs is not None:
                            extra = list(validation_inputs)
                        else:
                            extra = resized_inputs(capture.program, inputs)
                        # sets the exporter derived, which the eager model may refuse
                        derived = not static and validation_inputs is None
                        admissible = self.admissible_validation_sets(capture, lowered, inputs, extra, run)
                        if not admissible and not static and validation_inputs:
                            # every given set lies outside what the program accepts (the bounds
                            # a model guard gave an axis): the shapes derived from its bounds
                            skipped = report.extra.get("validation_sets_skipped")
                            admissible = self.admissible_validation_sets(
                                capture, lowered, inputs, resized_inputs(capture.program, inputs), run)
                            derived = True
                            report.extra["validation_sets_skipped"] = skipped
                            report.extra["validation_sets_derived"] = len(admissible)
                            self.warn(f"warning: no validation input set fits the program's bounds; "
                                      f"validating at {len(admissible)} derived set(s) instead")
                        sets = [inputs, *admissible]
                        # eager reference: the traced module (the model behind its signature
                        # adapter, with the constant kwargs), so both sides compute the same outputs;
                        # a derived set the model itself refuses (a frame count that must be a
                        # multiple of the subsampling factor) says nothing of the artifact
                        repacks = output_repacks(capture.patches)
                        verdict = _validate(runner, capture.module, sets, capture.output_names,
                                            atol=lowered.atol, rtol=lowered.rtol, static=static,
                                            repack=[rec.repack for rec in repacks],
                                            refusable=[False] + [derived] * len(admissible))
                        if verdict.refused:
                            report.extra["validation_sets_refused_by_model"] = verdict.refused
                        report.validation = verdict.as_dict()
                        if repacks:
                            report.validation["eager_repacked_by"] = [rec.name for rec in repacks]
                        if len(verdict.checks) < 2:
                            logger.warning("validated at %d input set(s) only", len(verdict.checks))
                        if verdict.passed and verdict.vacuous:
                            self.warn(f"warning: validation passed vacuously: {VACUOUS}")
                        if not verdict.passed:
                            sampled = (random_ops(capture.program.graph_module)
                                       if verdict.eager_nondeterministic else [])
                            if sampled:
                                report.validation["random_ops"] = sampled
                            raise ValidationError(
                                f"artifact differs from eager: {verdict.first_problem()}"
                                + (f" (random ops in the program: {', '.join(sampled)})"
                                   if sampled else "")
                            )
                else:
                    report.validation = skipped_validation()
                report.status, report.stage = "ok", None
            except ExportError as e:
                if e.stage is None:
                    e.stage = recorder.current or "export"
                report.stage = e.stage
                report.error = str(e)
                self._finish_report(run)
                self._record_failure(out_dir, run)
                raise
            except Exception as e:
                stage = recorder.current or "export"
                report.stage = stage
                report.error = f"[{stage}] {first_line(e)}"
                self._finish_report(run)
                self._record_failure(out_dir, run)
                raise ExportError(first_line(e), stage=stage) from e
            # an interrupt (KeyboardInterrupt, SIGTERM) passes both handlers: the staging
            # directory goes, nothing is written and the output directory stays as it was
            self._finish_report(run)
            if out_dir is not None and staging is not None:
                final_path = commit_export(staging, out_dir, [p.name for p in saved], report,
                                           self.artifact_patterns)[0]
        return ExportResult(
            path=final_path,
            report=report.as_dict(),
            program=lowered.program if lowered is not None else None,
            exported_program=capture.program if capture else None,
            validation=verdict,
        )

    def _record_failure(self, out_dir: Path | None, run: ExportRun) -> None:
        """Write the failed report into ``out_dir`` (see :func:`export_core.output.record_failure`);
        a directory that cannot take it is logged, so the export's own error is the one raised."""
        if out_dir is None:
            return
        try:
            record_failure(out_dir, run.report, self.artifact_patterns)
        except OSError as e:
            logger.warning("cannot write the failed report into %s: %s", out_dir, e)

    @staticmethod
    def _finish_report(run: ExportRun) -> None:
        """Copy the stage timings and the patch activity into the report."""
        report = run.report
        report.stages = run.recorder.as_list()
        report.patches = {"installed": list(run.session.installed),
                          "fired": list(run.session.fired)}
        if run.session.skipped:
            report.extra.setdefault("patches_skipped", dict(run.session.skipped))

    # Backend hooks ------------------------------------------------------------------------------

    def prepare(
        self, model: torch.nn.Module, inputs: dict[str, Any] | tuple[Any, ...], run: ExportRun
    ) -> Prepared:
        """The backend's steps before capture (device, dtype). Base: nothing to do."""
        return Prepared(model, inputs)

    def lower(self, capture: CaptureResult, prepared: Prepared, run: ExportRun) -> Lowered:
        """The backend's stages after capture; returns the in-memory program. Base: the
        ``ExportedProgram`` itself, at the config's tolerances."""
        return Lowered(capture.program, self.config.atol, self.config.rtol)

    def admissible_validation_sets(
        self,
        capture: CaptureResult,
        lowered: Lowered,
        inputs: dict[str, Any] | tuple[Any, ...],
        sets: Sequence[dict[str, Any] | tuple[Any, ...]],
        run: ExportRun,
    ) -> list[dict[str, Any] | tuple[Any, ...]]:
        """The validation input sets (other than the export inputs) the artifact is built to
        accept. All of them here; a backend whose artifact has bounded or fixed shapes drops the
        others and says so in ``run.report``."""
        return list(sets)

    def save(self, lowered: Lowered, staging: Path, run: ExportRun) -> list[Path]:
        """Write the program into the empty directory ``staging`` under its final file names;
        returns the files written, the artifact first (they are moved into the output directory
        once validated). Base: ``torch.export.save`` to ``model.pt2``."""
        path = staging / "model.pt2"
        torch.export.save(lowered.program, path)
        return [path]

    def runner(self, lowered: Lowered, saved: Sequence[Path], capture: CaptureResult):
        """A callable running the artifact on one input set, returning its output leaves.
        ``saved`` are the files :meth:`save` wrote (empty for an in-memory export). Base: the
        ``ExportedProgram``'s module."""
        module = lowered.program.module()

        def run(inputs: dict[str, Any] | tuple[Any, ...]) -> list[Any]:
            with torch.no_grad():
                out = module(**inputs) if isinstance(inputs, dict) else module(*inputs)
            return [x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]

        return run

    def generation_session(self, path: Path, spec: Any) -> Any:
        """Load one saved graph of a generative export (``path``, its manifest entry ``spec``)
        as an :class:`export_core.generation.loop.GraphSession` in the backend's runtime.

        Raises:
            NotImplementedError: the backend has no generation runtime (the base exporter).
        """
        raise NotImplementedError(f"{type(self).__name__} has no generation runtime")

    def capture(
        self,
        model: torch.nn.Module,
        inputs: dict[str, Any] | tuple[Any, ...],
        *,
        run: ExportRun | None = None,
    ) -> CaptureResult:
        """Trace ``model`` on ``inputs`` with ``torch.export.export`` (the capture stages).

        Only the ``"dynamo"`` patches are installed, so the capture is the same for every
        backend and can be shared (``export(..., capture=...)``).

        Args:
            model: any ``torch.nn.Module`` (put in eval mode by the caller).
            inputs: ``forward`` keyword arguments (dict) or positional arguments (tuple). Tensor
                axes meant to be dynamic must have example size >= 2.
            run: the export this capture belongs to (stage timings and patch activity are
                recorded into it); a fresh one when omitted.

        Returns:
            A :class:`CaptureResult`.

        Raises:
            InputError: ``inputs`` is neither a dict nor a tuple, or does not fit ``forward``;
                (stage ``dynamic_shapes``) ``config.dynamic_shapes`` does not match ``inputs``.
            CaptureError: the eager forward raises on ``inputs`` (the message gives each
                input's dtype and shape), returns no tensor, or ``torch.export`` failed.
        """
        run = run or self.new_run()
        session = PatchSession()
        cfg = self.config
        if not isinstance(inputs, dict | tuple):
            raise InputError(f"inputs must be a dict of forward kwargs or a tuple, got {type(inputs).__name__}")
        start = time.perf_counter()
        with EXPORT_LOCK, ExitStack() as patches:
            patches.callback(run.session.merge, session)  # after the patches are restored
            # ── Capture stage 1: forward-signature patch ──
            with run.stage("signature"):
                if isinstance(inputs, dict):
                    module: torch.nn.Module = SignatureAdapter(model, list(inputs), cfg.constant_kwargs)
                    args: tuple[Any, ...] = ()
                    kwargs: dict[str, Any] = dict(inputs)
                    input_names = leaf_names(kwargs, cache_name="past_key_values")
                else:
                    module, args, kwargs = model, tuple(inputs), {}
                    if cfg.constant_kwargs:
                        raise InputError("constant_kwargs need inputs given as a dict")
                    try:
                        params = list(inspect.signature(model.forward).parameters)
                    except (TypeError, ValueError):
                        params = []
                    input_names = [
                        params[i] if i < len(params) else f"input_{i}" for i in range(len(args))
                    ]
                    if len(pytree.tree_leaves(args)) != len(args):
                        input_names = leaf_names(dict(zip(input_names, args)))

            # ── Capture stage 2: capture patches ──
            run.install_patches(patches, "dynamo", "patches", session)

            # ── Capture stage 3: pytree registration ──
            with run.stage("pytree"):
                register_pytree_nodes()

            # ── Capture stage 4: dynamic shapes ──
            with run.stage("dynamic_shapes"):
                if cfg.dynamic_shapes is not None:
                    check_dynamic_shapes(kwargs if kwargs else args, cfg.dynamic_shapes,
                                         input_names)
                    dynamic_shapes = cfg.dynamic_shapes
                elif cfg.dynamic:
                    dynamic_shapes = auto_dynamic_shapes(kwargs if kwargs else args)
                else:
                    dynamic_shapes = None

            # ── Capture stage 5: state cleanup and torch.export ──
            with run.stage("capture"), _state_cleanup(model):
                try:
                    with torch.no_grad():
                        # on copies: a cache among the inputs is updated in place by the forward
                        eager_out = module(*copy.deepcopy(args), **copy.deepcopy(kwargs))
                    output_names = distinct_output_names(
                        input_names, leaf_names(eager_out, cache_name="present", tensors_only=True))
                except Exception as e:
                    raise CaptureError(
                        f"the model's eager forward fails on the example inputs "
                        f"({describe_inputs(kwargs if kwargs else args, input_names)}): "
                        f"{first_line(e)}"
                    ) from e
                if not any(isinstance(x, torch.Tensor) for x in pytree.tree_leaves(eager_out)):
                    raise CaptureError(
                        f"the model returns no tensor (it returned {type(eager_out).__name__}); "
                        "an artifact needs at least one tensor output: return the tensors "
                        "(or a ModelOutput / tuple of them) from forward"
                    )
                fallback = (static_image_axes(kwargs if kwargs else args, dynamic_shapes)
                            if cfg.dynamic_shapes is None and dynamic_shapes is not None else None)
                program, strategy = _torch_export(
                    module, args, kwargs, dynamic_shapes, cfg.strict,
                    fallback_shapes=fallback, symbolic_budget_s=cfg.symbolic_budget_s)
                if strategy.startswith("static-image-axes"):
                    dynamic_shapes = fallback
            # ── Capture stage 6: capture FX node fixes ──
            with run.stage("capture_node_fixes"):
                fixed = apply_fx_node_fixes(program, "dynamo", stage="capture_node_fixes")

        return CaptureResult(
            program=program,
            module=module,
            args=args,
            kwargs=kwargs,
            dynamic_shapes=dynamic_shapes,
            input_names=input_names,
            output_names=output_names,
            patches=session,
            strategy=strategy,
            seconds=round(time.perf_counter() - start, 4),
            fixes=tuple(fixed.applied),
        )


@dataclass
class ExportResult:
    """What one :meth:`DynamoExporter.export` produced.

    Attributes:
        path: the artifact on disk (``model.onnx``, ``model.pte``), ``None`` without ``output``.
        report: the report dict (also written as ``export_report.json`` when ``output`` is set).
        program: the in-memory program (``ONNXProgram``, ``ExecutorchProgramManager``, or the
            ``ExportedProgram`` for the base exporter).
        exported_program: the captured ``ExportedProgram``.
        validation: the :class:`~export_core.validation.ValidationResult`, or ``None``.
    """

    path: Path | None
    report: dict[str, Any]
    program: Any
    exported_program: torch.export.ExportedProgram | None = None
    validation: ValidationResult | None = None


def flat_feed(inputs: dict[str, Any] | tuple[Any, ...], order: Sequence[str]) -> list[Any]:
    """The tensor leaves of one input set in artifact input order (``order``: the keys of the
    export input dict, in the order they were traced)."""
    if isinstance(inputs, dict):
        return [leaf for k in order for leaf in pytree.tree_leaves(inputs[k])]
    return list(pytree.tree_leaves(inputs))
