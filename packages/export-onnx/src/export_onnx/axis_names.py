"""Name the dynamic axes of the ONNX graph after their role: ``batch``, ``sequence``, ...

``torch.onnx`` names every dynamic dimension after its ``torch.export`` symbol (``s18``,
``s41``), and an attention mask whose batch got its own symbol gets its own ``dim_param``. This
renames them with the names of :func:`export_core.axes.axis_names`, on the graph's inputs,
outputs and intermediate values, inside expressions too (``s18*s41`` → ``batch*sequence``)::

    input_ids: [s18, s41], attention_mask: [s77, s41]  →  [batch, sequence], [batch, sequence]

A dimension that ``torch.export`` specialised after giving it a symbol (a ``Dim.AUTO`` channel or
image axis the model fixes) reaches the ONNX graph as the ``dim_param`` ``"3"`` or ``"32"``: a
name, which ONNX Runtime matches against any size. It becomes the fixed ``dim_value`` it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

import onnx_ir as ir

__all__ = ["rename_symbolic_dims"]


def _values(graph: ir.Graph) -> Iterator[ir.Value]:
    yield from graph.inputs
    yield from graph.outputs
    for node in graph:
        yield from node.outputs


def rename_symbolic_dims(model: ir.Model, names: Mapping[str, str]) -> int:
    """Rename symbolic dimensions of ``model``'s main graph (in place).

    Args:
        model: the ONNX IR model.
        names: ``torch.export`` symbol → axis name (``{"s18": "batch"}``).

    Returns:
        The number of values whose shape changed (renamed, or a numeric ``dim_param`` made a
        fixed dimension).
    """
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")\b") if names else None
    changed = 0
    seen: set[int] = set()
    for value in _values(model.graph):
        shape = value.shape
        if shape is None or id(value) in seen:
            continue
        seen.add(id(value))
        dims: list[int | ir.SymbolicDim] = []
        renamed = False
        for dim in shape.dims:
            if isinstance(dim, ir.SymbolicDim) and isinstance(dim.value, str):
                if dim.value.isdigit():
                    dims.append(int(dim.value))
                    renamed = True
                    continue
                new = pattern.sub(lambda m: names[m.group(0)], dim.value) if pattern else dim.value
                if new != dim.value:
                    dim, renamed = ir.SymbolicDim(new), True
            dims.append(dim)
        if renamed:
            value.shape = ir.Shape(dims)
            changed += 1
    return changed
