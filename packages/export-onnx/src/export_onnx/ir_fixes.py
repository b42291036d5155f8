"""ONNX IR fixes: rewrites of the finished ONNX model (an ``onnx_ir.Model``) before it is saved.

Each fix is ``fn(model, context) -> FixResult`` (``export_core.fixes``), registered with
:func:`register_ir_fix` as an ``ir_fix`` workaround in the core registry with its reason and
upstream bug; the ``ir_fixes`` stage runs them in registration order and reports those that
rewrote anything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from export_core.fixes import FixContext, FixesApplied, apply_program_fixes
from export_core.registry import Workaround, register_workaround, workarounds_for

from .stages import BACKEND, IR_FIX

__all__ = ["apply_ir_fixes", "ir_fix_records", "register_ir_fix"]


def register_ir_fix(*, reason: str, upstream: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(model, context) -> FixResult`` as an ONNX IR fix.

    Raises:
        ValueError: the name is registered twice, the reason is empty or the link is not an
            issue / pull request URL.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        register_workaround(Workaround(IR_FIX, BACKEND, "ir_fixes", fn.__name__, (), fn, reason,
                                       upstream))
        return fn

    return decorate


def ir_fix_records() -> list[Workaround]:
    """Registered IR fixes in registration order."""
    return workarounds_for(BACKEND, IR_FIX)


def apply_ir_fixes(model: Any, context: FixContext | None = None) -> FixesApplied:
    """Run every IR fix on ``model`` (an ``onnx_ir.Model``, edited in place).

    Returns:
        The :class:`~export_core.fixes.FixesApplied` of the ``ir_fixes`` stage.

    Raises:
        FixError: a fix raised (the message names it and the fixes before it).
    """
    context = context or FixContext(BACKEND, "ir_fixes")
    return apply_program_fixes(IR_FIX, model, BACKEND, context, stage="ir_fixes")
