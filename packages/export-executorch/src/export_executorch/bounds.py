"""Upper bounds for the dynamic dimensions of a captured program.

ExecuTorch plans every activation buffer at the upper bound of its dynamic dimensions. A
``Dim.AUTO`` capture leaves most symbols unbounded (``int_oo``); ExecuTorch then silently plans
for the example size and rejects any larger input at run time (error ``0x10``). So before
lowering, every symbol of a user input gets a real range ``[1, max]``:

- ``batch`` (axis 0 of every input): :data:`DEFAULT_MAX_BATCH`, or ``max_batch``;
- ``sequence`` (the other axes of token / mask inputs): the model's position limit
  (``max_position_embeddings``, ``n_positions``, ...) capped at :data:`DEFAULT_MAX_SEQ`, or
  ``max_seq``;
- ``image`` (height and width of 4-d float inputs): the config's ``image_size`` (else
  :data:`DEFAULT_MAX_IMAGE_SIZE`), or ``max_image_size``.

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

from dataclasses import asdict, dataclass, field
from typing import Any

import sympy
import torch
from torch.utils._sympy.numbers import int_oo
from torch.utils._sympy.value_ranges import ValueRanges

from export_core.errors import InputError

__all__ = [
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_IMAGE_SIZE",
    "DEFAULT_MAX_SEQ",
    "MIN_CAP",
    "BoundsPlan",
    "DimBound",
    "DimLimits",
    "apply_dim_bounds",
    "axis_role",
    "dim_limits",
]

DEFAULT_MAX_BATCH = 8
"""Batch cap when none is given."""

DEFAULT_MAX_SEQ = 512
"""Sequence cap when none is given: the model's position limit, but never above this (a
131072-position LLM at batch 8 would plan gigabytes)."""

DEFAULT_MAX_IMAGE_SIZE = 224
"""Image height / width cap when the config has no ``image_size``."""

MIN_CAP = 3
"""Smallest cap that keeps an axis dynamic. ``to_edge_transform_and_lower`` re-traces the program
and lifts every lower bound of 1 back to ``torch.export``'s 2, so a range ``[1, 2]`` collapses to
the constant 2 and the program rejects size 1 (measured on ExecuTorch 1.5 / torch 2.13)."""

_POSITION_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "max_sequence_length",
    "n_ctx",
    "seq_length",
)
_SUB_CONFIGS = ("text_config", "vision_config", "encoder", "decoder")


@dataclass(frozen=True)
class DimLimits:
    """The caps chosen for one export, per role (elements, not bytes).

    Attributes:
        max_batch: batch axes.
        max_seq: sequence axes.
        max_image_size: image height and width.
        sources: where each cap came from (``"option"``, ``"default"``, or the config field).
    """

    max_batch: int
    max_seq: int
    max_image_size: int
    sources: dict[str, str] = field(default_factory=dict)

    def for_role(self, role: str) -> int:
        return {"batch": self.max_batch, "image": self.max_image_size}.get(role, self.max_seq)


@dataclass(frozen=True)
class DimBound:
    """The range given to one dynamic axis of one input.

    Attributes:
        input: artifact input name (``input_ids``).
        axis: the axis index.
        role: ``batch``, ``sequence`` or ``image``.
        symbol: the ``torch.export`` symbol (``s27``); axes sharing a symbol share the range.
        min, max: the admitted sizes, inclusive.
    """

    input: str
    axis: int
    role: str
    symbol: str
    min: int
    max: int


@dataclass
class BoundsPlan:
    """Every bound applied to a program, for the report.

    Attributes:
        limits: the caps per role.
        dims: one :class:`DimBound` per dynamic input axis.
    """

    limits: DimLimits
    dims: list[DimBound] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """``{"max_batch", "max_seq", "max_image_size", "sources", "dims": [...]}``."""
        return {
            "max_batch": self.limits.max_batch,
            "max_seq": self.limits.max_seq,
            "max_image_size": self.limits.max_image_size,
            "sources": dict(self.limits.sources),
            "dims": [asdict(d) for d in self.dims],
        }


def _config_int(config: Any, keys: tuple[str, ...]) -> tuple[int, str] | None:
    if config is None:
        return None
    for owner in (config, *(getattr(config, s, None) for s in _SUB_CONFIGS)):
        if owner is None:
            continue
        for key in keys:
            value = getattr(owner, key, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value, key
            if key == "image_size" and isinstance(value, list | tuple) and value:
                return max(int(v) for v in value), key
    return None


def dim_limits(
    model_config: Any,
    *,
    max_batch: int | None = None,
    max_seq: int | None = None,
    max_image_size: int | None = None,
) -> DimLimits:
    """The caps for one export: explicit options first, else derived from ``model_config``.

    Args:
        model_config: the model's ``PretrainedConfig`` (or ``None`` for a plain module).
        max_batch, max_seq, max_image_size: explicit caps (``None``: derive).

    Returns:
        The :class:`DimLimits`.

    Raises:
        InputError: a cap is below :data:`MIN_CAP`.
    """
    sources: dict[str, str] = {}
    for name, value in (("max_batch", max_batch), ("max_seq", max_seq),
                        ("max_image_size", max_image_size)):
        if value is not None and value < MIN_CAP:
            raise InputError(
                f"{name} must be at least {MIN_CAP} to keep the axis dynamic, got {value} "
                "(ExecuTorch's re-trace turns a range [1, 2] into the constant 2); "
                "export with --static for a fixed size",
                stage="bounds",
            )
        if value is not None:
            sources[name] = "option"
    if max_batch is None:
        max_batch, sources["max_batch"] = DEFAULT_MAX_BATCH, "default"
    if max_seq is None:
        found = _config_int(model_config, _POSITION_KEYS)
        if found is not None:
            max_seq = min(found[0], DEFAULT_MAX_SEQ)
            sources["max_seq"] = (
                f"config.{found[1]}" if found[0] <= DEFAULT_MAX_SEQ
                else f"default cap (config.{found[1]}={found[0]})"
            )
        else:
            max_seq, sources["max_seq"] = DEFAULT_MAX_SEQ, "default"
    if max_image_size is None:
        found = _config_int(model_config, ("image_size",))
        if found is not None:
            max_image_size, sources["max_image_size"] = found[0], f"config.{found[1]}"
        else:
            max_image_size, sources["max_image_size"] = DEFAULT_MAX_IMAGE_SIZE, "default"
    return DimLimits(max_batch, max_seq, max_image_size, sources)


def axis_role(input_name: str, value: Any, axis: int) -> str:
    """The role of ``axis`` of input ``input_name`` whose traced value is ``value``.

    Axis 0 is the batch; height and width of a 4-d floating input (``pixel_values``) are
    ``image``; every other axis (tokens, mask positions) is ``sequence``.
    """
    if axis == 0:
        return "batch"
    dtype = getattr(value, "dtype", None)
    if getattr(value, "dim", lambda: 0)() == 4 and axis >= 2 and dtype is not None and dtype.is_floating_point:
        return "image"
    if "pixel" in input_name and axis >= 2:
        return "image"
    return "sequence"


def _user_placeholders(program: torch.export.ExportedProgram) -> list[torch.fx.Node]:
    user = set(program.graph_signature.user_inputs)
    return [n for n in program.graph.nodes if n.op == "placeholder" and n.name in user]


def _as_int(bound: Any) -> int | None:
    if bound is int_oo or bound == sympy.oo:
        return None
    try:
        return int(bound)
    except (TypeError, ValueError, OverflowError):
        return None


def apply_dim_bounds(
    program: torch.export.ExportedProgram,
    input_names: list[str],
    limits: DimLimits,
) -> BoundsPlan:
    """Give every symbol of the program's user inputs the range ``[1, cap]`` (in place).

    Args:
        program: the captured ``ExportedProgram``; its ``range_constraints`` and the shape
            environment of its symbols are updated.
        input_names: artifact input names, one per user input placeholder, in order.
        limits: the caps per role.

    Returns:
        The :class:`BoundsPlan` (empty ``dims`` for a static program).

    Raises:
        InputError: (stage ``bounds``) a cap is below an input's example size.
    """
    plan = BoundsPlan(limits)
    chosen: dict[sympy.Symbol, tuple[int, int]] = {}
    axes: list[tuple[str, int, str, sympy.Symbol]] = []
    shape_env = None
    for i, node in enumerate(_user_placeholders(program)):
        value = node.meta.get("val")
        name = input_names[i] if i < len(input_names) else node.name
        for axis, size in enumerate(getattr(value, "shape", ())):
            if not isinstance(size, torch.SymInt) or not size.node.expr.free_symbols:
                continue  # static, or a SymInt that torch.export specialised to a constant
            shape_env = size.node.shape_env
            role = axis_role(name, value, axis)
            cap = limits.for_role(role)
            example = int(size.node.hint) if size.node.hint is not None else None
            if example is not None and cap < example:
                option = {"batch": "max_batch", "image": "max_image_size"}.get(role, "max_seq")
                raise InputError(
                    f"{option}={cap} is below the example size {example} of {name}[{axis}]; "
                    f"raise {option} or use smaller example inputs",
                    stage="bounds",
                )
            for sym in size.node.expr.free_symbols:
                old = program.range_constraints.get(sym)
                lo = _as_int(old.lower) if old is not None else 2
                hi = _as_int(old.upper) if old is not None else None
                lo = 1 if lo is None or lo == 2 else lo
                hi = cap if hi is None else min(hi, cap)
                if sym in chosen:
                    hi = min(hi, chosen[sym][1])
                chosen[sym] = (lo, hi)
                axes.append((name, axis, role, sym))
    for sym, (lo, hi) in chosen.items():
        vr = ValueRanges(lo, hi)
        program._range_constraints[sym] = vr  # noqa: SLF001 - no public setter exists
        if shape_env is not None:
            shape_env.var_to_range[sym] = vr
    seen: set[tuple[str, int]] = set()
    for name, axis, role, sym in axes:
        if (name, axis) in seen:
            continue
        seen.add((name, axis))
        lo, hi = chosen[sym]
        plan.dims.append(DimBound(name, axis, role, str(sym), lo, hi))
    return plan
