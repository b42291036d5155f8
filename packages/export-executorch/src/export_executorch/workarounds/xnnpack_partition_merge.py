"""ExecuTorch patch: XNNPACK's partitioner merges partitions with a quadratic number of full-graph
cycle checks, so lowering a large graph does not finish.

``GroupBasedPartitioner._merge_partitions`` (the partitioner of every XNNPACK config, through
``generate_grouped_partitions_from_list_of_nodes``) starts with one partition per supported node
and tries every pair ``(p1, p2)`` in order. For each pair ``_can_merge_partitions`` rebuilds the
node sets of both, scans the transitive users of every external user, and then runs
``validate_partition``, a breadth-first search over the live graph: O(P^2 * N) for P initial
partitions and N nodes. A text decoder of a few thousand nodes (Gemma-3n's) spends hours there,
inside ``to_edge_transform_and_lower``.

The patch makes the same decisions in the same order, each in a few big-integer operations: a
merged set ``S`` creates a cycle exactly when some node outside ``S`` is both downstream and
upstream of ``S``, so with the transitive users and inputs of every node held as bitmasks over
node positions, the check is ``(down(S) & up(S)) & ~S == 0`` and a merge ORs the masks. The
partitions it returns are those of the original (tests compare them on random graphs). Graphs
with few partitions (under :data:`FAST_MERGE_MIN_PARTITIONS`) keep the original code, so the
patch is reported only where it changed the cost.

Source: https://github.com/pytorch/executorch/issues/12798 (the partitioner's merge step is
quadratic in the partitions; the fixes so far keep the pairwise cycle check)
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from export_core.patching import MARKS_OWN_FIRING, PatchSession
from export_core.registry import register_patch

__all__ = ["FAST_MERGE_MIN_PARTITIONS", "Reachability", "merge_partitions_by_reachability"]

_TARGET = ("executorch.exir.backend.canonical_partitioners.group_partitioner."
           "GroupBasedPartitioner._merge_partitions")
_NAME = f"executorch.xnnpack:{_TARGET}"
_UPSTREAM = "https://github.com/pytorch/executorch/issues/12798"

FAST_MERGE_MIN_PARTITIONS = 256
"""Initial partitions from which the merge runs on reachability masks (fewer: the original
pairwise checks, which are fast enough there)."""


@dataclass(frozen=True)
class Reachability:
    """Transitive users (``down``) and inputs (``up``) of every node of an FX graph, as int
    bitmasks over the nodes' positions in the graph (bit ``i`` is ``nodes[i]``); a node is in
    neither of its own masks.

    Building it costs O(E * N / 64) machine-word operations for E edges and N nodes.
    """

    index: dict[torch.fx.Node, int]
    down: list[int]
    up: list[int]

    @classmethod
    def of(cls, graph: torch.fx.Graph) -> Reachability:
        """The masks of every node of ``graph`` (in ``graph.nodes`` order, a topological one)."""
        nodes = list(graph.nodes)
        index = {node: i for i, node in enumerate(nodes)}
        down = [0] * len(nodes)
        for i in range(len(nodes) - 1, -1, -1):
            mask = 0
            for user in nodes[i].users:
                j = index[user]
                mask |= down[j] | (1 << j)
            down[i] = mask
        up = [0] * len(nodes)
        for i, node in enumerate(nodes):
            mask = 0
            for source in node.all_input_nodes:
                j = index[source]
                mask |= up[j] | (1 << j)
            up[i] = mask
        return cls(index, down, up)

    def members(self, nodes: Iterable[torch.fx.Node]) -> int:
        """The mask of ``nodes``."""
        mask = 0
        for node in nodes:
            mask |= 1 << self.index[node]
        return mask

    def closure(self, nodes: Iterable[torch.fx.Node]) -> tuple[int, int]:
        """``(down, up)`` of a set of nodes: the ORs of its members' masks."""
        down = up = 0
        for node in nodes:
            i = self.index[node]
            down |= self.down[i]
            up |= self.up[i]
        return down, up


@register_patch(
    "executorch.xnnpack",
    _TARGET,
    stage="executorch_patches",
    reason="the XNNPACK partitioner tries every pair of partitions with a full-graph cycle check "
    "(O(P^2 * N)), so lowering a graph of a few thousand nodes does not finish",
    upstream=_UPSTREAM,
)
def merge_partitions_by_reachability(original: Any, session: PatchSession) -> Any:
    """Wrap ``GroupBasedPartitioner._merge_partitions(self, partitions_by_id, assignment,
    partition_users, partition_map, partitions_order)`` (mutates its arguments, returns ``None``)
    to decide each pair's merge with :class:`Reachability` masks when there are at least
    :data:`FAST_MERGE_MIN_PARTITIONS` partitions; marks the patch fired only then.

    The pairs are visited in the original's order (``p1`` over the partition ids, ``p2`` over the
    later ones, merged ids skipped) and merged with the partitioner's own
    ``_perform_partition_merge``, so the resulting partitions are the original's.

    Source: https://github.com/pytorch/executorch/issues/12798
    """

    @functools.wraps(original)
    def _merge_partitions(self: Any, partitions_by_id: dict[int, Any], assignment: Any,
                          partition_users: Any, partition_map: Any,
                          partitions_order: Any) -> None:
        if len(partitions_by_id) < FAST_MERGE_MIN_PARTITIONS:
            return original(self, partitions_by_id, assignment, partition_users, partition_map,
                            partitions_order)
        session.mark_fired(_NAME)
        reach = Reachability.of(self.graph_module.graph)
        members = {p: reach.members(part.nodes) for p, part in partitions_by_id.items()}
        closures = {p: reach.closure(part.nodes) for p, part in partitions_by_id.items()}
        partition_ids = list(partitions_by_id)
        merged: set[int] = set()
        for i, p1 in enumerate(partition_ids):
            if p1 in merged:
                continue
            for p2 in partition_ids[i + 1:]:
                if p2 in merged:
                    continue
                (down1, up1), (down2, up2) = closures[p1], closures[p2]
                combined = members[p1] | members[p2]
                if (down1 | down2) & (up1 | up2) & ~combined:
                    continue  # a node outside both lies on a path between them: a cycle
                self._perform_partition_merge(p1, p2, partitions_by_id, assignment,
                                              partition_users, partition_map, partitions_order)
                members[p1] = combined
                closures[p1] = (down1 | down2, up1 | up2)
                merged.add(p2)
        return None

    setattr(_merge_partitions, MARKS_OWN_FIRING, True)
    return _merge_partitions
