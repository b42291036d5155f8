"""The sizes a captured program holds for: its shape guards, evaluated over an axis's range.

Tracing records a guard in the shape environment each time code branches on a symbolic size;
``torch.export`` prints them into ``ExportedProgram._guards_code`` and checks them in
``ExportedProgram.module()``, and the graph is specialised to them. A branch on a derived size
specialises it silently: Mamba-2's chunked scan pads the sequence to a multiple of its chunk
(256) and, traced at 12 tokens, records ``256 >= L + pad`` (one chunk). The graph is then only
right up to 255 tokens, whatever range the axis declares: an ExecuTorch program planned for 512
fails at 300 (``et_view`` 0x12), and an artifact without checks computes with the wrong shapes.

:func:`guard_limits` finds, for each dynamic symbol of the user inputs, the largest size up to a
cap for which every guard holds (the symbols of the same example size moved with it, since the
guards may tie them; the others at their example sizes). Left out: guards that torch's stride
bookkeeping recorded (is a slice contiguous, do two tensors overlap: they set a fake tensor's
strides, not the graph) unless they compare a size with 1 or 2, guards on symbols that are not
input sizes (unbacked values), and, while a symbol moves, guards that relate it to sizes held at
the example (a mask as long as the past plus the new tokens: the caller keeps inputs consistent).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["LAYOUT_MARKERS", "MAX_POINTS", "GuardLimit", "guard_limits"]

MAX_POINTS = 4096
"""Most sizes checked per symbol before one by one: a longer range is searched down from its cap
at a stride (a passing size between two strided ones that fail is missed)."""


@dataclass(frozen=True)
class GuardLimit:
    """The largest size of one symbol that the program's guards admit below its cap.

    Attributes:
        symbol: the ``torch.export`` symbol (``s53``).
        example: the size traced.
        max: the largest size in ``[example, cap]`` that passes every guard (ExecuTorch plans
            memory for it; a guard such as an even size may reject some sizes below it).
        cap: the upper end searched (the axis's intended bound).
        guard: the first guard that fails at ``max + 1`` (its Python source over the input
            sizes, ``x.size(1)``).
        resumes: the first size above ``max + 1`` and at most ``2 * cap`` where every guard
            holds again (a guard such as "not a multiple of 512" fails at some sizes only), or
            ``None`` when none does up to there.
    """

    symbol: str
    example: int
    max: int
    cap: int
    guard: str
    resumes: int | None = None

    def brief(self, width: int = 160) -> str:
        """The failing guard, cut to ``width`` characters."""
        return self.guard if len(self.guard) <= width else self.guard[: width - 3] + "..."

    @property
    def source(self) -> str:
        """Where the axis's bound came from, for the report's ``bounds.dims[].source``."""
        return f"the model's code (a shape guard of the capture fails at {self.max + 1}: " \
               f"{self.brief()})"


LAYOUT_MARKERS = ("contiguous", "overlap", "strides", "should_swap")
"""Words that name torch's stride bookkeeping in the function (or source line) a guard was
recorded in: ``check_contiguous_sizes_strides``, ``is_non_overlapping_and_dense``,
``compute_elementwise_output_strides`` (its ``should_swap``), ``meta_copy_``'s
``_debug_has_internal_overlap``."""


def _is_layout_guard(guard: Any) -> bool:
    """Whether a guard was recorded by torch's own stride bookkeeping of a fake tensor and
    compares sizes with each other (not a size with 1 or 2).

    Such a guard decides a tensor's strides or an overlap check, never the graph: a padded
    copy ``new_zeros(b, max(s, 6), d)[:, :s] = x`` records ``d*max(6, s) != s*d`` (is the slice
    contiguous?) at every size below 6, and the graph is the same above it. A comparison with
    1 (the contiguity check's "is this a size-1 axis") is kept: the shape environment records
    an expression once, and the model's own branch on the same size (Mamba-2's "one chunk")
    finds it already decided and leaves no guard of its own.
    """
    import sympy

    expr = guard.expr
    if isinstance(expr, sympy.Rel) and any(side in (sympy.S.One, sympy.Integer(2))
                                           for side in (expr.lhs, expr.rhs)):
        return False
    frame = getattr(guard.sloc, "framework_loc", None)
    filename = getattr(frame, "filename", "") or ""
    if f"{os.sep}torch{os.sep}" not in filename:
        return False
    text = f"{getattr(frame, 'name', '')} {getattr(frame, 'line', '') or ''}"
    return any(marker in text for marker in LAYOUT_MARKERS)


def _input_shapes(program: torch.export.ExportedProgram,
                  input_names: list[str]) -> list[tuple[str, tuple[Any, ...]]]:
    """``(name, shape)`` of each user input tensor, sizes as sympy expressions or ints; named
    by its artifact name (its placeholder name beyond ``input_names``)."""
    user = set(program.graph_signature.user_inputs)
    nodes = [n for n in program.graph.nodes if n.op == "placeholder" and n.name in user]
    out = []
    for i, node in enumerate(nodes):
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor):
            shape = tuple(s.node.expr if isinstance(s, torch.SymInt) else int(s)
                          for s in value.shape)
            out.append((input_names[i] if i < len(input_names) else node.name, shape))
    return out


def _sources(shapes: list[tuple[str, tuple[Any, ...]]]) -> dict[Any, Any]:
    """``{symbol: Symbol("name.size(i)")}``: the first input axis that is exactly the symbol,
    to print guards in terms of the inputs."""
    import sympy

    out: dict[Any, Any] = {}
    for name, shape in shapes:
        for i, e in enumerate(shape):
            if isinstance(e, sympy.Symbol) and e not in out:
                out[e] = sympy.Symbol(f"{name}.size({i})", integer=True)
    return out


def guard_limits(
    program: torch.export.ExportedProgram,
    input_names: list[str],
    caps: Mapping[Any, int],
) -> dict[Any, GuardLimit]:
    """The largest guard-admitted size of each symbol whose guards reject its cap.

    Args:
        program: the captured ``ExportedProgram``.
        input_names: artifact input names, one per user input placeholder, in order.
        caps: ``{symbol: cap}``: the symbols of the dynamic input axes (sympy symbols or
            their names, ``"s53"``) and the upper end each is meant to reach.

    Returns:
        ``{symbol: GuardLimit}`` (keyed as in ``caps``) for each symbol whose guards reject its cap (symbols they
        admit at the cap are left out). Empty when the program has no guards or no symbol has
        an example size.
    """
    import sympy
    from torch.utils._sympy.printers import PythonPrinter

    shape_env = next((v.node.shape_env for n in program.graph.nodes if n.op == "placeholder"
                      for v in getattr(n.meta.get("val"), "shape", ())
                      if isinstance(v, torch.SymInt)), None)
    if shape_env is None or not shape_env.guards:
        return {}
    shapes = _input_shapes(program, input_names)
    symbols = {s for _, shape in shapes for e in shape if isinstance(e, sympy.Expr)
               for s in e.free_symbols}
    known = getattr(shape_env, "backed_var_to_val", None)
    if known is None:  # torch before backed_var_to_val
        known = shape_env.var_to_val
    hints = {s: known.get(s) for s in symbols}
    if any(h is None for h in hints.values()):
        return {}
    hints = {s: int(h) for s, h in hints.items()}
    sources = _sources(shapes)

    def holds(code: Any, values: dict[Any, int]) -> bool:
        scope = {str(sym): v for sym, v in values.items()}
        return bool(eval(code, {"__builtins__": {}, "max": max, "min": min}, scope))  # noqa: S307

    # the guards over the input sizes that hold at the example (after the shape environment's
    # replacements), stride bookkeeping left out; those on other symbols (unbacked) too. Each
    # is compiled from its Python form (torch.export prints its guards the same way).
    usable: dict[Any, tuple[Any, str, frozenset]] = {}
    printer = PythonPrinter()
    for guard in shape_env.guards:
        if _is_layout_guard(guard):
            continue
        expr = shape_env.replace(guard.expr)
        if expr in usable or not expr.free_symbols or not expr.free_symbols <= symbols:
            continue
        try:
            code = compile(printer.doprint(expr), "<guard>", "eval")
            if holds(code, hints):
                usable[expr] = (code, printer.doprint(expr.xreplace(sources)),
                                frozenset(expr.free_symbols))
        except Exception:  # noqa: BLE001, S112 - a guard whose Python form does not evaluate
            continue

    checks = list(usable.values())

    def failure(group: tuple[Any, ...], size: int) -> str | None:
        values = {**hints, **dict.fromkeys(group, size)}
        moved = set(group)
        for i, (code, text, free) in enumerate(checks):
            if not free <= moved:
                # a relation with sizes held at the example (a mask as long as the past and
                # the new tokens, features 8 per token): it ties inputs to each other, which
                # the caller keeps consistent, and bounds neither
                continue
            try:
                if holds(code, values):
                    continue
                failed = text
            except ZeroDivisionError:
                failed = f"{text} (it divides by zero at this size)"
            # the guard that failed is tried first at the next size (a search probes many
            # sizes that one guard rejects)
            checks.insert(0, checks.pop(i))
            return failed
        return None

    def largest_passing(group: tuple[Any, ...], example: int, cap: int) -> int:
        # down from the cap (at a stride beyond MAX_POINTS sizes), then every size above that
        step = max(1, -(-(cap - example) // MAX_POINTS))
        size = cap
        while size > example and failure(group, size) is not None:
            size -= step
        size = max(size, example)
        for above in range(min(size + step - 1, cap), size, -1):
            if failure(group, above) is None:
                return above
        return size

    # Symbols of one size at the example move together: torch.export may keep two symbols for
    # axes its guards tie (input_ids[1] and attention_mask[1] through an equality of sums).
    by_name = {str(sym): sym for sym in symbols}
    wanted = {by_name[str(k)]: (k, cap) for k, cap in caps.items() if str(k) in by_name}
    out: dict[Any, GuardLimit] = {}
    done: set[Any] = set()
    for sym in wanted:
        if sym in done:
            continue
        example = hints[sym]
        group = tuple(s for s in wanted if hints[s] == example)
        done.update(group)
        cap = min(wanted[s][1] for s in group)
        if cap <= example or not usable:
            continue
        top = largest_passing(group, example, cap)
        if top < cap:
            guard = failure(group, top + 1) or ""
            resumes = next((size for size in range(top + 2, 2 * cap + 1)
                            if failure(group, size) is None), None)
            for s in group:
                out[wanted[s][0]] = GuardLimit(str(s), example, top, wanted[s][1], guard,
                                               resumes)
    return out
