"""Cost of the XNNPACK partitioner's merge step: ExecuTorch's pairwise cycle checks vs the
``merge_partitions_by_reachability`` patch (``export_executorch.workarounds.xnnpack_partition_merge``).

For each size, builds an FX graph of ``rounds`` rounds (a supported ``mul`` and ``add``, then an
unsupported ``cumsum``: two initial partitions per round that merge into one, and no merge across
rounds), runs ``GroupBasedPartitioner.propose_partitions`` once with the original merge and once
with the patched one, side by side in one process, and prints the seconds of each, their ratio
and whether the partitions are the same. The original grows as O(P^2 * N); ``--max-original-s``
stops timing the original past that many seconds (the row then says so).

Usage::

    uv run python benchmarks/bench_partition_merge.py                 # 150, 300, 600 rounds
    uv run python benchmarks/bench_partition_merge.py --rounds 150 1200 --max-original-s 120
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from executorch.exir.backend.canonical_partitioners import group_partitioner as gp
from torch.fx.passes.operator_support import OperatorSupportBase

from export_core.patching import PatchSession
from export_executorch.workarounds import xnnpack_partition_merge as w


@dataclass(frozen=True)
class Row:
    """One size: ``nodes`` in the graph, initial ``partitions``, seconds of each merge."""

    rounds: int
    nodes: int
    partitions: int
    original_s: float | None
    patched_s: float
    same: bool | None


class _ByName(OperatorSupportBase):
    def __init__(self, names: set[str]):
        self.names = names

    def is_node_supported(self, submodules: Any, node: torch.fx.Node) -> bool:
        return node.name in self.names


def chain(rounds: int) -> tuple[torch.fx.GraphModule, set[str]]:
    """The benchmark graph and the names of its supported nodes."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    supported: set[str] = set()
    for _ in range(rounds):
        scaled = graph.call_function(torch.mul, (x, 1.5))
        summed = graph.call_function(torch.add, (scaled, x))
        supported |= {scaled.name, summed.name}
        x = graph.call_function(torch.cumsum, (summed, 1))
    graph.output(x)
    return torch.fx.GraphModule(torch.nn.Module(), graph), supported


def _propose(gm: torch.fx.GraphModule, supported: set[str],
             merge: Callable[..., Any]) -> tuple[float, list[frozenset[str]]]:
    partitioner = gp.GroupBasedPartitioner(gm, _ByName(supported),
                                           allows_single_node_partition=True)
    partitioner._merge_partitions = merge.__get__(partitioner)
    start = time.perf_counter()
    partitions = partitioner.propose_partitions()
    seconds = time.perf_counter() - start
    return seconds, sorted((frozenset(n.name for n in p.nodes) for p in partitions), key=sorted)


def measure(rounds: int, max_original_s: float) -> Row:
    """Time both merges on the ``rounds`` graph (the original only while the previous size took
    under ``max_original_s``; see :func:`main`)."""
    gm, supported = chain(rounds)
    original = gp.GroupBasedPartitioner._merge_partitions
    patched = w.merge_partitions_by_reachability(original, PatchSession())
    patched_s, fast = _propose(gm, supported, patched)
    original_s: float | None = None
    same: bool | None = None
    if max_original_s > 0:
        original_s, slow = _propose(gm, supported, original)
        same = slow == fast
    return Row(rounds, len(gm.graph.nodes), len(supported), original_s, patched_s, same)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, nargs="+", default=[150, 300, 600])
    parser.add_argument("--max-original-s", type=float, default=300.0,
                        help="skip the original at the next sizes once one run took longer")
    args = parser.parse_args(argv)
    print(f"fast path from {w.FAST_MERGE_MIN_PARTITIONS} initial partitions")
    print(f"{'rounds':>7} {'nodes':>6} {'partitions':>10} {'original s':>11} {'patched s':>10} "
          f"{'ratio':>7}  same")
    budget = args.max_original_s
    for rounds in sorted(args.rounds):
        row = measure(rounds, budget)
        if row.original_s is None:
            print(f"{row.rounds:>7} {row.nodes:>6} {row.partitions:>10} {'skipped':>11} "
                  f"{row.patched_s:>10.2f} {'':>7}  (original over {args.max_original_s:.0f} s "
                  "at a smaller size)")
            continue
        ratio = row.patched_s / row.original_s if row.original_s else float("nan")
        print(f"{row.rounds:>7} {row.nodes:>6} {row.partitions:>10} {row.original_s:>11.2f} "
              f"{row.patched_s:>10.2f} {ratio:>7.3f}  {row.same}")
        if row.original_s > args.max_original_s:
            budget = 0.0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
