"""Upper bounds for the dynamic dimensions of a captured program.

ExecuTorch plans every activation buffer at the upper bound of its dynamic dimensions. A
``Dim.AUTO`` capture leaves most symbols unbounded (``int_oo``); ExecuTorch then silently plans
for the example size and rejects any larger input at run time (error ``0x10``). So before
lowering, every symbol of a user input gets a real range ``[1, max]``:

- ``batch`` (axis 0 of every input): :data:`DEFAULT_MAX_BATCH`, or ``max_batch``;
- ``sequence`` (the other axes of token / mask inputs): the model's position limit
  (``max_position_embeddings``, ``n_positions``, ...) capped at :data:`DEFAULT_MAX_SEQ`, or
  ``max_seq``;
- ``image`` (height and width of 4-d float inputs): the config's ``image_size`` or
  ``crop_size`` (V-JEPA 2; else
  :data:`DEFAULT_MAX_IMAGE_SIZE`), or ``max_image_size``;
- ``audio`` (the last axis of a raw waveform, ``input_values`` / ``audio_values``, 2-d or 3-d):
  one second at the config's ``sampling_rate`` (else :data:`DEFAULT_MAX_AUDIO_SAMPLES`), or
  ``max_audio_samples``. A waveform has thousands of samples per second, so the token cap
  would reject any real clip.
- ``frames`` (axis 1 of a 5-d float input: the frames of a video, or the images of a sample):
  the config's ``num_frames`` / ``frames_per_clip`` (else :data:`DEFAULT_MAX_FRAMES`), or
  ``max_frames``. As a sequence (512 frames) a video model's attention over frames x patches
  planned terabytes.

A cap derived from the config or a default never rejects the export's own example inputs: when
the example is larger (an OCR model fed 48 x 320 images while ``image_size`` is 224), the cap
is raised to the example size and the report's ``sources`` says so. An explicit option below the
example is an error. Axes that share a symbol (a waveform and its sample mask) share one range,
the largest of their roles' caps.

A symbol the model already bounds more tightly (a position-embedding table) keeps its bound. The
lower bound becomes 1 where it is ``torch.export``'s default of 2, so batch 1 and one-token
inputs are admitted; the exporter validates at batch 1 to prove it.

The range is written into the program's ``range_constraints`` and into the symbols' shape
environment (``var_to_range``), which is where ExecuTorch's ``eval_upper_bound`` reads it — no
second ``torch.export`` is needed.

Source:
    https://github.com/pytorch/executorch/issues/8766 (no unbounded dynamic tensors) and
    https://github.com/pytorch/executorch/pull/20834 (``int_oo`` falls back to the trace hint).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import sympy
import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

from export_core.axes import GRID_INPUTS, WAVEFORM_INPUTS, axis_role, config_int, position_limit
from export_core.dynamic_shapes import DeclaredDim
from export_core.errors import InputError
from export_core.guards import guard_limits

__all__ = [
    "DEFAULT_MAX_AUDIO_SAMPLES",
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_IMAGE_SIZE",
    "DEFAULT_MAX_SEQ",
    "AUDIO_SECONDS",
    "MIN_CAP",
    "ROLE_OPTIONS",
    "WAVEFORM_INPUTS",
    "BoundsPlan",
    "DimBound",
    "DimLimits",
    "apply_dim_bounds",
    "axis_role",
    "bound_data_dependent_sizes",
    "symbolic_sizes",
    "dim_limits",
]

DEFAULT_MAX_BATCH = 8
"""Batch cap when none is given."""

DEFAULT_MAX_SEQ = 512
"""Sequence cap when none is given: the model's position limit, but never above this (a
131072-position LLM at batch 8 would plan gigabytes)."""

DEFAULT_MAX_IMAGE_SIZE = 224
"""Image height / width cap when the config has no ``image_size``."""

DEFAULT_MAX_AUDIO_SAMPLES = 16_000
"""Waveform length cap (samples) when the config has no ``sampling_rate``: 1 s at 16 kHz."""

DEFAULT_MAX_FRAMES = 64
"""Video frame cap when the config gives no ``num_frames`` / ``frames_per_clip``."""

_FRAME_KEYS = ("num_frames", "frames_per_clip")
_FRAME_SUB_CONFIGS = ("vision_config", "video_config", "encoder")

AUDIO_SECONDS = 1
"""Seconds of audio admitted by default when the config gives a ``sampling_rate``. Kept short:
ExecuTorch plans a wav2vec2-style encoder's arena roughly quadratically in this cap (a tiny HuBERT
at batch 8 plans 70 MiB for 4000 samples, 1.1 GiB for 16000 and 107 GiB for 160000)."""

MIN_CAP = 3
"""Smallest cap that keeps an axis dynamic. ``to_edge_transform_and_lower`` re-traces the program
and lifts every lower bound of 1 back to ``torch.export``'s 2, so a range ``[1, 2]`` collapses to
the constant 2 and the program rejects size 1 (measured on ExecuTorch 1.5 / torch 2.13)."""

_AUDIO_SUB_CONFIGS = ("audio_config", "encoder", "text_config")


@dataclass(frozen=True)
class DimLimits:
    """The caps chosen for one export, per role (elements, not bytes).

    Attributes:
        max_batch: batch axes.
        max_seq: sequence axes.
        max_image_size: image height and width.
        max_audio_samples: waveform axes (samples).
        max_frames: video frame axes (frames).
        sources: where each cap came from (``"option"``, ``"default"``, or the config field).
    """

    max_batch: int
    max_seq: int
    max_image_size: int
    max_audio_samples: int = DEFAULT_MAX_AUDIO_SAMPLES
    sources: dict[str, str] = field(default_factory=dict)
    max_frames: int = DEFAULT_MAX_FRAMES

    def for_role(self, role: str) -> int:
        """The cap of ``role`` (``batch``, ``sequence``, ``image``, ``audio`` or ``frames``)."""
        return getattr(self, ROLE_OPTIONS.get(role, "max_seq"))

    def is_option(self, role: str) -> bool:
        """Whether the cap of ``role`` was given explicitly (not derived)."""
        return self.sources.get(ROLE_OPTIONS.get(role, "max_seq")) == "option"


ROLE_OPTIONS = {"batch": "max_batch", "sequence": "max_seq", "image": "max_image_size",
                "audio": "max_audio_samples", "frames": "max_frames"}
"""The option that caps each axis role."""


@dataclass(frozen=True)
class DimBound:
    """The range given to one dynamic axis of one input.

    Attributes:
        input: artifact input name (``input_ids``).
        axis: the axis index.
        role: ``batch``, ``sequence`` or ``image``.
        symbol: the ``torch.export`` symbol (``s27``); axes sharing a symbol share the range.
        min, max: the admitted sizes, inclusive.
        source: where ``max`` came from: ``"declared Dim('edges', max=24)"``, ``"the model
            (...)"`` (a range ``torch.export`` traced, such as a position limit), or the role's
            option and its origin (``"max_batch from default"``, ``"max_seq from
            config.max_position_embeddings"``, ``"max_seq from option"``).
    """

    input: str
    axis: int
    role: str
    symbol: str
    min: int
    max: int
    source: str = ""


@dataclass
class BoundsPlan:
    """Every bound applied to a program, for the report.

    Attributes:
        limits: the caps per role.
        dims: one :class:`DimBound` per dynamic input axis.
    """

    limits: DimLimits
    dims: list[DimBound] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    """One line per explicit cap the model does not reach (``--max-seq`` above its position
    limit): the program accepts less than asked, and ``limits`` holds what it accepts."""
    data_dependent: dict[str, int] = field(default_factory=dict)
    """Upper bound given to each data-dependent size (an unbacked symbol such as the length of
    ``repeat_interleave``'s or ``nonzero``'s output) that had none, by symbol: the largest bound
    of an input axis (:func:`bound_data_dependent_sizes`)."""
    _previous: list[tuple[Any, Any, Any]] = field(default_factory=list, repr=False,
                                                  compare=False)
    """``(shape_env, symbol, range before)`` of every range this plan set, in order."""

    def set_range(self, shape_env: Any, sym: Any, vr: ValueRanges) -> None:
        """Set ``sym``'s range in ``shape_env``, remembering the old one for
        :meth:`restore_shape_env`."""
        self._previous.append((shape_env, sym, shape_env.var_to_range.get(sym)))
        shape_env.var_to_range[sym] = vr

    def restore_shape_env(self) -> None:
        """Put back the symbol ranges the shape environment had before the bounds.

        The shape environment is shared by every copy of a captured program (a capture given to
        several backends), so the ExecuTorch exporter restores it once lowering is done; the
        program's own ``range_constraints`` keep the bounds.
        """
        for shape_env, sym, vr in reversed(self._previous):
            if vr is None:
                shape_env.var_to_range.pop(sym, None)
            else:
                shape_env.var_to_range[sym] = vr
        self._previous.clear()

    def as_dict(self) -> dict[str, Any]:
        """``{"max_batch", "max_seq", "max_image_size", "max_audio_samples", "max_frames",
        "sources", "dims": [...]}``."""
        return {
            "max_batch": self.limits.max_batch,
            "max_seq": self.limits.max_seq,
            "max_image_size": self.limits.max_image_size,
            "max_audio_samples": self.limits.max_audio_samples,
            "max_frames": self.limits.max_frames,
            "sources": dict(self.limits.sources),
            "dims": [asdict(d) for d in self.dims],
            "data_dependent": dict(self.data_dependent),
        }


def dim_limits(
    model_config: Any,
    *,
    max_batch: int | None = None,
    max_seq: int | None = None,
    max_image_size: int | None = None,
    max_audio_samples: int | None = None,
    max_frames: int | None = None,
) -> DimLimits:
    """The caps for one export: explicit options first, else derived from ``model_config``.

    Args:
        model_config: the model's ``PretrainedConfig`` (or ``None`` for a plain module).
        max_batch, max_seq, max_image_size, max_audio_samples, max_frames: explicit caps
            (``None``: derive).

    Returns:
        The :class:`DimLimits`.

    Raises:
        InputError: a cap is below :data:`MIN_CAP`.
    """
    sources: dict[str, str] = {}
    for name, value in (("max_batch", max_batch), ("max_seq", max_seq),
                        ("max_image_size", max_image_size),
                        ("max_audio_samples", max_audio_samples), ("max_frames", max_frames)):
        if value is not None and value < MIN_CAP:
            raise InputError(
                f"{name} must be at least {MIN_CAP} to keep the axis dynamic, got {value} "
                "(ExecuTorch's re-trace turns a range [1, 2] into the constant 2); "
                "export with --static for a fixed size",
            )
        if value is not None:
            sources[name] = "option"
    if max_batch is None:
        max_batch, sources["max_batch"] = DEFAULT_MAX_BATCH, "default"
    if max_seq is None:
        found = position_limit(model_config)
        if found is not None:
            max_seq = min(found[0], DEFAULT_MAX_SEQ)
            sources["max_seq"] = (
                f"config.{found[1]}" if found[0] <= DEFAULT_MAX_SEQ
                else f"default cap (config.{found[1]}={found[0]})"
            )
        else:
            max_seq, sources["max_seq"] = DEFAULT_MAX_SEQ, "default"
    if max_image_size is None:
        found = config_int(model_config, ("image_size", "crop_size"))
        if found is not None:
            max_image_size, sources["max_image_size"] = found[0], f"config.{found[1]}"
        else:
            max_image_size, sources["max_image_size"] = DEFAULT_MAX_IMAGE_SIZE, "default"
    if max_audio_samples is None:
        found = config_int(model_config, ("sampling_rate",), _AUDIO_SUB_CONFIGS)
        if found is not None:
            max_audio_samples = AUDIO_SECONDS * found[0]
            sources["max_audio_samples"] = f"{AUDIO_SECONDS} s at config.{found[1]}={found[0]}"
        else:
            max_audio_samples, sources["max_audio_samples"] = DEFAULT_MAX_AUDIO_SAMPLES, "default"
    if max_frames is None:
        found = config_int(model_config, _FRAME_KEYS, _FRAME_SUB_CONFIGS)
        if found is not None:
            max_frames, sources["max_frames"] = found[0], f"config.{found[1]}"
        else:
            max_frames, sources["max_frames"] = DEFAULT_MAX_FRAMES, "default"
    return DimLimits(max_batch, max_seq, max_image_size, max_audio_samples, sources=sources,
                     max_frames=max_frames)


def _user_placeholders(program: torch.export.ExportedProgram) -> list[torch.fx.Node]:
    user = set(program.graph_signature.user_inputs)
    return [n for n in program.graph.nodes if n.op == "placeholder" and n.name in user]


def _as_int(bound: Any) -> int | None:
    """A finite range end as an ``int``; ``None`` for an infinite one (``int_oo``, ``-int_oo``,
    ``sympy.oo``, ``-sympy.oo``: sympy's ``int()`` of those raises ``AttributeError``) or a
    non-number."""
    if bound in (int_oo, -int_oo, sympy.oo, -sympy.oo):
        return None
    try:
        return int(bound)
    except (TypeError, ValueError, OverflowError, AttributeError):
        return None


def apply_dim_bounds(
    program: torch.export.ExportedProgram,
    input_names: list[str],
    limits: DimLimits,
    declared: dict[tuple[str, int], DeclaredDim] | None = None,
) -> BoundsPlan:
    """Give every symbol of the program's user inputs the range ``[1, cap]`` (in place).

    A derived cap below an example size is raised to that size (the plan's ``limits`` and
    ``sources`` show it); a symbol shared by axes of several roles gets the largest of their caps.
    An axis the caller declared with ``Dim(max=N)`` gets N (memory is planned for it), whatever
    the role's cap; an axis declared with a ``Dim`` without ``max`` gets its role's cap and a
    notice saying so (ExecuTorch cannot plan an unbounded axis).

    Args:
        program: the captured ``ExportedProgram``; its ``range_constraints`` and the shape
            environment of its symbols are updated (:meth:`BoundsPlan.restore_shape_env` puts
            the shape environment back).
        input_names: artifact input names, one per user input placeholder, in order.
        limits: the caps per role.
        declared: the ``Dim`` objects of the caller's ``dynamic_shapes`` by ``(input, axis)``
            (:func:`export_core.dynamic_shapes.declared_dims`).

    Returns:
        The :class:`BoundsPlan` (empty ``dims`` for a static program); each
        :class:`DimBound`'s ``source`` says where its range came from.

    Raises:
        InputError: (stage ``bounds``) an explicit cap (an option) is below an input's example
            size.
    """
    declared = declared or {}
    axes: list[tuple[str, int, str, frozenset[sympy.Symbol], int | None]] = []
    shape_env = None
    packed = not GRID_INPUTS.isdisjoint(input_names)
    for i, node in enumerate(_user_placeholders(program)):
        value = node.meta.get("val")
        name = input_names[i] if i < len(input_names) else node.name
        for axis, size in enumerate(getattr(value, "shape", ())):
            if not isinstance(size, torch.SymInt) or not size.node.expr.free_symbols:
                continue  # static, or a SymInt that torch.export specialised to a constant
            shape_env = size.node.shape_env
            example = int(size.node.hint) if size.node.hint is not None else None
            role = axis_role(name, value, axis, packed=packed)
            axes.append((name, axis, role, frozenset(size.node.expr.free_symbols), example))
    bounded = {key for key, d in declared.items() if d.max is not None}
    limits = _fit_examples(limits, [a for a in axes if (a[0], a[1]) not in bounded])
    cap_of: dict[sympy.Symbol, int] = {}
    declared_cap: dict[sympy.Symbol, int] = {}
    for name, axis, role, symbols, _ in axes:
        dim = declared.get((name, axis))
        for sym in symbols:
            if dim is not None and dim.max is not None:
                declared_cap[sym] = min(declared_cap.get(sym, dim.max), dim.max)
            else:
                cap_of[sym] = max(cap_of.get(sym, 0), limits.for_role(role))
    chosen: dict[sympy.Symbol, tuple[int, int]] = {}
    model_bound: set[sympy.Symbol] = set()
    for sym in dict.fromkeys([*cap_of, *declared_cap]):
        cap = declared_cap.get(sym, cap_of.get(sym))
        old = program.range_constraints.get(sym)
        lo = _as_int(old.lower) if old is not None else 2
        hi = _as_int(old.upper) if old is not None else None
        # torch.export's default lower bound: 2 for Dim.AUTO, 0 for a Dim without min
        lo = 1 if lo is None or lo in (0, 2) else lo
        if hi is not None and hi < cap:
            model_bound.add(sym)
        chosen[sym] = (lo, cap if hi is None else min(hi, cap))
    # the model's code may have specialised the graph below the cap (a shape guard)
    guarded = guard_limits(program, input_names, {sym: hi for sym, (_, hi) in chosen.items()})
    for sym, limit in guarded.items():
        chosen[sym] = (chosen[sym][0], limit.max)
    plan = BoundsPlan(limits)
    for sym, (lo, hi) in chosen.items():
        vr = ValueRanges(lo, hi)
        program._range_constraints[sym] = vr  # noqa: SLF001 - no public setter exists
        if shape_env is not None:
            plan.set_range(shape_env, sym, vr)
    seen: set[tuple[str, int]] = set()
    noticed: set[str] = set()
    for name, axis, role, symbols, _ in axes:
        if (name, axis) in seen:
            continue
        seen.add((name, axis))
        ranges = [chosen[sym] for sym in symbols]
        lo, hi = max(r[0] for r in ranges), min(r[1] for r in ranges)
        dim = declared.get((name, axis))
        source = _dim_source(dim, role, limits, any(sym in model_bound for sym in symbols))
        limit = next((guarded[sym] for sym in symbols if sym in guarded), None)
        if limit is not None and limit.max == hi:
            source = limit.source
        if limit is not None and limit.max == hi and limit.symbol not in noticed:
            noticed.add(limit.symbol)
            larger = ("larger inputs need a model without that branch" if limit.resumes is None
                      else f"it holds again at {limit.resumes}: a larger bound admits larger "
                           "inputs, sizes where it fails give wrong results")
            plan.notices.append(
                f"warning: {name}[{axis}] is bounded at {hi}, not {limit.cap}: the captured "
                f"program is specialised to sizes up to {hi} (at {hi + 1} its shape guard "
                f"{limit.brief()} fails); {larger}"
            )
        plan.dims.append(DimBound(name, axis, role, " ".join(sorted(map(str, symbols))), lo, hi,
                                  source))
        if dim is not None and dim.max is None:
            plan.notices.append(
                f"warning: dynamic_shapes declares {name}[{axis}] as Dim({dim.name!r}) without a "
                f"max; ExecuTorch plans memory for a bound, so the program accepts {lo} to {hi} "
                f"({source}); give Dim({dim.name!r}, max=N) for another bound"
            )
    return _effective_limits(plan)


def symbolic_sizes(graph_module: torch.fx.GraphModule) -> Iterator[torch.SymInt]:
    """Every symbolic size and stride in the node values (``val``) and tensor specs (``spec``,
    which ExecuTorch's passes add) of ``graph_module`` and its nested graphs."""
    for module in graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            for key in ("val", "spec"):
                for leaf in torch.utils._pytree.tree_leaves(node.meta.get(key)):
                    if isinstance(leaf, torch.SymInt):
                        yield leaf
                        continue
                    for sizes in (getattr(leaf, "shape", ()), getattr(leaf, "stride", ())):
                        if callable(sizes):
                            sizes = sizes()
                        yield from (x for x in sizes if isinstance(x, torch.SymInt))


def bound_data_dependent_sizes(sizes: Iterable[torch.SymInt], plan: BoundsPlan) -> None:
    """Give every data-dependent symbol in ``sizes`` without an upper bound the largest upper
    bound of the plan's input axes (in the symbols' shape environment, restored with the rest).

    A size read from tensor data (``repeat_interleave(repeats)``'s length, the number of video
    frames in a grid) is an unbacked symbol, unbounded unless the model checks it, and
    ExecuTorch cannot plan memory for it (``Cannot evaluate a finite upper bound for symbolic
    expression u48``). Such sizes count parts of an input (frames, images, selected tokens), so
    the program plans them at the largest input axis it accepts; a larger one at run time fails
    ``execute`` ("Attempted to resize a bounded tensor"), never silently.

    Args:
        sizes: symbolic sizes (:func:`symbolic_sizes` of the program about to be planned).
        plan: the input bounds (:func:`apply_dim_bounds`); its ``data_dependent`` records each
            bound given, and :meth:`BoundsPlan.restore_shape_env` undoes them.
    """
    cap = max((d.max for d in plan.dims), default=None)
    if cap is None:
        return
    for size in sizes:
        shape_env = size.node.shape_env
        for sym in free_unbacked_symbols(size.node.expr):
            old = shape_env.var_to_range.get(sym)
            if old is not None and _as_int(old.upper) is not None:
                continue
            lower = max(0, _as_int(old.lower) or 0) if old is not None else 0
            plan.set_range(shape_env, sym, ValueRanges(lower, max(cap, lower)))
            plan.data_dependent[str(sym)] = max(cap, lower)



def _dim_source(dim: DeclaredDim | None, role: str, limits: DimLimits, model: bool) -> str:
    """Where one axis's upper bound came from, for the report."""
    if model:
        return "the model (the range torch.export traced, e.g. its position limit)"
    option = ROLE_OPTIONS.get(role, "max_seq")
    derived = f"{option} from {limits.sources.get(option, 'default')}"
    if dim is None:
        return derived
    if dim.max is not None:
        return f"declared Dim({dim.name!r}, max={dim.max})"
    return f"declared Dim({dim.name!r}) without max; {derived}"


def _effective_limits(plan: BoundsPlan) -> BoundsPlan:
    """Lower each role's cap to the largest size its axes accept, when the model's own range is
    narrower (a position limit of 128 under ``max_seq=100000``), with a notice for caps given as
    options."""
    changes: dict[str, int] = {}
    sources = dict(plan.limits.sources)
    # an axis declared with Dim(max=N) has the caller's bound, not its role's
    derived = [d for d in plan.dims
               if not (d.source.startswith("declared Dim(") and "without max" not in d.source)]
    for role in dict.fromkeys(d.role for d in derived):
        accepted = max(d.max for d in derived if d.role == role)
        cap = plan.limits.for_role(role)
        if accepted >= cap:
            continue
        option = ROLE_OPTIONS.get(role, "max_seq")
        changes[option] = accepted
        asked = sources.get(option, "default")
        sources[option] = f"the model's limit (below {cap} from {asked})"
        if plan.limits.is_option(role):
            plan.notices.append(
                f"warning: {option}={cap} is above what the model accepts; its {role} axes are "
                f"bounded at {accepted}"
            )
    if changes:
        plan.limits = replace(plan.limits, sources=sources, **changes)
    return plan


def _fit_examples(
    limits: DimLimits, axes: list[tuple[str, int, str, frozenset[sympy.Symbol], int | None]]
) -> DimLimits:
    """``limits`` with every derived cap raised to the largest example size of its role.

    Raises:
        InputError: (stage ``bounds``) an explicit cap is below an example size.
    """
    raised: dict[str, int] = {}
    sources = dict(limits.sources)
    for name, axis, role, _, example in axes:
        cap = limits.for_role(role)
        if example is None or example <= max(cap, raised.get(role, 0)):
            continue
        option = ROLE_OPTIONS.get(role, "max_seq")
        if limits.is_option(role):
            raise InputError(
                f"{option}={cap} is below the example size {example} of {name}[{axis}]; "
                f"raise {option} or use smaller example inputs",
            )
        raised[role] = example
        sources[option] = (f"example size of {name}[{axis}] (the cap {cap} from "
                           f"{sources.get(option, 'the default')} is smaller)")
    if not raised:
        return limits
    return replace(limits, sources=sources,
                   **{ROLE_OPTIONS[role]: size for role, size in raised.items()})
