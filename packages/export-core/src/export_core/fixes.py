"""Running registered FX node fixes and FX program fixes over a traced program."""

from __future__ import annotations

import logging
from typing import Any

import torch

from .errors import FixError
from .registry import fx_node_fixes_for, fx_program_fixes_for

__all__ = ["apply_fx_node_fixes", "apply_fx_program_fixes", "iter_graph_modules"]

logger = logging.getLogger(__name__)


def iter_graph_modules(gm: torch.fx.GraphModule) -> list[torch.fx.GraphModule]:
    """``gm`` and every nested ``GraphModule`` (cond/while branches, HOP bodies)."""
    return [m for m in gm.modules() if isinstance(m, torch.fx.GraphModule)]


def _matches(targets: tuple[Any, ...], node: torch.fx.Node) -> bool:
    if not targets:
        return True
    t = node.target
    packet = getattr(t, "overloadpacket", None)
    return any(t is want or (packet is not None and packet is want) for want in targets)


def apply_fx_node_fixes(
    program: torch.export.ExportedProgram | torch.fx.GraphModule, backend: str
) -> list[str]:
    """Offer every ``call_function`` node to the node fixes registered for ``backend``.

    The graph is rewritten in place; dead code is eliminated and the graph recompiled when
    anything changed.

    Args:
        program: an ``ExportedProgram`` (its ``graph_module`` is fixed) or a ``GraphModule``.
        backend: backend key, e.g. ``"onnx"`` or ``"executorch.xnnpack"``.

    Returns:
        Names of the fixes that changed the graph, each once, in first-applied order.

    Raises:
        FixError: a fix raised.
    """
    fixes = fx_node_fixes_for(backend)
    if not fixes:
        return []
    root = program.graph_module if hasattr(program, "graph_module") else program
    applied: list[str] = []
    for gm in iter_graph_modules(root):
        changed = False
        for node in list(gm.graph.nodes):
            if node.op != "call_function" or node.graph is not gm.graph:
                continue
            for fix in fixes:
                if not _matches(fix.targets, node):
                    continue
                try:
                    did = fix.fn(node)
                except Exception as e:
                    raise FixError(
                        f"FX node fix {fix.name} failed on {node.format_node()}: "
                        f"{type(e).__name__}: {e}"
                    ) from e
                if did:
                    changed = True
                    if fix.name not in applied:
                        applied.append(fix.name)
                    break
        if changed:
            gm.graph.eliminate_dead_code()
            gm.graph.lint()
            gm.recompile()
    if applied:
        logger.debug("FX node fixes applied for %s: %s", backend, applied)
    return applied


def apply_fx_program_fixes(
    program: torch.export.ExportedProgram, backend: str
) -> tuple[torch.export.ExportedProgram, list[str]]:
    """Run the FX program fixes registered for ``backend`` in order.

    Returns:
        The (possibly replaced) program and the names of the fixes that changed it.

    Raises:
        FixError: a fix raised.
    """
    applied: list[str] = []
    for fix in fx_program_fixes_for(backend):
        try:
            out = fix.fn(program)
        except Exception as e:
            raise FixError(f"FX program fix {fix.name} failed: {type(e).__name__}: {e}") from e
        if out is not None:
            program = out
            applied.append(fix.name)
    return program, applied
