"""ONNX-stage patches that belong to the pipeline itself (not to one op's bug)."""

from __future__ import annotations

import threading
from typing import Any

from export_core.fixes import apply_fx_node_fixes
from export_core.registry import register_patch

__all__ = ["refixed_after_decompositions", "translations_used"]

_STATE = threading.local()


def refixed_after_decompositions() -> list[str]:
    """Names of node fixes applied to decomposed programs since the last call (and reset)."""
    out = list(getattr(_STATE, "applied", []))
    _STATE.applied = []
    return out


def translations_used() -> list[str]:
    """Names of custom translations whose ops appear in the programs decomposed since the last
    call (and reset): these are the translations ``torch.onnx`` will use."""
    out = list(getattr(_STATE, "translations", []))
    _STATE.translations = []
    return out


def _record_translations(program: Any) -> None:
    from .translations import _ONNX_TRANSLATION_TABLE

    seen = getattr(_STATE, "translations", [])
    for gm in program.graph_module.modules():
        graph = getattr(gm, "graph", None)
        if graph is None:
            continue
        for node in graph.nodes:
            rec = _ONNX_TRANSLATION_TABLE.get(node.target) if node.op == "call_function" else None
            if rec is not None and rec.name not in seen:
                seen = [*seen, rec.name]
    _STATE.translations = seen


@register_patch(
    "onnx",
    "torch.export.exported_program.ExportedProgram.run_decompositions",
    reason="torch.onnx decomposes the program again before translation; the decomposition "
    "introduces new nodes (shape guards, split and arithmetic forms) that the ONNX node fixes "
    "must repair too",
    upstream="https://github.com/pytorch/pytorch/issues/194381",
)
def _rerun_node_fixes(original: Any) -> Any:
    def run_decompositions(self: Any, *args: Any, **kwargs: Any) -> Any:
        program = original(self, *args, **kwargs)
        applied = apply_fx_node_fixes(program, "onnx")
        seen = getattr(_STATE, "applied", [])
        _STATE.applied = seen + [a for a in applied if a not in seen]
        _record_translations(program)
        return program

    return run_decompositions
