"""FX node fix: ``squeeze`` names only the dimensions that are 1 in the captured program.

``torch.squeeze(x, dim)`` is a no-op on a dimension that is not 1; ONNX ``Squeeze`` raises on
one. torchlib translates ``aten.squeeze.dim(x, d)`` / ``aten.squeeze.dims(x, dims)`` as
``Squeeze(x, axes)`` whatever the sizes, so a model that squeezes a dimension that happens not
to be 1 fails to load::

    [ShapeInferenceError] Dimension of input 2 must be 1 instead of 5

(Parakeet's RNN-T / TDT joint network ``.squeeze(2)`` over the decoder length, the Nemotron ASR
models built on it).

The captured program knows each dimension's size: the fix keeps exactly the named dimensions
that are the constant 1 there (torch.export traces a squeeze of a dynamic dimension as a no-op,
the program's shapes say so). A squeeze left with no such dimension becomes ``clone`` (an
``Identity`` that the optimizer removes); otherwise it becomes ``aten.squeeze.dims`` with those
dimensions. ``aten.squeeze.default`` (no dimension named) is left alone: ``Squeeze`` without
axes decides at run time, as eager does.

Source: https://github.com/microsoft/onnxscript/issues/360
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from export_core.registry import register_fx_node_fix

__all__ = ["squeeze_only_unit_dims", "unit_dims"]

_aten = torch.ops.aten


def _dims(rank: int, dims: Sequence[int]) -> list[int]:
    """``dims`` counted from the start, ascending, without repeats (none for a 0-d tensor)."""
    return sorted({d % rank for d in dims}) if rank else []


def unit_dims(shape: Sequence[Any], dims: Sequence[int]) -> list[int]:
    """The dimensions among ``dims`` whose size is the constant 1.

    Args:
        shape: the input's sizes (ints or ``SymInt`` s; a ``SymInt`` is never the constant 1).
        dims: dimensions, negative ones counted from the end.

    Returns:
        Non-negative dimension indices, ascending, without repeats.
    """
    return [d for d in _dims(len(shape), dims) if isinstance(shape[d], int) and shape[d] == 1]


@register_fx_node_fix(
    "onnx",
    _aten.squeeze.dim,
    _aten.squeeze.dims,
    reason="torchlib translates squeeze(x, dims) as ONNX Squeeze over the named axes, and "
    "Squeeze raises on an axis that is not 1 where torch's squeeze is a no-op",
    upstream="https://github.com/microsoft/onnxscript/issues/360",
)
def squeeze_only_unit_dims(node: torch.fx.Node) -> bool:
    """Rewrite a squeeze so that it names exactly the input's constant-1 dimensions.

    Args:
        node: ``aten.squeeze.dim(x, dim)`` or ``aten.squeeze.dims(x, dims)``, ``x`` of any
            dtype and rank, with a ``val`` in its meta.

    Returns:
        True when the node was rewritten (it named a dimension that is not the constant 1);
        False when it names only unit dimensions.

    Source: https://github.com/microsoft/onnxscript/issues/360
    """
    source = node.args[0]
    value = source.meta.get("val") if isinstance(source, torch.fx.Node) else None
    if not isinstance(value, torch.Tensor):
        return False
    shape = tuple(value.shape)
    dims = [node.args[1]] if node.target is _aten.squeeze.dim else list(node.args[1])
    keep = unit_dims(shape, dims)
    if keep == _dims(len(shape), dims):
        return False
    with node.graph.inserting_before(node):
        if keep:
            new = node.graph.call_function(_aten.squeeze.dims, (source, keep))
        else:
            new = node.graph.call_function(_aten.clone.default, (source,))
    new.meta.update(node.meta)
    node.replace_all_uses_with(new)
    node.graph.erase_node(node)
    return True
