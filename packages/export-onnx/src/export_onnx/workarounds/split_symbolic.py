"""FX node fix: ``split`` / ``chunk`` with a symbolic chunk size.

``aten.split.Tensor(x, size, dim)`` with a ``SymInt`` ``size`` (``torch.split(x, n // 2)``;
``x.chunk(k)`` decomposes to it on a dynamic axis) is lowered to ``SplitToSequence`` with a 0-d
split of unknown value, and the onnxscript constant folder crashes on it
(``'NoneType' object has no attribute 'ndim'``).

The number of chunks ``k`` is fixed in the traced graph (its ``meta["val"]`` is a list of ``k``
tensors), so the node is rewritten to ``aten.split_with_sizes(x, [size] * (k - 1) + [n - (k - 1)
* size], dim)`` with ``n = x.shape[dim]``: a 1-D split of known length, which folds to a plain
``Split`` with ``k`` outputs.

Source: https://github.com/microsoft/onnxscript/issues/2543
"""

from __future__ import annotations

import operator

import torch

from export_core.registry import register_fx_node_fix

__all__ = ["fix_split_symbolic_size"]

_aten = torch.ops.aten
_SPLITS = (_aten.split.Tensor, _aten.unsafe_split.Tensor)


def _call(node: torch.fx.Node, target: object, args: tuple, val: object) -> torch.fx.Node:
    with node.graph.inserting_before(node):
        new = node.graph.call_function(target, args)
    new.meta["val"] = val
    return new


@register_fx_node_fix(
    "onnx",
    *_SPLITS,
    reason="split/chunk with a symbolic chunk size lowers to SplitToSequence with a 0-d split "
    "of unknown value, on which the onnxscript constant folder crashes.",
    upstream="https://github.com/microsoft/onnxscript/issues/2543",
)
def fix_split_symbolic_size(node: torch.fx.Node) -> bool:
    """Rewrite ``split(x, size, dim)`` with a ``SymInt`` size to ``split_with_sizes``.

    Args:
        node: an ``aten.split.Tensor`` or ``aten.unsafe_split.Tensor`` call; ``x`` has shape
            ``[..., n, ...]`` with ``n`` at ``dim`` and the node yields ``k`` chunks.

    Returns:
        True when the node was replaced (the split size is a graph value, not a constant).

    Source: https://github.com/microsoft/onnxscript/issues/2543
    """
    x, size = node.args[0], node.args[1]
    dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
    chunks = node.meta.get("val")
    if not isinstance(size, torch.fx.Node) or not isinstance(chunks, list | tuple):
        return False
    x_val = x.meta["val"]
    dim = dim % x_val.dim()
    n = _call(node, _aten.sym_size.int, (x, dim), x_val.shape[dim])
    k = len(chunks)
    if k == 1:
        sizes = [n]
    else:
        used = _call(node, operator.mul, (size, k - 1), size.meta["val"] * (k - 1))
        last = _call(node, operator.sub, (n, used), n.meta["val"] - used.meta["val"])
        sizes = [size] * (k - 1) + [last]
    split = _call(node, _aten.split_with_sizes.default, (x, sizes, dim), chunks)
    split.meta.update({key: v for key, v in node.meta.items() if key != "val"})
    node.replace_all_uses_with(split)
    node.graph.erase_node(node)
    return True
