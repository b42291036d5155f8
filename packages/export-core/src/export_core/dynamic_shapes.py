"""Dynamic shapes for ``torch.export``: ``Dim.AUTO`` everywhere, named ranges, example-size checks.

``torch.export`` specialises a dimension whose example size is 0 or 1, so example inputs must use
sizes >= 2 on every axis meant to be dynamic; ranges then admit 1 (batch 1, one token).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.export import Dim

__all__ = ["auto_dynamic_shapes", "spec_tree", "specialised_dims", "resized_inputs", "revalued_inputs", "DIM_AUTO"]

DIM_AUTO = Dim.AUTO


def _auto_for(leaf: Any) -> Any:
    if isinstance(leaf, torch.Tensor):
        return {i: Dim.AUTO for i in range(leaf.dim())} if leaf.dim() else None
    return None


def spec_tree(value: Any, leaf_spec: Any) -> Any:
    """``value``'s ``dynamic_shapes`` entry: ``leaf_spec(tensor)`` at each tensor, dicts, lists and
    tuples kept, and a registered custom pytree node (a ``transformers`` cache, a dataclass) as
    the list of its children's entries, the form ``torch.export`` expects for such a node."""
    if isinstance(value, torch.Tensor):
        return leaf_spec(value)
    if isinstance(value, dict):
        return {k: spec_tree(v, leaf_spec) for k, v in value.items()}
    if isinstance(value, list | tuple) and type(value) in (list, tuple):
        return type(value)(spec_tree(v, leaf_spec) for v in value)
    node = pytree.SUPPORTED_NODES.get(type(value))
    if node is not None:
        children, _ = node.flatten_fn(value)
        return [spec_tree(c, leaf_spec) for c in children]
    return None


def auto_dynamic_shapes(inputs: dict[str, Any] | tuple[Any, ...]) -> dict[str, Any] | tuple[Any, ...]:
    """``dynamic_shapes`` with ``Dim.AUTO`` on every axis of every tensor and cache leaf.

    ``torch.export`` then decides per axis: axes the model treats as static (hidden size,
    channels) are specialised silently; the others become symbols. A cache (any registered
    pytree node) gets the list of its children's entries.

    Args:
        inputs: the ``forward`` keyword arguments (dict) or positional arguments (tuple).

    Returns:
        A structure matching ``inputs`` in ``torch.export``'s ``dynamic_shapes`` format.
    """
    if isinstance(inputs, dict):
        return {k: spec_tree(v, _auto_for) for k, v in inputs.items()}
    return tuple(spec_tree(v, _auto_for) for v in inputs)


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
