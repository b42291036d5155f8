"""Partition creation without a graph copy and code regeneration per partition
(``partitions_sorted_in_place``): the in-place sort gives ``legalize_graph``'s order, and a
program with dozens of XNNPACK partitions serializes to the same bytes with and without it."""

from __future__ import annotations

import random

import torch
from torch.fx.passes.tools_common import legalize_graph

import export_executorch
from export_core.registry import withheld
from export_executorch.workarounds.partition_sort import sort_in_place, topological_order

PATCH = "executorch:executorch.exir.backend.backend_api._create_partitions_in_graph_module"


class Alternating(torch.nn.Module):
    """``(batch, seq, 8)`` -> the same shape through 24 blocks of a linear layer (delegated to
    XNNPACK) and a cumulative sum (portable), each block's partition separate."""

    def __init__(self, blocks: int = 24) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(blocks))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.cumsum(layer(x), dim=1) * 0.1 + x
        return x


EXAMPLE = (torch.randn(2, 5, 8),)


def _shuffled_module(seed: int) -> torch.fx.GraphModule:
    """The captured graph of :class:`Alternating` with a quarter of its compute nodes moved to
    the end (no longer in topological order)."""
    gm = torch.export.export(Alternating(6).eval(), EXAMPLE).graph_module
    nodes = [n for n in gm.graph.nodes if n.op == "call_function"]
    rng = random.Random(seed)
    for node in rng.sample(nodes, len(nodes) // 4):
        gm.graph._root.prepend(node)  # noqa: SLF001 - move to the end, before the sentinel
    return gm


def test_in_place_order_is_legalize_graphs_order() -> None:
    for seed in range(5):
        gm = _shuffled_module(seed)
        expected = [n.name for n in legalize_graph(_shuffled_module(seed)).graph.nodes]
        assert [n.name for n in topological_order(gm.graph)] == expected
        sort_in_place(gm)
        assert [n.name for n in gm.graph.nodes] == expected
        gm.graph.lint()


def test_same_program_with_and_without_the_patch(tmp_path) -> None:
    model = Alternating().eval()
    patched = export_executorch.export(model, EXAMPLE, backend="xnnpack",
                                       output=tmp_path / "patched")
    with withheld("executorch", PATCH):
        plain = export_executorch.export(model, EXAMPLE, backend="xnnpack",
                                         output=tmp_path / "plain")
    assert patched.report["delegation"]["delegated_subgraphs"] >= 20
    assert PATCH in patched.report["patches"]["fired"]
    assert PATCH not in plain.report["patches"]["fired"]
    assert patched.report["validation"]["passed"] is True
    assert (tmp_path / "patched" / "model.pte").read_bytes() == (
        tmp_path / "plain" / "model.pte").read_bytes()
