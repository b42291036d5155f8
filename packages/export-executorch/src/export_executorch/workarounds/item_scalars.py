"""FX program fix: ``aten.item`` calls become ``aten._local_scalar_dense``, the op they stand for.

``torch.export`` keeps ``Tensor.item()`` in the captured program as ``aten.item.default`` (a
CompositeImplicitAutograd op that export preserves; pytorch/pytorch#132722). Any later re-trace
of the program (``run_decompositions``: the edge lowering's own, or an FX program fix's) fakes
the node with symbolic sizes around, where the fake-tensor dispatcher prefers the Python
reference of ``item``, which casts a ``FakeTensor`` to a Python number and fails: ``RuntimeError:
Cannot cast FakeTensor(..., size=(), dtype=torch.int64) to number``. Vision towers that read
their image grid with ``.item()`` (GLM-4V, Qwen2.5-VL, EXAONE 4.5's encoders) do not lower.

``item`` is defined as ``_local_scalar_dense`` on a one-element tensor, and ExecuTorch runs
``_local_scalar_dense`` as a prim op (``executorch_prim_ops_registry``); the fix retargets the
nodes in place (same arguments, same symbolic result, no re-trace).

Source: https://github.com/pytorch/pytorch/pull/132722
"""

from __future__ import annotations

import torch

from export_core.fixes import FixContext, FixResult
from export_core.registry import register_fx_program_fix

from ..stages import BACKEND

__all__ = ["item_as_local_scalar_dense"]

_aten = torch.ops.aten


@register_fx_program_fix(
    BACKEND,
    reason="torch.export keeps Tensor.item() as aten.item, whose Python reference fails every "
    "later re-trace with symbolic sizes (Cannot cast FakeTensor to number): the edge "
    "lowering fails; the nodes become aten._local_scalar_dense, which ExecuTorch runs",
    upstream="https://github.com/pytorch/pytorch/pull/132722",
)
def item_as_local_scalar_dense(program: torch.export.ExportedProgram,
                               context: FixContext) -> FixResult:
    """Retarget every ``aten.item.default`` node (any graph, nested ones included) to
    ``aten._local_scalar_dense.default``.

    Args:
        program: the captured ``ExportedProgram`` (rewritten in place: the export's own copy).
        context: the export's context (unused).

    Returns:
        ``FixResult(program, modified, details=count)``: ``modified`` when a node was
        retargeted, ``count`` the nodes retargeted.

    Source: https://github.com/pytorch/pytorch/pull/132722
    """
    del context
    count = 0
    for module in program.graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        changed = False
        for node in module.graph.nodes:
            if node.op == "call_function" and node.target is _aten.item.default:
                node.target = _aten._local_scalar_dense.default
                changed = True
                count += 1
        if changed:
            module.recompile()
    return FixResult(program, count > 0, count)
