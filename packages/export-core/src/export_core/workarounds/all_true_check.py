"""Tensor checks (``torch._check_tensor_all``) in Core ATen ops.

``transformers`` guards its placeholder merges (image / audio / video features scattered into the
text embeddings) with ``torch_compilable_check(mask_count == feature_count, ...)``, which under
``torch.export`` becomes ``torch._check_tensor_all(cond)``: the graph gets
``aten._is_all_true(cond)`` followed by ``_local_scalar_dense`` and ``_assert_scalar`` runtime
assertions. ``aten._is_all_true`` has no decomposition, is not in the Core ATen opset (ExecuTorch
lowering: ``SpecViolationError``) and has no ONNX function (translation: ``DispatchError``).

The scalar chain behind it is a problem of its own on ExecuTorch: ``torch.sym_ite`` is a Python
function, which the Edge dialect verifier rejects with a bare ``AssertionError`` (it accepts only
``alloc`` among Python functions, executorch#11988).

Neither runtime keeps a graph's scalar assertions (ONNX has no assertion operator; ExecuTorch
drops ``_assert_scalar``), so when the check only feeds assertions the capture removes the whole
check: ``_is_all_true``, its ``item`` and the scalar ops and ``_assert_scalar`` calls that use it,
and the condition's now-dead computation. When the truth value feeds anything else, the node is
rewritten as ``logical_not(any(logical_not(cond)))`` instead, the Core ATen form of
``aten.all`` (``any`` and ``logical_not`` are Core ATen and have ONNX functions).
"""

from __future__ import annotations

import operator

import torch

from ..registry import register_fx_node_fix

__all__ = ["all_true_as_core_aten"]

_aten = torch.ops.aten
_ASSERTIONS = {_aten._assert_scalar.default, _aten._assert_async.msg, _aten._assert_async.default}
_SCALAR_OPS = {
    _aten.item.default, _aten._local_scalar_dense.default, _aten.sym_constrain_range.default,
    _aten.sym_constrain_range_for_size.default, torch.sym_ite, torch.sym_not, torch.sym_max,
    torch.sym_min, torch.sym_int, torch.sym_float,
    *(getattr(operator, name) for name in (
        "eq", "ne", "ge", "gt", "le", "lt", "and_", "or_", "not_", "add", "sub", "mul",
        "floordiv", "mod", "neg", "truediv",
    )),
}
"""Scalar (``SymInt`` / ``SymBool``) ops a tensor check's truth value passes through on its way
to the assertions."""
_CHAIN = _ASSERTIONS | _SCALAR_OPS


def _assertion_chain(node: torch.fx.Node) -> list[torch.fx.Node] | None:
    """``node``'s transitive users, users first, when they are scalar ops ending only in
    assertions; ``None`` when the value reaches anything else (an output, a tensor op)."""
    chain: list[torch.fx.Node] = []
    seen: set[torch.fx.Node] = set()
    todo = list(node.users)
    while todo:
        user = todo.pop()
        if user in seen:
            continue
        seen.add(user)
        if user.op != "call_function" or user.target not in _CHAIN:
            return None
        chain.append(user)
        todo.extend(user.users)
    order = {n: i for i, n in enumerate(node.graph.nodes)}
    return sorted(chain, key=order.__getitem__, reverse=True)
_UPSTREAM = "https://github.com/pytorch/pytorch/pull/110093"
"""The Core ATen decomposition of ``aten.all``, which ``aten._is_all_true`` lacks."""


@register_fx_node_fix(
    "dynamo",
    _aten._is_all_true.default,
    stage="capture_node_fixes",
    reason=(
        "torch._check_tensor_all (transformers' torch_compilable_check on a tensor) traces to "
        "aten._is_all_true, which is not Core ATen (ExecuTorch lowering fails) and has no ONNX "
        "function (translation fails), followed by a sym_ite chain the ExecuTorch Edge verifier "
        "rejects; a check that only feeds assertions (which neither runtime keeps) is removed, "
        "any other is rewritten as logical_not(any(logical_not(x)))"
    ),
    upstream=_UPSTREAM,
)
def all_true_as_core_aten(node: torch.fx.Node) -> bool:
    """Remove a tensor check that only feeds assertions; otherwise replace
    ``aten._is_all_true(x)`` by ``logical_not(any(logical_not(x)))``.

    Args:
        node: an ``aten._is_all_true.default`` call; ``x`` is a ``torch.bool`` tensor of any
            shape, the result a 0-d ``torch.bool`` tensor, true when every element of ``x`` is
            (also when ``x`` is empty, as ``torch.all``).

    Returns:
        True: the node is always removed or replaced (dead code elimination then removes the
        condition's computation).

    Source: https://github.com/pytorch/pytorch/pull/110093 (``aten.all`` in Core ATen terms);
    https://github.com/pytorch/executorch/issues/11988 (Python sym functions in ExecuTorch).
    """
    graph = node.graph
    chain = _assertion_chain(node)
    if chain is not None:
        for user in chain:
            graph.erase_node(user)
        graph.erase_node(node)
        return True
    (x,) = node.args
    x_val = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
    with graph.inserting_before(node):
        negated = graph.call_function(_aten.logical_not.default, (x,))
        anything_false = graph.call_function(_aten.any.default, (negated,))
        result = graph.call_function(_aten.logical_not.default, (anything_false,))
    if x_val is not None:
        negated.meta["val"] = torch.logical_not(x_val)
        anything_false.meta["val"] = torch.any(negated.meta["val"])
        result.meta["val"] = torch.logical_not(anything_false.meta["val"])
    for new in (negated, anything_false, result):
        new.meta.update({k: v for k, v in node.meta.items() if k != "val"})
    node.replace_all_uses_with(result)
    graph.erase_node(node)
    return True
