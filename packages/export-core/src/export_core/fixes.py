"""Running registered fixes at their stage, with one result shape for every kind.

A fix stage takes the program the previous stage produced and returns a :class:`FixesApplied`:
the program (the same object when rewritten in place, a new one otherwise), the names of the
fixes that changed it, and the details they reported. A failing fix raises
:class:`~export_core.errors.FixError` naming the fix, the stage and the fixes that ran before it.

Kinds:

- FX node fixes (``fn(node) -> bool``): every ``call_function`` node is offered to the fixes
  whose targets match; :func:`apply_fx_node_fixes`.
- Program-level fixes (``fn(program, context) -> FixResult``): FX program fixes
  (:func:`apply_fx_program_fixes`), and backend kinds such as ONNX IR fixes, through
  :func:`apply_program_fixes`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._guards import detect_fake_mode
from torch.utils._pytree import tree_leaves

from .errors import ExportError, FixError
from .registry import FX_NODE_FIX, FX_PROGRAM_FIX, Workaround, workarounds_for

__all__ = [
    "FixContext",
    "FixResult",
    "FixesApplied",
    "apply_fx_node_fixes",
    "decompose_called",
    "apply_fx_program_fixes",
    "apply_program_fixes",
    "call_after",
    "call_before",
    "called_targets",
    "iter_graph_modules",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FixResult:
    """What one program-level fix did.

    Attributes:
        program: the program after the fix (the input itself when rewritten in place).
        modified: whether the fix changed anything.
        details: what the fix reports (a bounds plan, a count of rewritten nodes), or ``None``.
    """

    program: Any
    modified: bool
    details: Any = None


@dataclass(frozen=True)
class FixContext:
    """What a program-level fix may read about the export it runs in.

    Attributes:
        backend: the registry key being exported for (``"executorch.xnnpack"``).
        stage: the stage running the fix.
        config: the exporter's config (a ``DynamoConfig`` subclass).
        capture: the :class:`~export_core.exporter.CaptureResult` (input and output names, the
            traced module), or ``None`` outside an export.
    """

    backend: str
    stage: str
    config: Any = None
    capture: Any = None


@dataclass(frozen=True)
class FixesApplied:
    """What one fix stage did: the same shape for every kind.

    Attributes:
        program: the program after the stage.
        applied: names of the fixes that changed it, each once, in first-applied order.
        details: ``{fix name: details}`` for fixes that reported any.
    """

    program: Any
    applied: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)


def iter_graph_modules(gm: torch.fx.GraphModule) -> list[torch.fx.GraphModule]:
    """``gm`` and every nested ``GraphModule`` (cond/while branches, HOP bodies)."""
    return [m for m in gm.modules() if isinstance(m, torch.fx.GraphModule)]


def call_before(node: torch.fx.Node, target: Any, *args: Any, **kwargs: Any) -> torch.fx.Node:
    """Insert ``target(*args, **kwargs)`` before ``node`` (an FX node fix's replacement nodes),
    with ``node``'s metadata (stack trace, module stack) and the fake value of the call, computed
    from the arguments' ``meta["val"]`` (nodes inside lists too: a ``view`` to sizes that are
    ``sym_size`` nodes) under the program's fake mode (symbolic sizes carry over, and an op of
    sizes alone, ``arange(n)``, gets a symbolic size instead of a guard on ``n``).

    Raises:
        KeyError: a node argument has no ``meta["val"]``.
    """
    with node.graph.inserting_before(node):
        return _call_like(node, target, args, kwargs)


def call_after(node: torch.fx.Node, target: Any, *args: Any, **kwargs: Any) -> torch.fx.Node:
    """Insert ``target(*args, **kwargs)`` right after ``node``, as :func:`call_before` does
    before it (``node``'s metadata, the call's fake value). A chain of calls after one node
    inserts each after the node the previous call returned.

    Raises:
        KeyError: a node argument has no ``meta["val"]``.
    """
    with node.graph.inserting_after(node):
        return _call_like(node, target, args, kwargs)


def _call_like(node: torch.fx.Node, target: Any, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> torch.fx.Node:
    """A new ``target(*args, **kwargs)`` node at the graph's insertion point, with ``node``'s
    metadata but the fake value of the call."""
    new = node.graph.call_function(target, args, kwargs)
    new.meta.update({k: v for k, v in node.meta.items() if k != "val"})
    values, kw_values = torch.fx.node.map_aggregate(
        (args, kwargs), lambda a: a.meta["val"] if isinstance(a, torch.fx.Node) else a)
    leaves = [v for v in tree_leaves((values, kw_values))
              if isinstance(v, torch.Tensor)]
    fake_mode = detect_fake_mode([*leaves, node.meta.get("val")])
    with fake_mode if fake_mode is not None else contextlib.nullcontext():
        new.meta["val"] = target(*values, **kw_values)
    return new


def called_targets(program: Any, targets: Any) -> set[Any]:
    """The members of ``targets`` (op overloads or functions) that ``program`` (an
    ``ExportedProgram`` or a ``GraphModule``, nested graphs included) calls."""
    root = program.graph_module if hasattr(program, "graph_module") else program
    return {
        node.target
        for gm in iter_graph_modules(root)
        for node in gm.graph.nodes
        if node.op == "call_function" and node.target in targets
    }


def decompose_called(program: Any, decompositions: dict[Any, Any]) -> FixResult:
    """``program.run_decompositions`` with the entries of ``decompositions`` (op overload ->
    Python decomposition) whose op the program calls; every other node is left as it was.

    Returns:
        ``FixResult(new program, True, [op names])`` when the program calls one of the ops, else
        ``FixResult(program, False)``.
    """
    called = called_targets(program, decompositions)
    if not called:
        return FixResult(program, False)
    table = {op: fn for op, fn in decompositions.items() if op in called}
    return FixResult(program.run_decompositions(table), True, sorted(str(op) for op in called))


def _matches(targets: tuple[Any, ...], node: torch.fx.Node) -> bool:
    if not targets:
        return True
    t = node.target
    packet = getattr(t, "overloadpacket", None)
    return any(t is want or (packet is not None and packet is want) for want in targets)


def _failure(kind: str, fix: Workaround, ran: Sequence[str], cause: str, e: Exception) -> FixError:
    before = f" after [{', '.join(ran)}]" if ran else ""
    return FixError(
        f"{kind} {fix.name} (stage {fix.stage}){before} failed{cause}: {type(e).__name__}: {e}",
        stage=fix.stage,
    )


def apply_fx_node_fixes(
    program: torch.export.ExportedProgram | torch.fx.GraphModule,
    backend: str,
    *,
    stage: str | None = None,
) -> FixesApplied:
    """Offer every ``call_function`` node to the node fixes registered for ``backend``.

    The graph is rewritten in place; dead code is eliminated and the graph recompiled when
    anything changed.

    Args:
        program: an ``ExportedProgram`` (its ``graph_module`` is fixed) or a ``GraphModule``.
        backend: backend key, e.g. ``"executorch.xnnpack"`` (its parent keys' fixes run too).
        stage: run only the fixes registered at this stage (default: all).

    Returns:
        A :class:`FixesApplied` whose ``program`` is ``program``.

    Raises:
        FixError: a fix raised; the message names the fix, its stage and the node.
    """
    fixes = workarounds_for(backend, FX_NODE_FIX, stage)
    if not fixes:
        return FixesApplied(program)
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
                    raise _failure("FX node fix", fix, applied, f" on {node.format_node()}", e) from e
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
    return FixesApplied(program, tuple(applied))


def apply_program_fixes(
    kind: str, program: Any, backend: str, context: FixContext, *, stage: str | None = None
) -> FixesApplied:
    """Run the program-level fixes of ``kind`` registered for ``backend``, in order, each on
    the previous one's program.

    Args:
        kind: the workaround kind (``"fx_program_fix"``, a backend's ``"ir_fix"``).
        program: the program the stage starts from.
        backend: the backend key.
        context: passed to every fix.
        stage: run only the fixes registered at this stage (default: all).

    Returns:
        A :class:`FixesApplied`.

    Raises:
        FixError: a fix raised, or returned something other than a :class:`FixResult`.
        ExportError: a fix raised one of its own (an ``InputError`` for an option it cannot
            honour); it is re-raised with the fix's stage.
    """
    applied: list[str] = []
    ran: list[str] = []
    details: dict[str, Any] = {}
    for fix in workarounds_for(backend, kind, stage):
        try:
            out = fix.fn(program, context)
            if not isinstance(out, FixResult):
                raise TypeError(f"returned {type(out).__name__}, not a FixResult")
        except ExportError as e:  # a fix that refuses the user's input says so itself
            e.stage = fix.stage  # the stage that failed is the fix's, whatever the error's kind
            raise
        except Exception as e:
            raise _failure(kind.replace("_", " "), fix, ran, "", e) from e
        ran.append(fix.name)
        program = out.program
        if out.modified:
            applied.append(fix.name)
        if out.details is not None:
            details[fix.name] = out.details
    return FixesApplied(program, tuple(applied), details)


def apply_fx_program_fixes(
    program: torch.export.ExportedProgram,
    backend: str,
    context: FixContext | None = None,
    *,
    stage: str | None = None,
) -> FixesApplied:
    """Run the FX program fixes registered for ``backend`` (see :func:`apply_program_fixes`)."""
    context = context or FixContext(backend, stage or FX_PROGRAM_FIX)
    return apply_program_fixes(FX_PROGRAM_FIX, program, backend, context, stage=stage)
