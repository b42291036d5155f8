"""The XNNPACK partition merge of ``export_executorch.workarounds.xnnpack_partition_merge``: the
same partitions as ExecuTorch's pairwise cycle checks (random graphs, with and without node
groups), without those checks on a graph of many partitions, which then matches eager in the
ExecuTorch runtime at two shapes. Without the patch the partitioner runs one full cycle check
per pair of partitions."""

from __future__ import annotations

import random

import pytest
import torch
from executorch.exir.backend.canonical_partitioners import group_partitioner as gp
from torch.fx.passes.operator_support import OperatorSupportBase

import export_executorch
from export_core.patching import PatchSession
from export_executorch.workarounds import xnnpack_partition_merge as w

NAME = f"executorch.xnnpack:{w._TARGET}"
_OPS = (torch.add, torch.mul, torch.sub)


def _random_graph(rng: random.Random, size: int) -> torch.fx.GraphModule:
    """A DAG of ``size`` binary ops over two inputs, each reading two earlier values, and an
    output of the last few: many paths between any two ops."""
    graph = torch.fx.Graph()
    values = [graph.placeholder("a"), graph.placeholder("b")]
    for _ in range(size):
        lhs, rhs = rng.choice(values[-12:]), rng.choice(values)
        values.append(graph.call_function(rng.choice(_OPS), (lhs, rhs)))
    graph.output(tuple(values[-3:]))
    return torch.fx.GraphModule(torch.nn.Module(), graph)


class _Supports(OperatorSupportBase):
    def __init__(self, names: set[str]):
        self.names = names

    def is_node_supported(self, submodules, node: torch.fx.Node) -> bool:
        return node.name in self.names


def _partitions(gm: torch.fx.GraphModule, supported: set[str], groups: list[list[torch.fx.Node]],
                merge) -> list[frozenset[str]]:
    partitioner = gp.GroupBasedPartitioner(gm, _Supports(supported), node_groups=groups,
                                           allows_single_node_partition=True)
    partitioner._merge_partitions = merge.__get__(partitioner)
    return sorted((frozenset(n.name for n in p.nodes) for p in partitioner.propose_partitions()),
                  key=sorted)


@pytest.mark.parametrize("seed", range(12))
def test_the_merge_makes_the_partitions_of_the_pairwise_checks(seed: int, monkeypatch) -> None:
    rng = random.Random(seed)
    gm = _random_graph(rng, rng.randrange(20, 90))
    ops = [n for n in gm.graph.nodes if n.op == "call_function"]
    supported = {n.name for n in ops if rng.random() < 0.7}
    groups: list[list[torch.fx.Node]] = []
    if seed % 2:  # node groups (as quantization patterns make), disjoint, of supported nodes
        pool = [n for n in ops if n.name in supported]
        rng.shuffle(pool)
        groups = [pool[i:i + 3] for i in range(0, min(len(pool), 12), 3)]
    original = gp.GroupBasedPartitioner._merge_partitions
    session = PatchSession()
    monkeypatch.setattr(w, "FAST_MERGE_MIN_PARTITIONS", 1)
    fast = w.merge_partitions_by_reachability(original, session)
    expected = _partitions(gm, supported, groups, original)
    assert _partitions(gm, supported, groups, fast) == expected
    assert session.fired == [NAME]
    assert len(expected) < len(supported)  # something was merged and something was not


def test_reachability_masks_hold_transitive_users_and_inputs() -> None:
    gm = _random_graph(random.Random(0), 30)
    nodes = list(gm.graph.nodes)
    reach = w.Reachability.of(gm.graph)

    def closure(node: torch.fx.Node, step) -> set[torch.fx.Node]:
        seen, todo = set(), list(step(node))
        while todo:
            n = todo.pop()
            if n not in seen:
                seen.add(n)
                todo.extend(step(n))
        return seen

    for i, node in enumerate(nodes):
        assert reach.down[i] == reach.members(closure(node, lambda n: n.users))
        assert reach.up[i] == reach.members(closure(node, lambda n: n.all_input_nodes))


class ManyBreaks(torch.nn.Module):
    """``x`` (batch, 8) float32 -> (batch, 8): ``blocks`` rounds of ``x * 1.5 + x`` (XNNPACK ops)
    each followed by a cumulative sum (not an XNNPACK op), so every round is its own partition."""

    def __init__(self, blocks: int):
        super().__init__()
        self.blocks = blocks

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.blocks):
            x = torch.cumsum(x * 1.5 + x, dim=1) * 0.01
        return x


def _count_pair_checks(monkeypatch) -> list[int]:
    calls = [0]
    check = gp.GroupBasedPartitioner._can_merge_partitions

    def counted(self, p1, p2, partitions_by_id):
        calls[0] += 1
        return check(self, p1, p2, partitions_by_id)

    monkeypatch.setattr(gp.GroupBasedPartitioner, "_can_merge_partitions", counted)
    return calls


@pytest.mark.parametrize("threshold", [
    16,
    pytest.param(w.FAST_MERGE_MIN_PARTITIONS, marks=pytest.mark.slow, id="default"),
])
def test_a_graph_of_many_partitions_lowers_without_pairwise_checks(threshold: int, monkeypatch) -> None:
    """Through ``export_executorch.export``; in the default run the patch's threshold is lowered
    to 16 partitions (the graph at the real threshold, 136 rounds, takes 95 s: ``-m slow``)."""
    monkeypatch.setattr(w, "FAST_MERGE_MIN_PARTITIONS", threshold)
    blocks = threshold // 2 + 8  # two supported nodes per round (mul, add)
    calls = _count_pair_checks(monkeypatch)
    x = torch.randn(2, 8, generator=torch.Generator().manual_seed(0))
    other = torch.randn(3, 8, generator=torch.Generator().manual_seed(1))
    result = export_executorch.export(ManyBreaks(blocks).eval(), (x,), validation_inputs=[(other,)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) >= 2
    assert NAME in report["patches"]["fired"]
    assert calls[0] == 0


def _chain(blocks: int) -> tuple[torch.fx.GraphModule, set[str]]:
    """ManyBreaks' graph as plain FX: per round a supported ``mul`` and ``add``, then an
    unsupported ``cumsum``; returns the graph and the names of its supported nodes."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    supported: set[str] = set()
    for _ in range(blocks):
        scaled = graph.call_function(torch.mul, (x, 1.5))
        summed = graph.call_function(torch.add, (scaled, x))
        supported |= {scaled.name, summed.name}
        x = graph.call_function(torch.cumsum, (summed, 1))
    graph.output(x)
    return torch.fx.GraphModule(torch.nn.Module(), graph), supported


def test_without_the_patch_every_pair_is_checked(monkeypatch) -> None:
    """Documents the upstream cost: one full cycle check per pair of partitions (the same graph
    with the patch: no pair check, the same partitions)."""
    blocks = w.FAST_MERGE_MIN_PARTITIONS // 2 + 8
    gm, supported = _chain(blocks)
    calls = _count_pair_checks(monkeypatch)
    original = gp.GroupBasedPartitioner._merge_partitions
    expected = _partitions(gm, supported, [], original)
    assert len(expected) == blocks  # the rounds' partitions never merge
    assert calls[0] >= blocks * (blocks - 1) // 2
    calls[0] = 0
    fast = w.merge_partitions_by_reachability(original, PatchSession())
    assert _partitions(gm, supported, [], fast) == expected
    assert calls[0] == 0
