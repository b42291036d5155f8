"""ONNX patch: re-run the ONNX node fixes on the program ``torch.onnx`` decomposes itself.

``torch.onnx.export`` calls ``ExportedProgram.run_decompositions`` on the program it is given,
and the decomposition creates nodes the captured program did not have (shape guards, ``split``
and arithmetic forms) with the same faults the FX node fixes repair. The patch wraps
``run_decompositions`` for the ONNX export only: the decomposed program goes through the
``fx_node_fixes`` stage's fixes again, and the patch records in the export's
:class:`~export_core.patching.PatchSession` which fixes fired and which custom translations the
decomposed program will use::

    run_decompositions(program) → apply_fx_node_fixes(run_decompositions(program))

Source: https://github.com/pytorch/pytorch/issues/194381
"""

from __future__ import annotations

from typing import Any

from export_core.fixes import apply_fx_node_fixes
from export_core.patching import PatchSession
from export_core.registry import register_patch

from ..stages import BACKEND
from ..translations import translation_records

__all__ = ["REFIXED", "TRANSLATED", "rerun_node_fixes"]

REFIXED = "onnx.refixed_after_decompositions"
"""Session key: names of the node fixes that changed a decomposed program."""
TRANSLATED = "onnx.translations_used"
"""Session key: names of the custom translations whose ops the decomposed programs contain."""


def _record_translations(program: Any, session: PatchSession) -> None:
    by_op = {op: rec.name for rec in translation_records() for op in rec.targets}
    for gm in program.graph_module.modules():
        graph = getattr(gm, "graph", None)
        if graph is None:
            continue
        for node in graph.nodes:
            if node.op == "call_function" and node.target in by_op:
                session.observe(TRANSLATED, by_op[node.target])


@register_patch(
    BACKEND,
    "torch.export.exported_program.ExportedProgram.run_decompositions",
    stage="onnx_patches",
    reason="torch.onnx decomposes the program again before translation; the decomposition "
    "introduces new nodes (shape guards, split and arithmetic forms) that the ONNX node fixes "
    "must repair too",
    upstream="https://github.com/pytorch/pytorch/issues/194381",
)
def rerun_node_fixes(original: Any, session: PatchSession) -> Any:
    """``run_decompositions`` followed by the ONNX node fixes; records into ``session``."""

    def run_decompositions(self: Any, *args: Any, **kwargs: Any) -> Any:
        program = original(self, *args, **kwargs)
        for name in apply_fx_node_fixes(program, BACKEND, stage="fx_node_fixes").applied:
            session.observe(REFIXED, name)
        _record_translations(program, session)
        return program

    return run_decompositions
