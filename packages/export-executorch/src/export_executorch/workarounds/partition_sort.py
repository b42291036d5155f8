"""ExecuTorch patch: creating the delegate partitions re-copies and re-compiles the whole graph
once per partition, so lowering a graph with hundreds of partitions takes minutes.

``to_backend`` turns each partition into a submodule with ``create_submodule_from_nodes``, which
ends with ``legalize_graph(gm)``: a topological sort that copies every node of the top-level
graph into a new ``Graph`` and assigns it to the ``GraphModule``, whose setter regenerates and
``exec``-s the Python code of the whole graph. For P partitions of an N-node graph that is
O(P * N) node copies and P code generations of N lines: Molmo2's tiny model (3465 nodes, 470
XNNPACK partitions) spent a third of its lowering there and did not finish in 10 minutes.

The patch makes each partition's sort the same topological order (the same algorithm: Kahn's,
in graph order, the same prioritised ops first) applied in place by relinking the nodes, and
regenerates the code once, after the last partition. The program is the one the original
produces (a test compares the serialized programs).

Source: https://github.com/pytorch/executorch/issues/6191 (``to_backend`` with the XNNPACK
partitioner hangs on a large graph)
"""

from __future__ import annotations

import collections
import functools
import operator
import sys
from typing import Any

import torch

from export_core.patching import MARKS_OWN_FIRING, PatchSession
from export_core.registry import register_patch

__all__ = ["PRIORITIZED_TARGETS", "sort_in_place", "topological_order"]

_TARGET = "executorch.exir.backend.backend_api._create_partitions_in_graph_module"
_NAME = f"executorch:{_TARGET}"
_MODULE = "executorch.exir.backend.backend_api"
_UPSTREAM = "https://github.com/pytorch/executorch/issues/6191"

PRIORITIZED_TARGETS = (
    operator.add, operator.mul, operator.sub, operator.floordiv, operator.truediv, operator.mod,
    operator.le, operator.lt, operator.ge, operator.gt, operator.eq, operator.ne,
    torch.ops.aten.sym_constrain_range.default,
    torch.ops.aten.sym_constrain_range_for_size.default,
    torch.ops.aten._assert_async.msg,
    torch.ops.aten.scalar_tensor.default,
    torch.ops.aten._assert_scalar.default,
)
"""Ops placed as soon as their inputs are (runtime assertions before data-dependent ops), as
``torch.fx.passes.tools_common.legalize_graph`` does."""


def topological_order(graph: torch.fx.Graph) -> list[torch.fx.Node]:
    """The nodes of ``graph`` in the order ``legalize_graph`` gives them: Kahn's algorithm over
    ``graph.nodes`` order, a ready node of :data:`PRIORITIZED_TARGETS` jumping the queue.

    Raises:
        RuntimeError: the graph has a cycle (as ``legalize_graph``).
    """
    indegree = dict.fromkeys(graph.nodes, 0)
    for node in graph.nodes:
        for user in node.users:
            indegree[user] += 1
    queue = collections.deque(node for node, n in indegree.items() if n == 0)
    order: list[torch.fx.Node] = []
    while queue:
        node = queue.popleft()
        order.append(node)
        for user in node.users:
            indegree[user] -= 1
            if indegree[user] == 0:
                if user.op == "call_function" and user.target in PRIORITIZED_TARGETS:
                    queue.appendleft(user)
                else:
                    queue.append(user)
    if len(order) < len(indegree):
        stuck = [node for node, n in indegree.items() if n != 0]
        raise RuntimeError(f"Input graph has cycles, unable to add {stuck}")
    return order


def sort_in_place(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """Relink ``gm``'s nodes into :func:`topological_order`, without copying them or
    regenerating ``gm``'s code (the caller recompiles once it is done editing)."""
    graph = gm.graph
    order = topological_order(graph)
    if order != list(graph.nodes):
        end = graph._root  # noqa: SLF001 - the sentinel before which append inserts
        for node in order:
            end.prepend(node)
    return gm


def _without_legalize_recompiles(create: Any) -> Any:
    """``create_submodule_from_nodes`` with its ``legalize_graph`` replaced by
    :func:`sort_in_place`."""

    @functools.wraps(create)
    def create_submodule_from_nodes(gm: torch.fx.GraphModule, node_list: Any, tag: str,
                                    skip_legalize_graph: bool = False) -> Any:
        result = create(gm, node_list, tag, skip_legalize_graph=True)
        if not skip_legalize_graph:
            sort_in_place(gm)
        return result

    return create_submodule_from_nodes


@register_patch(
    "executorch",
    _TARGET,
    stage="executorch_patches",
    reason="to_backend legalizes the whole graph after each partition it creates (a copy of "
    "every node and a regeneration of the graph's code), O(partitions x nodes): a few hundred "
    "XNNPACK partitions take minutes",
    upstream=_UPSTREAM,
)
def partitions_sorted_in_place(original: Any, session: PatchSession) -> Any:
    """Wrap ``_create_partitions_in_graph_module(tagged_graph_module, partition_result,
    owning_program, is_submodule)``: during the call, each partition's ``legalize_graph`` is
    :func:`sort_in_place`; the graph's code is regenerated once at the end. Marked fired when
    it created at least two partitions (one would have been sorted once anyway).

    Source: https://github.com/pytorch/executorch/issues/6191
    """

    @functools.wraps(original)
    def _create_partitions_in_graph_module(tagged_graph_module: torch.fx.GraphModule,
                                           partition_result: Any, owning_program: Any,
                                           is_submodule: bool) -> Any:
        module = sys.modules[_MODULE]
        create = module.create_submodule_from_nodes
        module.create_submodule_from_nodes = _without_legalize_recompiles(create)
        try:
            result = original(tagged_graph_module, partition_result, owning_program, is_submodule)
        finally:
            module.create_submodule_from_nodes = create
        tagged_graph_module.recompile()
        if len(partition_result.partition_tags) > 1:
            session.mark_fired(_NAME)
        return result

    setattr(_create_partitions_in_graph_module, MARKS_OWN_FIRING, True)
    return _create_partitions_in_graph_module
