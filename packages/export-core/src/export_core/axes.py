"""The roles and names of a captured program's dynamic input axes, and the position limit.

Every backend names and bounds dynamic axes by *role*: axis 0 is the ``batch`` (but the packed
patches of a Qwen-VL-style tower, a floating input beside ``grid_thw``, are a ``sequence``); token and mask
positions are the ``sequence``; the height and width of an image are ``image`` axes; the samples
of a raw waveform are ``audio``. The artifact-facing names (:func:`axis_names`) follow the role:
``batch``, ``sequence`` (``decoder_sequence`` for ``decoder_*`` inputs), ``height``, ``width``,
``samples``. Inputs that share an axis share its name, also where ``torch.export`` gave them two
symbols (an attention mask's batch): two symbols of one role whose example sizes are equal are
one axis; a symbol of the same role at another size gets the input's name as a suffix
(``sequence_input_features``).

The sequence's upper bound is the model's position limit (:func:`position_limit`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from .guards import guard_limits

__all__ = [
    "CACHE_INPUT_PREFIX",
    "GRID_INPUTS",
    "GUARD_SEARCH_CAP",
    "POSITION_KEYS",
    "WAVEFORM_INPUTS",
    "AxisBounds",
    "AxisName",
    "axis_bounds",
    "axis_names",
    "axis_role",
    "config_int",
    "model_config",
    "position_limit",
]

CACHE_INPUT_PREFIX = "past_key_values."
"""Prefix of the key/value cache inputs (``past_key_values.<i>.key|value``, the contract's
names): their axis 2 is the past sequence, whatever their rank and dtype suggest."""

WAVEFORM_INPUTS = frozenset({"input_values", "audio_values", "input_audio", "waveform", "audio"})
"""Input names whose last axis is an ``audio`` axis when they are a waveform: ``(batch,
samples)`` or ``(batch, channels, samples)``. A spectrogram passed as ``input_values``
``(batch, frames, mel)`` keeps ``sequence`` frames (its mel axis is static)."""

POSITION_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "max_sequence_length",
    "n_ctx",
    "seq_length",
)
"""Config fields that hold a model's position limit, in order of preference."""

_SUB_CONFIGS = ("text_config", "vision_config", "encoder", "decoder")


def config_int(
    config: Any, keys: tuple[str, ...], sub_configs: tuple[str, ...] = _SUB_CONFIGS
) -> tuple[int, str] | None:
    """The first positive int among ``keys`` of ``config``, then of its ``sub_configs``.

    An ``image_size`` list gives its largest entry.

    Returns:
        ``(value, key)``, or ``None`` when no key has one (or ``config`` is ``None``).
    """
    if config is None:
        return None
    for owner in (config, *(getattr(config, s, None) for s in sub_configs)):
        if owner is None:
            continue
        for key in keys:
            value = getattr(owner, key, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value, key
            if key == "image_size" and isinstance(value, list | tuple) and value:
                return max(int(v) for v in value), key
    return None


def model_config(module: torch.nn.Module) -> Any:
    """The Hugging Face config of a traced module (behind its signature adapter), or ``None``."""
    inner = getattr(module, "model", module)
    return getattr(inner, "config", None) or getattr(module, "config", None)


def position_limit(config: Any) -> tuple[int, str] | None:
    """The model's position limit (``max_position_embeddings``, ``n_positions``, ...).

    Returns:
        ``(tokens, config field)``, or ``None`` when the config states none.
    """
    return config_int(config, POSITION_KEYS)


def _is_waveform(value: Any) -> bool:
    """``(batch, samples)``, or ``(batch, channels, samples)`` with a static channel axis; a
    ``(batch, frames, mel)`` spectrogram has two dynamic axes after the batch."""
    ndim = getattr(value, "dim", lambda: 0)()
    if ndim == 2:
        return True
    channels = value.shape[1] if ndim == 3 else None
    return ndim == 3 and not (isinstance(channels, torch.SymInt) and channels.node.expr.free_symbols)


GRID_INPUTS = frozenset({"grid_thw", "image_grid_thw", "video_grid_thw"})
"""Inputs that describe packed vision patches (Qwen-VL-style towers): ``(images, 3)`` ``(t, h,
w)`` per image. Beside one, a floating input's axis 0 counts patches of all images, not a
batch."""


def axis_role(input_name: str, value: Any, axis: int, *, packed: bool = False) -> str:
    """The role of ``axis`` of input ``input_name`` whose traced value is ``value``.

    Axis 0 is the batch, except that of a floating input beside a grid input (``packed``: the
    model takes one of :data:`GRID_INPUTS`), which counts packed patches: ``sequence``; the past axis of a cache input (``past_key_values.<i>.key``,
    ``(batch, kv_heads, past_sequence, head_dim)``) is ``sequence``; the last axis of a waveform input (:data:`WAVEFORM_INPUTS`) is
    ``audio``; axis 1 of 3-d ``position_ids`` (multimodal rotary positions, ``(sections, batch,
    sequence)``) is ``batch``; axis 1 of a 5-d floating input (a video, ``(batch, frames, channels,
    height, width)``: VideoMAE, TimeSformer, V-JEPA 2; or a stack of images per sample) is
    ``frames``; height and width of a 4-d floating input (``pixel_values``) are ``image``; every
    other axis (tokens, mask positions) is ``sequence``.
    """
    dtype = getattr(value, "dtype", None)
    if input_name == "position_ids" and getattr(value, "dim", lambda: 0)() == 3 and axis == 1:
        # multimodal rotary positions (Qwen-VL-style): (sections, batch, sequence)
        return "batch"
    if axis == 0:
        floating = dtype is not None and dtype.is_floating_point
        return "sequence" if packed and floating and input_name not in GRID_INPUTS else "batch"
    if input_name.startswith(CACHE_INPUT_PREFIX):
        # (batch, kv_heads, past_sequence, head_dim): 4-d floating, but tokens, not pixels
        return "sequence"
    if input_name in WAVEFORM_INPUTS and _is_waveform(value) and axis == value.dim() - 1:
        return "audio"
    if getattr(value, "dim", lambda: 0)() == 5 and axis == 1 and dtype is not None and dtype.is_floating_point:
        return "frames"
    if getattr(value, "dim", lambda: 0)() == 4 and axis >= 2 and dtype is not None and dtype.is_floating_point:
        return "image"
    if "pixel" in input_name and axis >= 2:
        return "image"
    return "sequence"


@dataclass(frozen=True)
class AxisName:
    """The name of one dynamic input axis.

    Attributes:
        input: artifact input name (``input_ids``).
        axis: the axis index.
        role: ``batch``, ``sequence``, ``image``, ``audio`` or ``frames`` (:func:`axis_role`).
        symbol: the ``torch.export`` symbol of the axis (``s27``).
        name: the artifact's name of the axis (``batch``, ``sequence``, ``height``, ...).
        example: the axis's size in the export's example input.
    """

    input: str
    axis: int
    role: str
    symbol: str
    name: str
    example: int | None


def _role_name(input_name: str, role: str, axis: int, rank: int) -> str:
    if role == "sequence":
        if input_name.startswith(CACHE_INPUT_PREFIX):
            return "past_sequence"
        return "decoder_sequence" if input_name.startswith("decoder_") else "sequence"
    if role == "image":
        return {rank - 2: "height", rank - 1: "width"}.get(axis, f"image{axis}")
    if role == "audio":
        return "samples"
    return role


def axis_names(program: torch.export.ExportedProgram, input_names: list[str]) -> list[AxisName]:
    """Names for every dynamic axis of the program's user inputs (see the module docstring).

    Args:
        program: the captured ``ExportedProgram``.
        input_names: artifact input names, one per user input placeholder, in order.

    Returns:
        One :class:`AxisName` per axis whose size is a plain symbol, in input order. Axes whose
        size is an expression of symbols (``2*s0``) are left out.
    """
    user = set(program.graph_signature.user_inputs)
    placeholders = [n for n in program.graph.nodes if n.op == "placeholder" and n.name in user]
    by_symbol: dict[str, str] = {}
    taken: dict[str, tuple[str, int | None]] = {}  # name -> (symbol, example size)
    out: list[AxisName] = []
    packed = not GRID_INPUTS.isdisjoint(input_names)
    for i, node in enumerate(placeholders):
        value = node.meta.get("val")
        name = input_names[i] if i < len(input_names) else node.name
        for axis, size in enumerate(getattr(value, "shape", ())):
            if not isinstance(size, torch.SymInt) or not getattr(size.node.expr, "is_Symbol", False):
                continue
            symbol = str(size.node.expr)
            example = int(size.node.hint) if size.node.hint is not None else None
            role = axis_role(name, value, axis, packed=packed)
            if symbol not in by_symbol:
                wanted = _role_name(name, role, axis, value.dim())
                holder = taken.get(wanted)
                if holder is not None and holder[1] != example:
                    wanted = f"{wanted}_{name}"
                taken.setdefault(wanted, (symbol, example))
                by_symbol[symbol] = wanted
            out.append(AxisName(name, axis, role, symbol, by_symbol[symbol], example))
    return out


@dataclass
class AxisBounds:
    """The sizes each dynamic input axis of an artifact accepts, for the report.

    Attributes:
        max_seq: the largest sequence length accepted (the position limit), or ``None`` when
            neither the config nor the program bounds it.
        sources: where ``max_seq`` came from (``{"max_seq": "config.max_position_embeddings"}``).
        dims: one entry per named axis: ``{"input", "axis", "role", "name", "symbol", "min",
            "max"}`` (``max`` ``None``: unbounded).
    """

    max_seq: int | None = None
    sources: dict[str, str] = field(default_factory=dict)
    dims: list[dict[str, Any]] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)
    """One warning per axis the model's code specialised below its range (a shape guard)."""

    def as_dict(self) -> dict[str, Any]:
        """``{"max_seq", "sources", "dims"}``."""
        out = asdict(self)
        out.pop("notices")
        return out


GUARD_SEARCH_CAP = 4096
"""Largest size :func:`axis_bounds` checks the shape guards at on an axis with no upper bound."""


def _finite(bound: Any) -> int | None:
    try:
        value = int(bound)
    except (TypeError, ValueError, OverflowError, AttributeError):  # int_oo, sympy.oo
        return None
    return value if value < (1 << 62) else None


def axis_bounds(program: torch.export.ExportedProgram, names: list[AxisName],
                config: Any, input_names: list[str] | None = None) -> AxisBounds:
    """The range of every named axis: the program's own range (lower bound 2, torch.export's
    default, reported as 1), ``sequence`` axes capped at the :func:`position_limit`, and every
    axis capped where the model's code specialised the graph (a shape guard that fails above
    the example, :func:`~export_core.guards.guard_limits`; searched up to
    :data:`GUARD_SEARCH_CAP` on an unbounded axis), with a notice saying so. An unbounded axis
    whose guards reject some sizes and admit larger ones (a gap, such as multiples of 512)
    keeps no bound; the notice names the first rejected size.

    Args:
        program: the captured ``ExportedProgram`` (its ``range_constraints``).
        names: its axes, from :func:`axis_names`.
        config: the model's config, or ``None``.
        input_names: artifact input names, one per user input placeholder, in order (the
            guards name the inputs; default: the axes' inputs in order).

    Returns:
        The :class:`AxisBounds`.
    """
    limit = position_limit(config)
    plan = AxisBounds()
    if limit is not None:
        plan.max_seq, plan.sources["max_seq"] = limit[0], f"config.{limit[1]}"
    ranges = {str(sym): vr for sym, vr in program.range_constraints.items()}
    for a in names:
        vr = ranges.get(a.symbol)
        lo = _finite(vr.lower) if vr is not None else None
        hi = _finite(vr.upper) if vr is not None else None
        lo = 1 if lo is None or lo == 2 else lo
        if a.role == "sequence" and limit is not None:
            hi = limit[0] if hi is None else min(hi, limit[0])
        if a.role == "sequence" and hi is not None and (plan.max_seq is None or hi < plan.max_seq):
            if limit is None or hi < limit[0]:
                plan.max_seq, plan.sources["max_seq"] = hi, "the program's range"
        plan.dims.append({"input": a.input, "axis": a.axis, "role": a.role, "name": a.name,
                          "symbol": a.symbol, "min": lo, "max": hi})
    caps = {d["symbol"]: d["max"] or GUARD_SEARCH_CAP for d in plan.dims}
    inputs = input_names if input_names is not None else list(dict.fromkeys(a.input for a in names))
    guarded = guard_limits(program, inputs, caps)
    noticed: set[str] = set()
    for d in plan.dims:
        limit = guarded.get(d["symbol"])
        if limit is None:
            continue
        head = f"warning: {d['input']}[{d['axis']}] ({d['name']})"
        if d["max"] is None and limit.resumes is not None:
            # an unbounded axis with gaps (sizes a guard rejects, larger ones admitted): no
            # bound, a warning naming the first rejected size
            notice = (f"{head} is not admitted at {limit.max + 1} (its shape guard "
                      f"{limit.brief()} fails there, and holds again at {limit.resumes}): the "
                      "captured graph is specialised to the sizes its guards admit, so such "
                      "inputs give wrong results or errors")
        else:
            d["max"] = limit.max
            d["source"] = limit.source
            if d["role"] == "sequence" and (plan.max_seq is None or limit.max < plan.max_seq):
                plan.max_seq = limit.max
                plan.sources["max_seq"] = "the model's code (a shape guard)"
            notice = (f"{head} holds only up to {limit.max}: the captured graph is specialised "
                      f"to those sizes (at {limit.max + 1} its shape guard {limit.brief()} "
                      "fails), so larger inputs give wrong results or errors")
        if d["symbol"] not in noticed:
            noticed.add(d["symbol"])
            plan.notices.append(notice)
    return plan

