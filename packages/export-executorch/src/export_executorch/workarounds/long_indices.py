"""FX node fix: the edge dialect takes ``scatter_add``'s index as int64 only.

``torch.scatter_add`` accepts an int32 index in eager PyTorch (GLM-5-Next's sparse attention
builds its mask with ``scatter_add`` over int32 top-k indices), and ``torch.export`` records it
as it is. ExecuTorch's edge dialect lists the dtypes each op accepts (``exir/dialects/edge/
edge.yaml``), and for ``scatter_add`` the index is ``Long`` only, so the verifier inside
``to_edge_transform_and_lower`` rejects the program ("These operators are taking Tensor inputs
with mismatched dtypes: aten.scatter_add.default ... 'index': torch.int32"). Among the ops whose
edge entry types an index input, ``scatter_add`` is the only one that refuses int32
(``index.Tensor``, ``index_put``, ``index_select`` and ``embedding`` take it).

The fix casts such an index to int64 before the op: the same indices, the same result.

Source: https://github.com/pytorch/executorch/issues/7112 (the same dtype check of the edge
verifier, met on other ops; no issue names ``scatter_add``'s index)
"""

from __future__ import annotations

import torch

from export_core.fixes import call_before
from export_core.registry import register_fx_node_fix

from ..stages import BACKEND

__all__ = ["LONG_INDEX_OPS", "long_scatter_indices"]

_aten = torch.ops.aten

LONG_INDEX_OPS = {_aten.scatter_add.default: 2, _aten.scatter_add_.default: 2}
"""Op -> position of its index argument, for the ops whose edge dialect entry takes the index as
int64 only (executorch 1.5.1); the in-place form as the capture records ``tensor.scatter_add_``
(functionalized by the lowering's decompositions)."""


@register_fx_node_fix(
    BACKEND,
    *LONG_INDEX_OPS,
    reason="the edge dialect's dtype table takes scatter_add's index as int64 only, so an int32 "
    "index (GLM-5-Next's top-k attention mask) fails the edge verifier; the index is cast to "
    "int64",
    upstream="https://github.com/pytorch/executorch/issues/7112",
)
def long_scatter_indices(node: torch.fx.Node) -> bool:
    """Cast the index of ``aten.scatter_add(self, dim, index, src)`` (or ``scatter_add_``) to
    int64.

    Args:
        node: the op; ``index`` an integer tensor of ``src``'s rank (any shape).

    Returns:
        True when the index was an FX node of another integer dtype (int32, int16, uint8) and
        a ``_to_copy(index, dtype=torch.int64)`` now feeds the op; False otherwise.

    Source: https://github.com/pytorch/executorch/issues/7112
    """
    position = LONG_INDEX_OPS[node.target]
    index = node.args[position] if len(node.args) > position else node.kwargs.get("index")
    if not isinstance(index, torch.fx.Node):
        return False
    val = index.meta.get("val")
    if not isinstance(val, torch.Tensor) or val.dtype == torch.int64 or val.dtype.is_floating_point:
        return False
    cast = call_before(node, _aten._to_copy.default, index, dtype=torch.int64)
    if len(node.args) > position:
        node.update_arg(position, cast)
    else:
        node.update_kwarg("index", cast)
    return True
