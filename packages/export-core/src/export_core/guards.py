"""The sizes a captured program holds for: its shape guards, evaluated over an axis's range.

``torch.export`` keeps the guards the model's Python code put on the input sizes in
``ExportedProgram._guards_code`` (Python expressions over ``L['name'].size()[i]``) and checks
them in ``ExportedProgram.module()``; the graph itself is specialised to them. A branch on a
derived size specialises it silently: Mamba-2's chunked scan pads the sequence to a multiple of
its chunk (256) and, traced at 12 tokens, records ``256 >= L + pad`` (one chunk). The graph is
then only right up to 255 tokens, whatever range the axis declares: an ExecuTorch program
planned for 512 fails at 300 (``et_view`` 0x12), and an artifact without checks computes with the
wrong shapes.

:func:`guard_limits` finds, for each dynamic symbol of the user inputs, the largest size up to a
cap for which every guard holds (the symbols of the same example size moved with it, since the
guards may tie them; the others at their example sizes). Guards that do not evaluate on plain sizes (strides of
views, unbacked values) are left out; the result is what the guards that do evaluate allow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["MAX_POINTS", "GuardLimit", "guard_limits"]

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
        guard: the first guard that fails at ``max + 1`` (its Python source, as
            ``torch.export`` wrote it).
    """

    symbol: str
    example: int
    max: int
    cap: int
    guard: str

    def brief(self, width: int = 160) -> str:
        """The failing guard, cut to ``width`` characters."""
        return self.guard if len(self.guard) <= width else self.guard[: width - 3] + "..."

    @property
    def source(self) -> str:
        """Where the axis's bound came from, for the report's ``bounds.dims[].source``."""
        return f"the model's code (a shape guard of the capture fails at {self.max + 1}: " \
               f"{self.brief()})"


class _Sizes:
    """Stands for an input tensor in a guard expression: ``size()``, ``dim()``, ``stride()``."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self._shape = shape

    def size(self, dim: int | None = None) -> Any:
        return self._shape if dim is None else self._shape[dim]

    def dim(self) -> int:
        return len(self._shape)

    def stride(self, dim: int | None = None) -> Any:
        strides, acc = [], 1
        for s in reversed(self._shape):
            strides.append(acc)
            acc *= max(s, 1)
        strides.reverse()
        return tuple(strides) if dim is None else strides[dim]


def _placeholder_shapes(program: torch.export.ExportedProgram, input_names: list[str]) -> dict:
    """``{name: shape}`` of the user inputs, sizes as sympy expressions or ints; each input is
    keyed by its placeholder name and by its artifact name."""
    user = set(program.graph_signature.user_inputs)
    shapes: dict[str, tuple[Any, ...]] = {}
    nodes = [n for n in program.graph.nodes if n.op == "placeholder" and n.name in user]
    for i, node in enumerate(nodes):
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            continue
        shape = tuple(s.node.expr if isinstance(s, torch.SymInt) else int(s) for s in value.shape)
        shapes[node.name] = shape
        if i < len(input_names):
            shapes.setdefault(input_names[i], shape)
    return shapes


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

    codes = [c for c in getattr(program, "_guards_code", None) or () if isinstance(c, str)]
    if not codes:
        return {}
    shapes = _placeholder_shapes(program, input_names)
    symbols = {s for shape in shapes.values() for e in shape if isinstance(e, sympy.Expr)
               for s in e.free_symbols}
    shape_env = next((v.node.shape_env for n in program.graph.nodes if n.op == "placeholder"
                      for v in getattr(n.meta.get("val"), "shape", ())
                      if isinstance(v, torch.SymInt)), None)
    if shape_env is None:
        return {}
    known = getattr(shape_env, "backed_var_to_val", None)
    if known is None:  # torch before backed_var_to_val
        known = shape_env.var_to_val
    hints = {s: known.get(s) for s in symbols}
    if any(h is None for h in hints.values()):
        return {}
    hints = {s: int(h) for s, h in hints.items()}
    compiled = []
    for code in codes:
        try:
            compiled.append((code, compile(code, "<guard>", "eval")))
        except SyntaxError:
            continue

    def env(values: dict[Any, int]) -> dict[str, Any]:
        subs = {s: sympy.Integer(v) for s, v in values.items()}
        concrete = {
            name: _Sizes(tuple(int(e.xreplace(subs)) if isinstance(e, sympy.Expr) else e
                               for e in shape))
            for name, shape in shapes.items()
        }
        return {"L": concrete, "max": max, "min": min}

    def failing(values: dict[Any, int], guards: list[tuple[str, Any]]) -> str | None:
        scope = env(values)
        for code, obj in guards:
            if not eval(obj, {"__builtins__": {}}, scope):  # noqa: S307 - torch.export's own guards
                return code
        return None

    # the guards that evaluate (and hold) at the example sizes; the others are left out
    scope = env(hints)
    usable = []
    for code, obj in compiled:
        try:
            if eval(obj, {"__builtins__": {}}, scope):  # noqa: S307
                usable.append((code, obj))
        except Exception:  # noqa: BLE001, S112 - a guard on what plain sizes do not model
            continue

    def failure(group: tuple[Any, ...], size: int) -> str | None:
        try:
            return failing({**hints, **dict.fromkeys(group, size)}, usable)
        except Exception:  # noqa: BLE001 - e.g. a division by zero at this size
            return "(a guard raised at this size)"

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
            for s in group:
                out[wanted[s][0]] = GuardLimit(str(s), example, top, wanted[s][1], guard)
    return out
