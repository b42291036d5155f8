"""ONNX IR fixes: rewrites of the finished ONNX model (an ``onnx_ir.Model``) before it is saved.

Each fix is ``fn(model: onnx_ir.Model) -> int`` returning how many nodes it rewrote; it is
registered with :func:`register_ir_fix` with its reason and upstream bug, and reported when it
rewrites anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["IrFixRecord", "register_ir_fix", "ir_fix_records", "apply_ir_fixes"]


@dataclass(frozen=True)
class IrFixRecord:
    """One ONNX IR fix (``_fix_ir_<name>`` by convention)."""

    name: str
    fn: Callable[[Any], int]
    reason: str
    upstream: str


_IR_FIXES: dict[str, IrFixRecord] = {}


def register_ir_fix(*, reason: str, upstream: str) -> Callable[[Callable[[Any], int]], Callable[[Any], int]]:
    """Register ``fn(model) -> int`` as an IR fix.

    Raises:
        ValueError: the name is registered twice, or reason/upstream is empty.
    """

    def decorate(fn: Callable[[Any], int]) -> Callable[[Any], int]:
        if not reason or not upstream:
            raise ValueError(f"{fn.__name__}: an IR fix needs a reason and an upstream link")
        if fn.__name__ in _IR_FIXES:
            raise ValueError(f"IR fix {fn.__name__!r} is registered twice")
        _IR_FIXES[fn.__name__] = IrFixRecord(fn.__name__, fn, reason, upstream)
        return fn

    return decorate


def ir_fix_records() -> list[IrFixRecord]:
    """Registered IR fixes in registration order."""
    return list(_IR_FIXES.values())


def apply_ir_fixes(model: Any) -> list[str]:
    """Run every IR fix on ``model`` (an ``onnx_ir.Model``), in place.

    Returns:
        Names of the fixes that rewrote at least one node.
    """
    from export_core.errors import FixError

    applied = []
    for rec in _IR_FIXES.values():
        try:
            n = rec.fn(model)
        except Exception as e:
            raise FixError(f"IR fix {rec.name} failed: {type(e).__name__}: {e}", stage="ir-fix") from e
        if n:
            applied.append(rec.name)
    return applied
