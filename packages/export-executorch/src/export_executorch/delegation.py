"""The delegation summary of a lowered program: what went to the delegate, what stayed portable."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

__all__ = ["DELEGATE_CALL", "delegation_summary", "format_delegation"]

DELEGATE_CALL = "executorch_call_delegate"
"""Name of the node that calls a lowered (delegated) subgraph."""

_SKIP = ("getitem",)


def _op_name(node: torch.fx.Node) -> str:
    """``aten.view_copy.default`` for an (edge) op overload, the callable's name otherwise."""
    schema = getattr(node.target, "_schema", None)
    if schema is not None:
        return f"{schema.name.replace('::', '.')}.{schema.overload_name or 'default'}"
    return getattr(node.target, "__name__", str(node.target))


def delegation_summary(edge_program: Any) -> dict[str, Any]:
    """Count the nodes of a lowered edge program that went to a delegate and those left to
    ExecuTorch's CPU kernels.

    Args:
        edge_program: the ``ExportedProgram`` of ``EdgeProgramManager.exported_program()``
            after ``to_edge_transform_and_lower``.

    Returns:
        ``{"delegated_nodes": n, "total_nodes": m, "delegated_subgraphs": k,
        "portable_ops": {op: count}}``: ``n`` ``call_function`` nodes inside delegated
        subgraphs, ``m`` = ``n`` plus the ``call_function`` nodes outside them (``getitem``
        and the delegate calls themselves not counted); ``portable_ops`` counts the latter by
        op, most frequent first.
    """
    gm = edge_program.graph_module
    delegated = 0
    subgraphs = 0
    portable: Counter[str] = Counter()
    for node in gm.graph.nodes:
        if node.op == "get_attr" and node.name.startswith("lowered_module"):
            lowered = getattr(gm, str(node.target), None)
            original = getattr(lowered, "original_module", None)
            if original is None:
                continue
            subgraphs += 1
            delegated += sum(
                1 for n in original.graph.nodes
                if n.op == "call_function" and getattr(n.target, "__name__", "") not in _SKIP
            )
        elif node.op == "call_function":
            name = getattr(node.target, "__name__", str(node.target))
            if name in _SKIP or name == DELEGATE_CALL:
                continue
            portable[_op_name(node)] += 1
    return {
        "delegated_nodes": delegated,
        "total_nodes": delegated + sum(portable.values()),
        "delegated_subgraphs": subgraphs,
        "portable_ops": dict(portable.most_common()),
    }


def format_delegation(summary: dict[str, Any], backend: str) -> str:
    """One line for stderr: ``xnnpack: 41/44 nodes delegated in 1 subgraph; portable: ...``."""
    ops = summary["portable_ops"]
    shown = ", ".join(f"{k} x{v}" for k, v in list(ops.items())[:5])
    more = f" (+{len(ops) - 5} more)" if len(ops) > 5 else ""
    head = (
        f"{backend}: {summary['delegated_nodes']}/{summary['total_nodes']} nodes delegated "
        f"in {summary['delegated_subgraphs']} subgraph(s)"
    )
    return head + (f"; portable ops: {shown}{more}" if ops else "; no portable ops")
