"""Dynamic shapes for ``torch.export``: ``Dim.AUTO`` everywhere, named ranges, example-size checks.

``torch.export`` specialises a dimension whose example size is 0 or 1, so example inputs must use
sizes >= 2 on every axis meant to be dynamic; ranges then admit 1 (batch 1, one token).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export import Dim

from .errors import InputError

__all__ = ["auto_dynamic_shapes", "check_dynamic_shapes", "declared_dims", "spec_tree", "specialised_dims",
           "resized_inputs", "revalued_inputs", "static_image_axes", "DeclaredDim", "DIM_AUTO"]

DIM_AUTO = Dim.AUTO


def _auto_for(leaf: Any) -> Any:
    if isinstance(leaf, torch.Tensor):
        return {i: Dim.AUTO for i in range(leaf.dim())} if leaf.dim() else None
    return None


_BUILTIN_MAPPINGS = (dict, collections.OrderedDict, collections.defaultdict)


def spec_tree(value: Any, leaf_spec: Any) -> Any:
    """``value``'s ``dynamic_shapes`` entry: ``leaf_spec(tensor)`` at each tensor, dicts, lists and
    tuples kept, and a registered custom pytree node (a ``transformers`` cache, a dataclass) as
    the list of its children's entries, the form ``torch.export`` expects for such a node."""
    if isinstance(value, torch.Tensor):
        return leaf_spec(value)
    if type(value) in (list, tuple):
        return type(value)(spec_tree(v, leaf_spec) for v in value)
    node = pytree.SUPPORTED_NODES.get(type(value))
    # a ModelOutput is a dict subclass registered as a node of its own: its entry is a list
    if node is not None and type(value) not in _BUILTIN_MAPPINGS:
        children, _ = node.flatten_fn(value)
        return [spec_tree(c, leaf_spec) for c in children]
    if isinstance(value, dict):
        return {k: spec_tree(v, leaf_spec) for k, v in value.items()}
    return None


def auto_dynamic_shapes(inputs: dict[str, Any] | tuple[Any, ...]) -> dict[str, Any] | tuple[Any, ...]:
    """``dynamic_shapes`` with ``Dim.AUTO`` on every axis of every tensor and cache leaf (but
    the fixed axes of packed vision patches: :func:`_static_packed_features`).

    ``torch.export`` then decides per axis: axes the model treats as static (hidden size,
    channels) are specialised silently; the others become symbols. A cache (any registered
    pytree node) gets the list of its children's entries.

    Args:
        inputs: the ``forward`` keyword arguments (dict) or positional arguments (tuple).

    Returns:
        A structure matching ``inputs`` in ``torch.export``'s ``dynamic_shapes`` format.
    """
    if isinstance(inputs, dict):
        spec = {k: spec_tree(v, _auto_for) for k, v in inputs.items()}
        return _static_packed_features(inputs, spec)
    return tuple(spec_tree(v, _auto_for) for v in inputs)


def _static_packed_features(inputs: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """Beside a grid input (:data:`export_core.axes.GRID_INPUTS`, ``(images, 3)``), the grid's
    ``(t, h, w)`` axis and the feature axis of each 2-d floating input (packed patches,
    ``(patches, channels * temporal_patch * patch**2)``, fixed by the patch embedding) are
    ``Dim.STATIC``. Left to ``Dim.AUTO``, the feature axis stays a symbol (the model only
    reshapes it) that the ExecuTorch memory plan bounds like a sequence, several times the
    arena the one valid size needs."""
    from .axes import GRID_INPUTS

    if not any(isinstance(inputs.get(k), torch.Tensor) for k in GRID_INPUTS):
        return spec
    out = dict(spec)
    for name, value in inputs.items():
        entry = spec.get(name)
        if not isinstance(value, torch.Tensor) or value.dim() != 2 or not isinstance(entry, dict):
            continue
        if name in GRID_INPUTS or value.dtype.is_floating_point:
            out[name] = {**entry, 1: Dim.STATIC}
    return out


def static_image_axes(inputs: dict[str, Any] | tuple[Any, ...],
                      spec: dict[str, Any] | tuple[Any, ...]) -> dict[str, Any] | tuple[Any, ...] | None:
    """``spec`` (an :func:`auto_dynamic_shapes` structure for ``inputs``) with the height and
    width of every image input (:func:`export_core.axes.axis_role` ``"image"``: the last two
    axes of ``pixel_values`` ``(batch, channels, height, width)``) made ``Dim.STATIC``.

    Returns:
        The new structure, or ``None`` when no top-level input has an image axis (nothing to
        specialise).
    """
    from .axes import axis_role

    names = list(inputs) if isinstance(inputs, dict) else [f"input_{i}" for i in range(len(inputs))]
    values = list(inputs.values()) if isinstance(inputs, dict) else list(inputs)
    entries = list(spec.values()) if isinstance(spec, dict) else list(spec)
    changed = False
    out = []
    for name, value, entry in zip(names, values, entries):
        if isinstance(value, torch.Tensor) and isinstance(entry, dict):
            image = [i for i in entry if axis_role(name, value, i) == "image"]
            if image:
                entry = {i: (Dim.STATIC if i in image else d) for i, d in entry.items()}
                changed = True
        out.append(entry)
    if not changed:
        return None
    return dict(zip(names, out)) if isinstance(spec, dict) else tuple(out)


@dataclass(frozen=True)
class DeclaredDim:
    """A ``torch.export.Dim`` the caller declared on one axis of a top-level tensor input.

    Attributes:
        input: the input's name (the ``forward`` argument).
        axis: the axis index.
        name: the ``Dim``'s name (``"edges"``).
        min: its declared minimum (``None``: not given).
        max: its declared maximum (``None``: unbounded).
    """

    input: str
    axis: int
    name: str
    min: int | None
    max: int | None


def _top_level(inputs: dict[str, Any] | tuple[Any, ...], spec: Any,
               names: list[str] | None = None) -> list[tuple[str, Any, Any]]:
    """``(name, value, spec)`` per top-level input; raises when the structures differ."""
    if isinstance(inputs, dict):
        keys = list(inputs)
        if isinstance(spec, dict):
            unknown = [k for k in spec if k not in inputs]
            if unknown:
                raise InputError(
                    f"dynamic_shapes names {', '.join(map(repr, unknown))}, which the inputs do "
                    f"not have (inputs: {', '.join(keys)}); key dynamic_shapes by input name",
                    stage="dynamic_shapes")
            return [(k, inputs[k], spec.get(k)) for k in keys]
        values = list(inputs.values())
    else:
        keys = list(names or [f"input_{i}" for i in range(len(inputs))])[: len(inputs)]
        keys += [f"input_{i}" for i in range(len(keys), len(inputs))]
        values = list(inputs)
        if isinstance(spec, dict):
            raise InputError("dynamic_shapes is a dict but the inputs are a tuple; give a tuple "
                             "with one entry per positional input", stage="dynamic_shapes")
    if not isinstance(spec, list | tuple):
        raise InputError(f"dynamic_shapes must be a dict or a tuple, got {type(spec).__name__}",
                         stage="dynamic_shapes")
    if len(spec) != len(values):
        raise InputError(f"dynamic_shapes has {len(spec)} entries for {len(values)} inputs "
                         f"({', '.join(keys)})", stage="dynamic_shapes")
    return list(zip(keys, values, spec))


def _int_or_none(value: Any) -> int | None:
    if not isinstance(value, int) or isinstance(value, bool):
        return None  # int_oo (a sympy infinity) and anything else that is no plain int
    number = value
    return number if abs(number) < 2**62 else None


def check_dynamic_shapes(inputs: dict[str, Any] | tuple[Any, ...], spec: Any,
                         names: list[str] | None = None) -> list[DeclaredDim]:
    """Check that ``spec`` (``torch.export``'s ``dynamic_shapes``) fits ``inputs``, and list
    the ``Dim`` objects it declares on top-level tensor inputs.

    Checked for every top-level tensor input: its entry is ``None``, a dict ``{axis: dim}``
    with ``0 <= axis < ndim``, or a list / tuple of ``ndim`` entries. Nested inputs (caches)
    are left to ``torch.export``.

    Args:
        inputs: the ``forward`` keyword arguments (dict) or positional arguments (tuple).
        spec: the ``dynamic_shapes`` structure.
        names: the names of positional inputs (tuple ``inputs``), for the messages.

    Returns:
        One :class:`DeclaredDim` per axis given a named ``Dim`` (not ``Dim.AUTO`` /
        ``Dim.DYNAMIC`` / ``Dim.STATIC`` hints, not ints).

    Raises:
        InputError: (stage ``dynamic_shapes``) the structure, a key or an axis does not match
            the inputs; the message names the input and the axis.
    """
    declared: list[DeclaredDim] = []
    for name, value, entry in _top_level(inputs, spec, names):
        if entry is None or not isinstance(value, torch.Tensor):
            continue
        shape = tuple(value.shape)
        if isinstance(entry, dict):
            items = list(entry.items())
            bad = [a for a, _ in items if not isinstance(a, int) or not 0 <= a < len(shape)]
            if bad:
                raise InputError(
                    f"dynamic_shapes[{name!r}] names axis {bad[0]!r}, but {name} has "
                    f"{len(shape)} axes (shape {list(shape)}); use axes 0 to {len(shape) - 1}",
                    stage="dynamic_shapes")
        elif isinstance(entry, list | tuple):
            if len(entry) != len(shape):
                raise InputError(
                    f"dynamic_shapes[{name!r}] has {len(entry)} entries, but {name} has "
                    f"{len(shape)} axes (shape {list(shape)})", stage="dynamic_shapes")
            items = list(enumerate(entry))
        else:
            raise InputError(f"dynamic_shapes[{name!r}] must be a dict, a list or None, got "
                             f"{type(entry).__name__}", stage="dynamic_shapes")
        for axis, dim in items:
            if isinstance(dim, Dim) and hasattr(dim, "max"):  # a named torch.export.Dim
                declared.append(DeclaredDim(name, axis, dim.__name__, _int_or_none(dim.min),
                                            _int_or_none(dim.max)))
    return declared


def declared_dims(inputs: dict[str, Any] | tuple[Any, ...], spec: Any,
                  names: list[str] | None = None) -> dict[tuple[str, int], DeclaredDim]:
    """The named ``Dim`` objects of ``spec`` by ``(input, axis)``; ``{}`` when ``spec`` is
    ``None`` (see :func:`check_dynamic_shapes`)."""
    if spec is None:
        return {}
    return {(d.input, d.axis): d for d in check_dynamic_shapes(inputs, spec, names)}


def specialised_dims(program: torch.export.ExportedProgram) -> list[str]:
    """User-input axes that came out static, as ``"<input>[<axis>]=<size>"`` strings."""
    out = []
    sig = program.graph_signature
    user = set(sig.user_inputs)
    for node in program.graph.nodes:
        if node.op != "placeholder" or node.name not in user:
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            for i, s in enumerate(val.shape):
                if isinstance(s, int):
                    out.append(f"{node.name}[{i}]={s}")
    return out


def _as_int(bound: Any, default: int) -> int:
    try:
        return int(bound)
    except (TypeError, ValueError, OverflowError, AttributeError):
        return default


def _size_of(dim: Any, example: int, sizes: dict[Any, int]) -> int:
    """The new size of one axis: its symbolic expression evaluated at the new symbol sizes."""
    if not isinstance(dim, torch.SymInt):
        return example
    expr = dim.node.expr
    if not getattr(expr, "free_symbols", None):
        return example
    try:
        return int(expr.xreplace(sizes))
    except (TypeError, ValueError):
        return example


def resized_inputs(
    program: torch.export.ExportedProgram,
    inputs: dict[str, Any] | tuple[Any, ...],
    *,
    seed: int = 0,
) -> list[dict[str, Any] | tuple[Any, ...]]:
    """New input sets whose dynamic axes take other sizes than the example's, for validation.

    Each symbol of the program's user inputs gets, in the first set, its example size + 1 (or - 1
    at its upper bound) and, in the second, its lower bound (1 when the bound is torch.export's default of 2).
    Float leaves are drawn from a normal distribution, integer leaves within the example's value
    range, bool leaves uniformly.

    Returns:
        Zero to two input sets in the structure of ``inputs`` (none when nothing is dynamic).
    """
    user = [n for n in program.graph.nodes if n.op == "placeholder" and n.name in set(program.graph_signature.user_inputs)]
    flat, spec = pytree.tree_flatten(inputs)
    tensor_pos = [i for i, x in enumerate(flat) if isinstance(x, torch.Tensor)]
    if len(tensor_pos) != len(user):
        return []
    symbols: dict[Any, tuple[int, int, int]] = {}
    for node, i in zip(user, tensor_pos):
        val = node.meta.get("val")
        for s, ex in zip(getattr(val, "shape", ()), flat[i].shape):
            expr = s.node.expr if isinstance(s, torch.SymInt) else None
            if expr is not None and getattr(expr, "is_Symbol", False):
                vr = program.range_constraints.get(expr)
                lo = _as_int(vr.lower, 2) if vr is not None else 2
                hi = _as_int(vr.upper, 1 << 30) if vr is not None else 1 << 30
                symbols[expr] = (int(ex), max(lo, 1), hi)
    if not symbols:
        return []
    g = torch.Generator().manual_seed(seed)
    out = []
    for pick in ("bigger", "lowest"):
        sizes = {}
        for expr, (ex, lo, hi) in symbols.items():
            if pick == "bigger":
                sizes[expr] = ex + 1 if ex + 1 <= hi else max(lo, ex - 1)
            else:
                # 2 is torch.export's default lower bound for a backed symbol, not a model limit
                sizes[expr] = 1 if lo <= 2 else lo
        new_flat = list(flat)
        for node, i in zip(user, tensor_pos):
            val, ex = node.meta.get("val"), flat[i]
            shape = [_size_of(s, d, sizes) for s, d in zip(val.shape, ex.shape)]
            new_flat[i] = _draw_like(ex, shape, g)
        out.append(pytree.tree_unflatten(new_flat, spec))
    return out


def _draw_like(example: torch.Tensor, shape: list[int], g: torch.Generator) -> torch.Tensor:
    """New values of ``example``'s dtype: normal floats, integers within the example's value
    range, uniform bools."""
    if example.dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if example.dtype.is_floating_point or example.dtype.is_complex:
        return torch.randn(shape, generator=g).to(example.dtype)
    lo_v = int(example.min()) if example.numel() else 0
    hi_v = int(example.max()) if example.numel() else 1
    return torch.randint(lo_v, hi_v + 1, shape, generator=g, dtype=example.dtype)


def revalued_inputs(
    inputs: dict[str, Any] | tuple[Any, ...], *, seed: int = 1
) -> dict[str, Any] | tuple[Any, ...]:
    """An input set with the shapes of ``inputs`` and other values, to validate a static export
    at its own shapes on a second set of values.

    Float leaves are drawn from a normal distribution, integer leaves within the example's value
    range (an all-ones attention mask stays all ones), bool leaves uniformly.
    """
    flat, spec = pytree.tree_flatten(inputs)
    g = torch.Generator().manual_seed(seed)
    new_flat = [_draw_like(x, list(x.shape), g) if isinstance(x, torch.Tensor) else x for x in flat]
    return pytree.tree_unflatten(new_flat, spec)
