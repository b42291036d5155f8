"""ONNX-stage patches that belong to the pipeline itself (not to one op's bug)."""

from __future__ import annotations

import threading
from typing import Any

from export_core.fixes import apply_fx_node_fixes
from export_core.registry import register_patch

__all__ = ["refixed_after_decompositions"]

_STATE = threading.local()


def refixed_after_decompositions() -> list[str]:
    """Names of node fixes applied to decomposed programs since the last call (and reset)."""
    out = list(getattr(_STATE, "applied", []))
    _STATE.applied = []
    return out


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
        return program

    return run_decompositions
