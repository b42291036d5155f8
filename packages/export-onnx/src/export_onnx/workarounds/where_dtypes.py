"""ONNX IR fix: ``Where`` on data types ONNX Runtime's CPU kernel does not implement.

ONNX allows ``Where`` on every tensor type, but ONNX Runtime's CPU provider registers it only
for float16/float/double, int8/uint8, int32/uint32, int64 and string, so a model with a ``bool``
(or int16, uint16, uint64, bfloat16) ``Where`` fails to load::

    NOT_IMPLEMENTED : Could not find an implementation for Where(16) node

It arises wherever a select produces such a tensor: ``masked_fill`` / ``torch.where`` on bool
masks, the translation of ``aten.index_put`` / ``clamp`` on int16, and so on, so it is fixed on
the finished model rather than per aten op. Each such ``Where(cond, X, Y) -> Z`` becomes
``Cast(Where(cond, Cast(X, wide), Cast(Y, wide)), dtype) -> Z`` with a wider type that holds
every value exactly (``uint64`` goes through ``int64``: a two's-complement round trip).

Source: https://github.com/microsoft/onnxruntime/issues/24127
"""

from __future__ import annotations

import onnx_ir as ir

from export_core.fixes import FixContext, FixResult

from ..ir_fixes import register_ir_fix

__all__ = ["WHERE_COMPUTE_TYPES", "fix_ir_where_dtypes"]

WHERE_COMPUTE_TYPES: dict[ir.DataType, ir.DataType] = {
    ir.DataType.BOOL: ir.DataType.UINT8,
    ir.DataType.INT16: ir.DataType.INT32,
    ir.DataType.UINT16: ir.DataType.INT32,
    ir.DataType.UINT64: ir.DataType.INT64,
    ir.DataType.BFLOAT16: ir.DataType.FLOAT,
}
"""Data types without an ONNX Runtime CPU ``Where`` kernel -> the type to select in."""


def _graphs(model: ir.Model) -> list[ir.Graph | ir.Function]:
    return [model.graph, *model.functions.values()]


def _widen(node: ir.Node, wide: ir.DataType, dtype: ir.DataType) -> None:
    cond, x, y = node.inputs
    old = node.outputs[0]
    # Explicit names: a subgraph's automatic names could shadow values of the outer graph.
    base = f"{old.name or node.name or 'where'}_{wide.name.lower()}"
    cast_x = ir.node("Cast", [x], {"to": wide}, name=f"{base}_cast_x")
    cast_y = ir.node("Cast", [y], {"to": wide}, name=f"{base}_cast_y")
    where = ir.node("Where", [cond, cast_x.outputs[0], cast_y.outputs[0]], name=base)
    back = ir.node("Cast", [where.outputs[0]], {"to": dtype}, name=f"{base}_cast_back")
    for n in (cast_x, cast_y, where):
        n.outputs[0].name = n.name
        n.outputs[0].type = ir.TensorType(wide)
    where.outputs[0].shape = old.shape
    ir.convenience.replace_nodes_and_values(
        node.graph, node, [node], [cast_x, cast_y, where, back], [old], [back.outputs[0]]
    )


@register_ir_fix(
    reason="ONNX Runtime's CPU provider has no Where kernel for bool, int16, uint16, uint64 or "
    "bfloat16 values, so such a model fails to load.",
    upstream="https://github.com/microsoft/onnxruntime/issues/24127",
)
def fix_ir_where_dtypes(model: ir.Model, context: FixContext | None = None) -> FixResult:
    """Select ``bool`` / int16 / uint16 / uint64 / bfloat16 values in a wider type.

    Visits every ``Where`` of the main graph, its subgraphs and the model's functions; one whose
    value type is unknown (a function with untyped values) is left alone.

    Args:
        model: the optimized ONNX model, edited in place.
        context: the export's fix context (unused).

    Returns:
        ``FixResult(model, modified, details={"rewritten": <number of Where nodes>})``.

    Source: https://github.com/microsoft/onnxruntime/issues/24127
    """
    count = 0
    for graph in _graphs(model):
        for node in list(ir.traversal.RecursiveGraphIterator(graph)):
            if node.op_type != "Where" or node.domain not in ("", "ai.onnx"):
                continue
            dtype = node.outputs[0].dtype or node.inputs[1].dtype or node.inputs[2].dtype
            wide = WHERE_COMPUTE_TYPES.get(dtype)
            if wide is not None:
                _widen(node, wide, dtype)
                count += 1
    return FixResult(model, count > 0, {"rewritten": count} if count else None)
