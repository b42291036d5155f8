"""FX node fix: ExecuTorch computes ``%`` of symbolic sizes with C++'s sign, not Python's.

Shape arithmetic in a captured graph is ``operator.mod(a, b)`` on ``SymInt`` s; ExecuTorch emits
it as the runtime prim op ``executorch_prim::mod.Scalar``, which the runtime computes as
``a % b`` in C++: the remainder of a truncating division, with the sign of ``a``. Python's (and
PyTorch's) ``%`` floors, with the sign of ``b``. The two differ whenever ``a`` is negative, and
that is the standard way to pad a length to a multiple: ``pad = (-seq) % block``. There
ExecuTorch got ``pad = -seq % block`` (``-6 % 4 = -2`` instead of ``2``); the program then fails
(``Padding values must be non-negative``) or, worse, divides by the padded length of 0 and kills
the process with SIGFPE (LongT5's local attention: ``num_blocks = padded // block_len``, then
``padded // num_blocks``), at every input shape.

The fix rewrites each ``operator.mod(a, b)`` node into ``((a % b) + b) % b``, which is Python's
remainder under either sign rule: the inner remainder is in ``(-|b|, |b|)``, adding ``b`` moves it
to the sign of ``b`` (or to ``0 .. b``), and the outer remainder of a value of the divisor's sign
is the same in C++ and Python. The rewrite is in place (no re-trace); the nodes are plain
``operator.mod`` / ``operator.add`` calls that ExecuTorch maps to its prim ops as before. For the
shape checks the edge re-trace keeps, sympy already knows both forms are equal.

Source: https://github.com/pytorch/executorch/pull/5721 (added ``executorch_prim::mod.Scalar``
as ``out = EValue(a.toInt() % b.toInt())``, as ``mod.int`` is, in
``kernels/prim_ops/register_prim_ops.cpp``; unchanged in ExecuTorch 1.5.1)
"""

from __future__ import annotations

import operator

import torch

from export_core.fixes import call_before
from export_core.registry import register_fx_node_fix

from ..stages import BACKEND

__all__ = ["PRIM_MOD_SOURCE", "python_sign_sym_mod"]

PRIM_MOD_SOURCE = "https://github.com/pytorch/executorch/pull/5721"
"""The pull request that added ``executorch_prim::mod.Scalar``, computed with C++'s ``%``."""

_MARK = "export_executorch.python_sign_mod"
"""``node.meta`` key set on the outer remainder the fix inserts, so a second pass leaves it."""


def _is_symbolic_int(value: object) -> bool:
    return isinstance(value, torch.SymInt)


@register_fx_node_fix(
    BACKEND,
    operator.mod,
    reason="ExecuTorch's runtime computes the remainder of symbolic sizes (executorch_prim::mod) "
    "with C++'s sign (of the dividend), not Python's (of the divisor): (-seq) % block, the usual "
    "padding to a multiple, comes out negative (negative padding, or SIGFPE on a later division "
    "by the padded length: LongT5); each remainder is rewritten as ((a % b) + b) % b",
    upstream=PRIM_MOD_SOURCE,
)
def python_sign_sym_mod(node: torch.fx.Node) -> bool:
    """Replace a symbolic ``operator.mod(a, b)`` node by ``((a % b) + b) % b`` (in place).

    Args:
        node: an ``operator.mod`` call; rewritten when its value (``meta["val"]``) is a
            ``SymInt`` (a remainder of sizes known at trace time is a constant and runs nowhere).

    Returns:
        True when the node was replaced.

    Source: https://github.com/pytorch/executorch/pull/5721
    """
    if node.meta.get(_MARK) or not _is_symbolic_int(node.meta.get("val")) or len(node.args) != 2:
        return False
    a, b = node.args
    if not all(not isinstance(x, torch.fx.Node) or "val" in x.meta for x in (a, b)):
        return False
    inner = call_before(node, operator.mod, a, b)
    inner.meta[_MARK] = True
    shifted = call_before(node, operator.add, inner, b)
    outer = call_before(node, operator.mod, shifted, b)
    outer.meta[_MARK] = True
    node.replace_all_uses_with(outer)
    node.graph.erase_node(node)
    return True
