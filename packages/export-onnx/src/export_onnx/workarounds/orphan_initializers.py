"""ONNX IR fix: constant inputs the onnxscript rewriter created but left out of the graph.

A rewrite rule that creates initializers (the ``Min``/``Max`` -> ``Clip`` fusions name theirs
``<x>_min`` / ``<x>_max``, ``Reshape(Reshape(x))`` reuses the shape's name) registers them in
``graph.initializers`` by name, overwriting an entry of the same name. When a rule fires twice on
one input ``x`` (the same activation clamped to two ranges, as Gemma 4's audio encoder does), the
first fused node keeps a constant input that is no longer in the graph; the naming pass then
gives it a fresh name (``<x>_min_1``) and the saved model fails to load::

    INVALID_ARGUMENT : Invalid model. Node input 'mul_296_min_1' is not a graph input,
    initializer, or output of a previous node.

The fix registers each such value, a node input with a constant value that no node produces and
no graph holds, as an initializer of the graph that uses it (renamed when its name is taken).

Source: https://github.com/microsoft/onnxscript/issues/2945
"""

from __future__ import annotations

import onnx_ir as ir

from export_core.fixes import FixContext, FixResult

from ..ir_fixes import register_ir_fix

__all__ = ["fix_ir_orphan_initializers", "orphan_constants"]


def orphan_constants(graph: ir.Graph) -> list[tuple[ir.Value, ir.Graph]]:
    """Constant node inputs of ``graph`` (and its subgraphs) that belong to no graph.

    Returns:
        ``(value, graph)`` pairs, each value once, with the graph whose node first uses it.
    """
    found: dict[int, tuple[ir.Value, ir.Graph]] = {}
    for node in ir.traversal.RecursiveGraphIterator(graph):
        for value in node.inputs:
            if (value is None or value.const_value is None or value.producer() is not None
                    or value.graph is not None or id(value) in found):
                continue
            found[id(value)] = (value, node.graph or graph)
    return list(found.values())


def _names(graph: ir.Graph, skip: set[int]) -> set[str]:
    """Names of the values of ``graph`` and its subgraphs, except those in ``skip`` (ids)."""
    values = [*graph.inputs, *graph.initializers.values()]
    for node in ir.traversal.RecursiveGraphIterator(graph):
        values.extend(v for v in (*node.inputs, *node.outputs) if v is not None)
    return {v.name for v in values if v.name and id(v) not in skip}


@register_ir_fix(
    reason="the onnxscript rewriter registers the initializers a rule creates by name, so a rule "
    "firing twice on one input (two Min/Max -> Clip fusions) drops the first one's constant "
    "from the graph and the model fails to load ('is not a graph input, initializer, or output')",
    upstream="https://github.com/microsoft/onnxscript/issues/2945",
)
def fix_ir_orphan_initializers(model: ir.Model, context: FixContext | None = None) -> FixResult:
    """Register constant node inputs that belong to no graph as initializers.

    Args:
        model: the optimized ONNX model, edited in place.
        context: the export's fix context (unused).

    Returns:
        ``FixResult(model, modified, details={"registered": <number of values>})``.

    Source: https://github.com/microsoft/onnxscript/issues/2945
    """
    orphans = orphan_constants(model.graph)
    if not orphans:
        return FixResult(model, False, None)
    taken = _names(model.graph, {id(value) for value, _ in orphans})
    for value, graph in orphans:
        base, name, k = value.name or "constant", value.name or "constant", 0
        while name in taken or name in graph.initializers:
            k += 1
            name = f"{base}_orphan{k}"
        value.name = name
        taken.add(name)
        graph.register_initializer(value)
    return FixResult(model, True, {"registered": len(orphans)})
