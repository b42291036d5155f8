"""The memory an ExecuTorch program plans: its activation arena and the program size."""

from __future__ import annotations

from typing import Any

from export_core.budget import format_bytes

from .bounds import ROLE_OPTIONS

__all__ = ["ARENA_WARN_BYTES", "arena_warning", "format_bytes", "memory_plan"]

ARENA_WARN_BYTES = 1 << 30
"""Planned arenas above this (1 GiB) get a warning suggesting smaller bounds."""


def memory_plan(manager: Any, method: str = "forward") -> dict[str, Any]:
    """The planned memory of ``method`` of an ``ExecutorchProgramManager``.

    ExecuTorch allocates, when the method is loaded, one buffer per memory id of the execution
    plan's ``non_const_buffer_sizes`` (id 0 is reserved and always 0), sized for the upper bound of
    every dynamic dimension. Delegates (XNNPACK) allocate their own scratch memory on top.

    Args:
        manager: the ``ExecutorchProgramManager`` returned by ``to_executorch``.
        method: the method name.

    Returns:
        ``{"arena_bytes": total planned bytes, "buffers": [bytes per memory id]}``.
    """
    program = manager.executorch_program
    plan = next((p for p in program.execution_plan if p.name == method), program.execution_plan[0])
    sizes = [int(s) for s in plan.non_const_buffer_sizes]
    return {"arena_bytes": sum(sizes), "buffers": sizes}


def arena_warning(arena_bytes: int, bounds: dict[str, Any]) -> str | None:
    """A one-line warning when ``arena_bytes`` exceeds :data:`ARENA_WARN_BYTES`, else ``None``.

    Args:
        arena_bytes: the planned arena in bytes.
        bounds: the report's ``bounds`` dict (``max_batch``, ``max_seq``, ...).
    """
    if arena_bytes <= ARENA_WARN_BYTES:
        return None
    roles = {d.get("role") for d in bounds.get("dims", [])} or {"batch", "sequence"}
    options = [o for r, o in ROLE_OPTIONS.items() if r in roles]
    caps = ", ".join(f"{o}={bounds.get(o)}" for o in options)
    flags = " / ".join("--" + o.replace("_", "-") for o in options)
    return (
        f"the program plans {format_bytes(arena_bytes)} of activations for {caps}; "
        f"lower {flags} for a smaller arena"
    )
