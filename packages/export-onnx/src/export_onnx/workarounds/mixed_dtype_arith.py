"""FX node fix: arithmetic that mixes an integer or bool tensor with a float operand.

``torch.onnx`` inserts explicit type promotion after decomposing the program. When it has to
promote an operand of ``add`` / ``sub`` / ``rsub`` / ``mul`` / ``div`` / ``floor_divide`` /
``remainder`` and the decomposition left a Python number in the ``self`` position (``rsub``
decomposes to ``sub(1.0, x)``; ``3.5 // x`` traces as ``floor_divide(3.5, x)``), no overload
accepts the promoted arguments and the export fails::

    (1.0 - attention_mask) * -1e4   # attention_mask: int64 [batch, seq]
    RuntimeError: Cannot find a compatible OpOverload for aten.sub ...

This fix makes the promotion explicit before ``torch.onnx`` sees the node: an integer or bool
tensor operand of an op whose result is floating point is cast to the result dtype, and a
Python number in the ``self`` position becomes a 0-d tensor of the result dtype. Both are what
eager PyTorch computes, so the numbers do not change.

Source: https://github.com/pytorch/pytorch/issues/194381
"""

from __future__ import annotations

from typing import Any

import torch

from export_core.registry import register_fx_node_fix

__all__ = ["ARITHMETIC_OPS", "fix_mixed_dtype_arith"]

_aten = torch.ops.aten

ARITHMETIC_OPS: tuple[Any, ...] = (
    _aten.add,
    _aten.sub,
    _aten.rsub,
    _aten.mul,
    _aten.div,
    _aten.floor_divide,
    _aten.remainder,
)
"""The op packets (every overload) the fix is offered: Python's ``+ - * / // %``."""

_COPIED_META = ("stack_trace", "nn_module_stack", "source_fn_stack")


def _is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


def _insert_before(
    node: torch.fx.Node, target: Any, args: tuple, kwargs: dict, val: torch.Tensor
) -> torch.fx.Node:
    with node.graph.inserting_before(node):
        new = node.graph.call_function(target, args, kwargs)
    new.meta.update({k: node.meta[k] for k in _COPIED_META if k in node.meta})
    new.meta["val"] = val
    return new


@register_fx_node_fix(
    "onnx",
    *ARITHMETIC_OPS,
    reason="torch.onnx's type promotion finds no aten overload for arithmetic that mixes an "
    "integer/bool tensor with a float scalar or tensor once a number sits in the self position.",
    upstream="https://github.com/pytorch/pytorch/issues/194381",
)
def fix_mixed_dtype_arith(node: torch.fx.Node) -> bool:
    """Make the operand types of one arithmetic node explicit.

    Rewrites, for a node ``op(self, other, ...)`` with a tensor result of dtype ``out``:

    - a Python number ``self`` -> ``aten.scalar_tensor(self, dtype=out)`` (0-d tensor), and the
      node moves to the op's tensor overload (``remainder.Scalar_Tensor`` -> ``remainder.Tensor``);
    - when ``out`` is floating point, an integer or bool tensor operand ->
      ``aten._to_copy(operand, dtype=out)``.

    Args:
        node: an ``aten.{add,sub,rsub,mul,div,floor_divide,remainder}.*`` call.

    Returns:
        True when an operand was replaced.

    Source: https://github.com/pytorch/pytorch/issues/194381
    """
    out = node.meta.get("val")
    if not isinstance(out, torch.Tensor) or len(node.args) < 2:
        return False
    args = list(node.args)
    changed = False
    for i, arg in enumerate(args[:2]):
        if isinstance(arg, torch.fx.Node):
            val = arg.meta.get("val")
            if isinstance(val, torch.Tensor) and _is_float(out.dtype) and not _is_float(val.dtype):
                args[i] = _insert_before(
                    node, _aten._to_copy.default, (arg,), {"dtype": out.dtype}, val.to(out.dtype)
                )
                changed = True
        elif i == 0 and isinstance(arg, int | float | bool):
            scalar = out.new_full((), arg, dtype=out.dtype)
            args[i] = _insert_before(
                node, _aten.scalar_tensor.default, (arg,), {"dtype": out.dtype}, scalar
            )
            # ``remainder.Scalar_Tensor`` and the like take a number first; use the tensor form.
            packet = node.target.overloadpacket
            node.target = getattr(packet, "Tensor", None) or packet.default
            changed = True
    if changed:
        node.args = tuple(args)
    return changed
