"""A time budget on ``torch.export``'s symbolic shape reasoning, for capture strategies that have a
cheaper fallback.

Some models make the symbolic reasoning of a capture explode: windowed vision attention (the Swin
family, DaViT) pads the image to a multiple of the window, partitions it with ``view`` and merges
patches with more padding, so with a dynamic height and width every ``view`` asks the
``ShapeEnv`` to prove a divisibility of nested ``FloorDiv``/``Mod`` expressions, and each
simplification takes longer than the one before (a tiny Swin with dynamic image axes was still
tracing after 180 s; with static image axes it captures in 6 s). Upstream:
https://github.com/pytorch/pytorch/issues/141675 (tracing stuck in ``FloorDiv``'s simplification
with dynamic shapes).

:func:`symbolic_budget` times the ``ShapeEnv``'s guard evaluation and simplification while it is
active and raises :class:`SymbolicBudgetExceeded` from inside the trace once they have taken
more than the budget, so the caller can capture again with fewer dynamic axes
(:func:`export_core.exporter._torch_export`). The ``ShapeEnv`` methods are swapped only for the
``with`` block (the caller holds :data:`~export_core.patching.EXPORT_LOCK`) and always restored.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = ["SymbolicBudgetExceeded", "SymbolicClock", "budget_exceeded", "symbolic_budget"]

_TIMED_METHODS = ("evaluate_expr", "simplify")
"""The ``ShapeEnv`` methods timed: guard evaluation and the simplification it runs."""


class SymbolicBudgetExceeded(Exception):
    """The symbolic shape reasoning of one capture attempt took longer than its budget.

    Attributes:
        seconds: the seconds spent in the timed ``ShapeEnv`` methods when it was raised.
        budget: the budget in seconds.
    """

    def __init__(self, seconds: float, budget: float) -> None:
        super().__init__(
            f"symbolic shape reasoning took over {budget:g} s ({seconds:.1f} s spent in the "
            "ShapeEnv's guard evaluation and simplification)"
        )
        self.seconds = seconds
        self.budget = budget


@dataclass
class SymbolicClock:
    """Seconds spent in the timed ``ShapeEnv`` methods (outermost calls only).

    Attributes:
        budget: the budget in seconds.
        spent: seconds of finished outermost calls.
        depth: nesting depth of the timed calls now running.
        entered: ``time.monotonic()`` when the running outermost call began.
    """

    budget: float
    spent: float = 0.0
    depth: int = 0
    entered: float = 0.0

    def elapsed(self) -> float:
        """Seconds spent so far, the running call included."""
        return self.spent + (time.monotonic() - self.entered if self.depth else 0.0)

    def check(self) -> None:
        """Raise :class:`SymbolicBudgetExceeded` once :meth:`elapsed` exceeds the budget."""
        elapsed = self.elapsed()
        if elapsed > self.budget:
            raise SymbolicBudgetExceeded(elapsed, self.budget)

    def timed(self, method: Callable[..., Any]) -> Callable[..., Any]:
        """``method`` checked against the budget on entry and timed when outermost."""

        @functools.wraps(method)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.check()
            if self.depth == 0:
                self.entered = time.monotonic()
            self.depth += 1
            try:
                return method(*args, **kwargs)
            finally:
                self.depth -= 1
                if self.depth == 0:
                    self.spent += time.monotonic() - self.entered

        return wrapper


@contextmanager
def symbolic_budget(seconds: float) -> Iterator[SymbolicClock]:
    """Limit the symbolic shape reasoning inside the block to ``seconds``.

    Args:
        seconds: the budget of the timed ``ShapeEnv`` methods, in seconds (> 0).

    Yields:
        The :class:`SymbolicClock` (its ``spent`` after the block tells how much was used).

    Raises:
        SymbolicBudgetExceeded: (from the traced code, through ``torch.export``) the budget is
            spent.
    """
    from torch.fx.experimental import symbolic_shapes

    ShapeEnv = symbolic_shapes.ShapeEnv
    clock = SymbolicClock(budget=float(seconds))
    originals = {name: ShapeEnv.__dict__[name] for name in _TIMED_METHODS}
    # the wrappers' frames are not the model's code: a data-dependent guard error's "Caused by"
    # line must still name the model's line (torch skips the files in this cached set)
    skipped = symbolic_shapes.uninteresting_files()
    added = __file__ not in skipped
    try:
        skipped.add(__file__)
        for name, method in originals.items():
            setattr(ShapeEnv, name, clock.timed(method))
        yield clock
    finally:
        for name, method in originals.items():
            setattr(ShapeEnv, name, method)
        if added:
            skipped.discard(__file__)


def budget_exceeded(error: BaseException) -> SymbolicBudgetExceeded | None:
    """The :class:`SymbolicBudgetExceeded` behind ``error`` (itself, or in its cause/context
    chain: ``torch.export`` may wrap it), or ``None``."""
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        if isinstance(e, SymbolicBudgetExceeded):
            return e
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return None
