"""ExecuTorch patch (``executorch_patches``): upper bounds of sizes that are exact quotients.

Before planning memory, ``to_executorch`` replaces every symbolic size with its upper bound
(``executorch.exir.sym_util.eval_upper_bound``: interval arithmetic, ``bound_sympy``, over the
input dimensions' ranges). A ``view(-1, heads, q_len, k_len)`` of a ``(batch * heads, q_len,
k_len)`` tensor infers its first size as ``(4*s0*L**2) // (L*(4*g + 4))`` where the frame count
``L = g + 1`` and ``g = ((s1 // 10) - 3) // 2`` (SEW-D's attention over a convolved waveform): the
quotient is exactly ``s0``, but sympy does not see that ``4*g + 4 == 4*L``, and the interval of
the quotient divides the numerator's maximum by the denominator's minimum. Two ways it fails:

- Too large: ``1276802`` instead of ``8``. A view shares its base's memory, so its planned
  tensor overruns the arena and the program does not load (``MemoryAllocationFailed``, 0x21:
  "offset_bytes + size_bytes >= allocator size").
- Unbounded: ``s0 * ((4*s0) // that)`` has the interval ``[0, oo]``, and ``eval_upper_bound``
  then falls back to the *example's* size (``8`` for batch 2, where the true bound is 32): the
  program loads but a larger input fails at run time (a bounded tensor resized past its
  capacity).

The patch rewrites each floor division (and modulo) whose divisor divides the dividend as
polynomials — with the nested ``//`` / ``%`` terms as atoms, integer coefficients — into the exact
quotient (and ``0``), bounds that, and keeps the smaller of the two upper bounds (both are sound;
the example-size fallback is not, and is replaced). A size with no exact form whose interval is
unbounded (Mamba-2's chunk length ``L // (L // 256)`` of a padded length ``L``: the example's
size, 256, where two chunks make 512) gets the maximum over every point of its symbols' ranges
when those are at most :data:`ENUMERATION_LIMIT` points. A size read from tensor data (an
unbacked symbol, unbounded) that the program asserts equal to an expression of the inputs' sizes
(``torch._check(u == n // 4)``: Qwen2.5-VL's window order, one per merged token) is bounded as
that expression (:func:`asserted_sizes`); ExecuTorch does not read the assertions and fails
("Cannot evaluate a finite upper bound"). A size with floor divisions or modulos also gets its
maximum over a grid (:func:`grid_upper_bound`): the symbols it never decreases in (a batch) at
their maximum, every point of the others' ranges evaluated at once (Hiera's unrolled window
count: interval arithmetic gave 617657 where there are 8 at most, an arena of 1.7 TiB). A common
factor of a floor division's dividend and divisor cancels first (``(g*a)//(g*b)`` is ``a//b``).
Any other size keeps ExecuTorch's bound.

Upstream: ExecuTorch bounds sizes by ``bound_sympy`` since
https://github.com/pytorch/executorch/pull/264; the interval of a quotient of correlated terms
is not tight, and ``int_oo`` falls back to the trace hint (``sym_util.eval_upper_bound``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from export_core.patching import MARKS_OWN_FIRING, PatchSession
from export_core.registry import register_patch

from ..stages import BACKEND

__all__ = [
    "ENUMERATION_LIMIT",
    "GRID_LIMIT",
    "UPPER_BOUND_TARGETS",
    "asserted_sizes",
    "enumerated_upper_bound",
    "exact_quotients",
    "grid_upper_bound",
    "independent_factors",
    "tight_upper_bound",
]

UPPER_BOUND_TARGETS = (
    "executorch.exir.sym_util.eval_upper_bound",
    "executorch.exir.passes.sym_shape_eval_pass.eval_upper_bound",
)
"""The function and the module that imports it by name (executorch 1.5.1)."""


def _exact_quotient(dividend: Any, divisor: Any) -> Any:
    """``dividend / divisor`` when it is a polynomial with integer coefficients (the nested
    ``//`` / ``%`` terms as atoms), else ``None``."""
    import sympy

    quotient = sympy.cancel(dividend / divisor)
    numerator, denominator = sympy.fraction(quotient)
    if denominator != 1:
        return None
    if numerator.is_Integer:
        return numerator
    try:
        coefficients = sympy.Poly(numerator).coeffs()
    except sympy.PolynomialError:
        return None
    return numerator if all(c.is_integer for c in coefficients) else None


@lru_cache(maxsize=4096)
def exact_quotients(expr: Any) -> Any:
    """``expr`` with each ``FloorDiv(a, b)`` whose ``b`` divides ``a`` exactly replaced by the
    quotient, and each such ``Mod`` / ``PythonMod`` by ``0`` (innermost first); any other
    ``FloorDiv(g*a, g*b)`` becomes ``FloorDiv(a, b)`` (the same rational, so the same floor).

    Args:
        expr: a sympy integer expression of sizes (``torch.utils._sympy.functions`` terms).

    Returns:
        An equal expression (the same object when nothing was rewritten). Exact for every value
        of the symbols where ``b != 0``; sizes never divide by zero. Cached: ``to_executorch``
        bounds the same size expressions for many tensors' shapes and strides.
    """
    import sympy
    from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod

    if not getattr(expr, "args", ()):
        return expr
    args = [exact_quotients(a) for a in expr.args]
    if any(new is not old for new, old in zip(args, expr.args, strict=True)):
        expr = expr.func(*args)
    if isinstance(expr, (FloorDiv, Mod, PythonMod)):
        quotient = _exact_quotient(*expr.args)
        if quotient is not None:
            return quotient if isinstance(expr, FloorDiv) else sympy.Integer(0)
    if isinstance(expr, FloorDiv):
        # (g*a) // (g*b) == a // b for any g != 0 (g == 0 divides by zero: no input gets there)
        dividend, divisor = expr.args
        common = sympy.gcd(dividend, divisor)
        if common != 1 and common != 0 and not common.is_Number:
            reduced = (sympy.cancel(dividend / common), sympy.cancel(divisor / common))
            if all(sympy.fraction(r)[1] == 1 for r in reduced):
                return FloorDiv(*reduced)
    return expr


ENUMERATION_LIMIT = 4096
"""Most points :func:`enumerated_upper_bound` evaluates (the product of the symbols' ranges)."""


def independent_factors(expr: Any) -> tuple[Any, list[Any]]:
    """``expr`` as ``(constant, factors)``: its product's factors without symbols multiplied
    into ``constant``, the others merged where they share a symbol, so that no two returned
    factors have a symbol in common (``8*b*(p//8)*(p//(p//8))`` is ``8``, ``[b, (p//8)*(p//(p
    //8))]``)."""
    import sympy

    constant = sympy.Integer(1)
    groups: list[tuple[set[Any], list[Any]]] = []
    for factor in sympy.Mul.make_args(expr):
        symbols = set(factor.free_symbols)
        if not symbols:
            constant *= factor
            continue
        joined = [g for g in groups if g[0] & symbols]
        for g in joined:
            groups.remove(g)
            symbols |= g[0]
        groups.append((symbols, [f for g in joined for f in g[1]] + [factor]))
    return constant, [sympy.Mul(*factors) for _, factors in groups]


def _finite_ranges(expr: Any, var_to_range: dict[Any, Any]) -> dict[Any, tuple[int, int]] | None:
    """``{symbol: (lo, hi)}`` for each symbol of ``expr``; ``None`` when a range is not finite."""
    import sympy

    ranges: dict[Any, tuple[int, int]] = {}
    for sym in expr.free_symbols:
        rng = var_to_range.get(sym)
        lo, hi = (getattr(rng, "lower", None), getattr(rng, "upper", None))
        if not (isinstance(lo, sympy.Integer) and isinstance(hi, sympy.Integer)):
            return None
        ranges[sym] = (int(lo), int(hi))
    return ranges


def enumerated_upper_bound(
    expr: Any, var_to_range: dict[Any, Any], limit: int = ENUMERATION_LIMIT
) -> int | None:
    """The exact maximum of ``expr`` over every integer point of its symbols' ranges.

    For a size whose interval is unbounded (a quotient by a term whose range reaches 0, such
    as Mamba's chunk length ``L // (L // 256)`` of a padded length ``L``) but whose symbols
    are bounded: ExecuTorch would take the example's size. A product of factors over disjoint
    symbols (:func:`independent_factors`: a batch times a patch count) is maximised one factor
    at a time, each over its own symbols' points, when every factor is non-negative.

    Args:
        expr: a sympy integer expression of sizes.
        var_to_range: the shape environment's ranges of the symbols.
        limit: the most points to evaluate for one factor.

    Returns:
        The maximum, or ``None`` when a symbol's range is not finite, a factor's points exceed
        ``limit``, a factor holds a term :func:`_compiled` does not know, none evaluates, or a
        factor of a product of several takes a negative value. Points where the expression divides by zero
        are skipped: no input reaches them (the eager model would divide by zero too).
    """
    import math

    ranges = _finite_ranges(expr, var_to_range)
    if ranges is None:
        return None
    constant, factors = independent_factors(expr)
    if not factors or not constant.is_Integer or constant < 0:
        return None
    bound = int(constant)
    for factor in factors:
        grid = tuple((sym, *ranges[sym]) for sym in sorted(factor.free_symbols, key=str))
        if math.prod(hi - lo + 1 for _, lo, hi in grid) > limit:
            return None
        extremes = _range_over_grid(factor, grid)
        if extremes is None or (len(factors) > 1 and extremes[0] < 0):
            return None
        bound *= extremes[1]
    return bound


GRID_LIMIT = 1 << 21
"""Most points :func:`grid_upper_bound` evaluates (the product of the ranges of the symbols it
does not fix at their maximum)."""


def _compiled(expr: Any, index: dict[Any, int],
              undefined: list[Any]) -> Callable[[Sequence[Any]], Any] | None:
    """``expr`` as a function of integer arrays, one per symbol of ``index`` (in order), or
    ``None`` when it holds a term other than integer sums, products, powers, floor and ceiling
    divisions, modulos, ``Max`` and ``Min``.

    ``FloorDiv`` and ``PythonMod`` are Python's ``//`` and ``%``; ``Mod`` (C semantics) takes
    the dividend's sign. Each division appends to ``undefined`` the mask of the points where its
    divisor is 0 (their values are meaningless)."""
    import operator
    from functools import reduce

    import numpy as np
    import sympy
    from torch.utils._sympy.functions import (
        CeilDiv,
        FloorDiv,
        Max,
        Min,
        Mod,
        PowByNatural,
        PythonMod,
    )

    if isinstance(expr, sympy.Integer):
        value = int(expr)
        return lambda _: np.int64(value)
    if isinstance(expr, sympy.Symbol):
        if expr not in index:
            return None
        i = index[expr]
        return lambda point: point[i]
    parts = [_compiled(a, index, undefined) for a in expr.args]
    if not parts or any(p is None for p in parts):
        return None
    if isinstance(expr, sympy.Add):
        return lambda point: reduce(operator.add, (p(point) for p in parts))
    if isinstance(expr, sympy.Mul):
        return lambda point: reduce(operator.mul, (p(point) for p in parts))
    if isinstance(expr, (sympy.Max, Max)):
        return lambda point: reduce(np.maximum, (p(point) for p in parts))
    if isinstance(expr, (sympy.Min, Min)):
        return lambda point: reduce(np.minimum, (p(point) for p in parts))
    if len(parts) != 2:
        return None
    a, b = parts
    if isinstance(expr, (sympy.Pow, PowByNatural)):
        exponent = expr.args[1]
        if not (isinstance(exponent, sympy.Integer) and int(exponent) >= 0):
            return None
        return lambda point: a(point) ** int(exponent)
    divisions = {FloorDiv: np.floor_divide, PythonMod: np.mod, Mod: np.fmod}
    op = next((f for t, f in divisions.items() if isinstance(expr, t)), None)
    if isinstance(expr, CeilDiv):
        op = lambda x, y: -np.floor_divide(-x, y)  # noqa: E731 - one expression
    if op is None:
        return None

    def divide(point: Sequence[Any]) -> Any:
        x, y = a(point), b(point)
        zero = y == 0
        undefined.append(zero)
        return op(x, np.where(zero, 1, y))

    return divide


def _nondecreasing_in(expr: Any, sym: Any, var_to_range: dict[Any, Any]) -> bool:
    """Whether ``expr`` provably never decreases as ``sym`` grows, the other symbols fixed:
    ``sym`` reaches it only through sums, products whose factors are non-negative, and the
    dividends of floor divisions by a positive divisor free of ``sym``."""
    import sympy
    from torch.utils._sympy.functions import FloorDiv
    from torch.utils._sympy.value_ranges import bound_sympy

    if sym not in expr.free_symbols or expr == sym:
        return True
    if isinstance(expr, sympy.Add):
        return all(_nondecreasing_in(a, sym, var_to_range) for a in expr.args)
    if isinstance(expr, sympy.Mul):
        return all(
            bound_sympy(a, var_to_range).lower >= 0 and _nondecreasing_in(a, sym, var_to_range)
            for a in expr.args)
    if isinstance(expr, FloorDiv):
        dividend, divisor = expr.args
        return (sym not in divisor.free_symbols and bound_sympy(divisor, var_to_range).lower > 0
                and _nondecreasing_in(dividend, sym, var_to_range))
    return False


@lru_cache(maxsize=4096)
def _range_over_grid(expr: Any, grid: tuple[tuple[Any, int, int], ...]) -> tuple[int, int] | None:
    """``(min, max)`` of ``expr`` over the integer points of ``grid`` (``(symbol, lo, hi)``),
    evaluated at every point at once (:func:`_compiled`); ``None`` when it cannot be compiled
    or every point divides by zero (no input reaches those: eager would divide by zero too)."""
    import numpy as np

    undefined: list[Any] = []
    function = _compiled(expr, {sym: i for i, (sym, _, _) in enumerate(grid)}, undefined)
    if function is None:
        return None
    axes = np.meshgrid(*(np.arange(lo, hi + 1, dtype=np.int64) for _, lo, hi in grid),
                       indexing="ij", sparse=True)
    shape = np.broadcast_shapes(*(a.shape for a in axes))
    values = np.broadcast_to(function(axes), shape)
    valid = np.ones(shape, dtype=bool)
    for zero in undefined:
        valid &= ~np.broadcast_to(zero, shape)
    if not valid.any():
        return None
    kept = values[valid]
    return int(kept.min()), int(kept.max())


def grid_upper_bound(expr: Any, var_to_range: dict[Any, Any], limit: int = GRID_LIMIT) -> int | None:
    """A sound upper bound of a size with floor divisions or modulos, tighter than intervals.

    Interval arithmetic bounds each term of a quotient alone: Hiera's unrolled token count
    ``b*(h//(4*(h//8)))*...//((h//4)*(w//4))`` gets the numerator's maximum over the
    denominator's minimum, 617657 windows where there are at most 64, and the planned arena
    (1.7 TiB) does not load. Here every symbol the size provably never decreases in
    (:func:`_nondecreasing_in`: a batch multiplying the rest) is fixed at its maximum, and the
    size is maximised exactly over every point of the other symbols' ranges, when they are at
    most ``limit`` points.

    Args:
        expr: a sympy integer expression of sizes.
        var_to_range: the shape environment's ranges of the symbols.
        limit: the most points to evaluate.

    Returns:
        The bound, or ``None`` when ``expr`` has no floor division or modulo (intervals are
        then exact for the sums and products of sizes), a symbol's range is not finite, the
        points exceed ``limit``, or the expression holds a term :func:`_compiled` does not know.
    """
    import math

    import sympy
    from torch.utils._sympy.functions import CeilDiv, FloorDiv, Mod, PythonMod

    if not expr.has(FloorDiv, Mod, PythonMod, CeilDiv):
        return None
    ranges = _finite_ranges(expr, var_to_range)
    if ranges is None:
        return None
    fixed = {sym: sympy.Integer(hi) for sym, (_, hi) in ranges.items()
             if _nondecreasing_in(expr, sym, var_to_range)}
    rest = expr.xreplace(fixed) if fixed else expr
    grid = tuple((sym, *ranges[sym]) for sym in sorted(rest.free_symbols, key=str))
    if math.prod(hi - lo + 1 for _, lo, hi in grid) > limit:
        return None
    extremes = _range_over_grid(rest, grid)
    return None if extremes is None else extremes[1]


def asserted_sizes(shape_env: Any) -> dict[Any, Any]:
    """The sizes read from tensor data that the program asserts equal to an expression of
    input sizes.

    Args:
        shape_env: the ``ShapeEnv`` of the program's fake values; its
            ``deferred_runtime_asserts`` are the ``_assert_scalar`` nodes' expressions.

    Returns:
        ``{u: e}`` for each assertion ``Eq(u, e)`` (either side) where ``u`` is an unbacked
        symbol and ``e`` has no unbacked symbol: every run of the program has ``u == e`` (the
        assertion fails otherwise), so ``e``'s bound is ``u``'s.
    """
    import sympy
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    sizes: dict[Any, Any] = {}
    for asserts in shape_env.deferred_runtime_asserts.values():
        for ra in asserts:
            expr = ra.expr
            if not isinstance(expr, sympy.Eq):
                continue
            for lhs, rhs in (expr.args, expr.args[::-1]):
                if (isinstance(lhs, sympy.Symbol) and free_unbacked_symbols(lhs)
                        and not free_unbacked_symbols(rhs)):
                    sizes.setdefault(lhs, rhs)
    return sizes


def _finite_upper(expr: Any, var_to_range: dict[Any, Any]) -> int | None:
    """The interval upper bound of ``expr`` over ``var_to_range``, ``None`` when not finite."""
    import sympy
    from torch.utils._sympy.value_ranges import bound_sympy

    upper = bound_sympy(sympy.sympify(expr), var_to_range).upper
    return int(upper) if isinstance(upper, sympy.Integer) else None


def tight_upper_bound(expr: Any, var_to_range: dict[Any, Any]) -> int | None:
    """The upper bound of :func:`exact_quotients` of ``expr`` over ``var_to_range``; ``None``
    when nothing was rewritten or the bound is not finite."""
    exact = exact_quotients(expr)
    if exact is expr:
        return None
    return _finite_upper(exact, var_to_range)


def _register(target: str) -> None:
    name = f"{BACKEND}:{target}"

    @register_patch(
        BACKEND,
        target,
        stage="executorch_patches",
        reason=(
            "to_executorch bounds each size by interval arithmetic: an exact quotient such as a "
            "view's inferred -1 ((4*b*L**2)//(L*(4*g+4)), SEW-D) gets a bound far above the true "
            "one (the program's view overruns the arena: 0x21 at load) or none, where the "
            "example's size is used (larger inputs fail at run time); exact quotients are "
            "simplified before bounding, and a size with floor divisions gets its maximum over "
            "its symbols' points (Hiera's window count: 617657 by intervals, 8 in fact)"
        ),
        upstream="https://github.com/pytorch/executorch/pull/264",
        versions=("executorch", ">=1.0,<1.6"),
    )
    def upper_bounds_of_exact_quotients(original: Any, session: PatchSession) -> Any:
        """``eval_upper_bound(size) -> int`` that bounds the exact-quotient form of a symbolic
        size (:func:`tight_upper_bound`) and answers the smaller bound; marked fired where that
        differs from ExecuTorch's answer (or ExecuTorch raised).

        Source: https://github.com/pytorch/executorch/pull/264
        """

        def eval_upper_bound(maybe_symint: Any) -> int:
            if isinstance(maybe_symint, int):
                return maybe_symint
            import sympy
            from torch.utils._sympy.value_ranges import bound_sympy

            node = maybe_symint.node
            expr, ranges = node.expr, node.shape_env.var_to_range
            finite = isinstance(bound_sympy(expr, ranges).upper, sympy.Integer)
            if not finite:
                # sizes read from data that the program asserts equal to input sizes
                expr = expr.xreplace(asserted_sizes(node.shape_env))
            tight = tight_upper_bound(expr, ranges)
            if tight is None and expr is not node.expr:
                tight = _finite_upper(expr, ranges)
            if tight is None and not finite:
                # no exact form: the maximum over the symbols' ranges, where they are few
                tight = enumerated_upper_bound(expr, ranges)
            if finite or tight is None:
                # quotients of correlated terms: the maximum over the non-monotone symbols
                grid = grid_upper_bound(exact_quotients(expr), ranges)
                if grid is not None and (tight is None or grid < tight):
                    tight = grid
            try:
                bound = original(maybe_symint)
            except RuntimeError:
                if tight is None:
                    raise
                session.mark_fired(name)
                return tight
            if tight is None or tight == bound:
                return bound
            # ExecuTorch's bound is either sound and larger, or the example's size (unbounded
            # interval), which the exact form or the maximum replaces with a sound bound
            session.mark_fired(name)
            return min(bound, tight) if finite else tight

        setattr(eval_upper_bound, MARKS_OWN_FIRING, True)
        return eval_upper_bound


for _target in UPPER_BOUND_TARGETS:
    _register(_target)
