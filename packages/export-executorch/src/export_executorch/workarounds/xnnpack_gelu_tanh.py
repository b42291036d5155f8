"""FX node fix: XNNPACK runs ``gelu(x, approximate="tanh")`` as the exact (erf) GELU.

XNNPACK's partitioner delegates every ``aten.gelu`` and its serializer writes an ``XNNGelu`` node
without looking at ``approximate``, so a delegated tanh-approximated GELU computes
``0.5 * x * (1 + erf(x / sqrt(2)))`` instead of
``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``. The two differ by up to ~5e-4
(at ``|x|`` near 2.7): a silently wrong artifact, not an error. Every model with
``hidden_act="gelu_pytorch_tanh"`` (SigLIP and the vision-language models built on it, Gemma,
Gemma 4, PaliGemma) came out of lowering with outputs off by 2e-4 .. 7e-4 at fp32.

The fix replaces each tanh-approximated ``gelu`` node by the nodes of that formula (``mul``,
``add``, ``tanh``, all of which XNNPACK delegates; in place, without a re-trace), so the nodes
stay inside the delegate and compute what PyTorch computes; exact GELU is left to ``XNNGelu``. The portable kernels implement both modes,
so the fix is registered for the XNNPACK backend only. Fixed upstream by executorch#22851 (an
``XNNApproxGelu`` node), after ExecuTorch 1.5.

Source: https://github.com/pytorch/executorch/pull/22851
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from export_core.fixes import call_before
from export_core.registry import register_fx_node_fix

__all__ = ["gelu_tanh", "gelu_tanh_as_formula"]

_aten = torch.ops.aten
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu_tanh(x: Any, approximate: str = "none", op: Callable[..., Any] | None = None) -> Any:
    """``aten.gelu.default`` for ``approximate="tanh"`` in ``mul`` / ``add`` / ``tanh``.

    Args:
        x: any shape, floating dtype (or an FX node, with ``op``).
        approximate: ``"tanh"`` decomposes; any other value declines (returns
            ``NotImplemented``: exact GELU stays ``aten.gelu``).
        op: ``op(target, *args)`` applies an ATen overload; default: call it (eager). The node
            fix passes one that inserts graph nodes.

    Returns:
        ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``, shape and dtype of ``x``
        (PyTorch's own tanh approximation), or ``NotImplemented``.

    Source: https://github.com/pytorch/executorch/pull/22851
    """
    if approximate != "tanh":
        return NotImplemented
    call = op or (lambda target, *args: target(*args))
    mul, add = _aten.mul.Tensor, _aten.add.Tensor
    cube = call(mul, call(mul, x, x), x)
    inner = call(add, x, call(mul, cube, 0.044715))
    tanh = call(_aten.tanh.default, call(mul, inner, _SQRT_2_OVER_PI))
    return call(mul, call(mul, x, 0.5), call(add, tanh, 1.0))


@register_fx_node_fix(
    "executorch.xnnpack",
    _aten.gelu.default,
    reason="XNNPACK's GELU ignores approximate='tanh' and computes the exact (erf) GELU, a "
    "silent error of up to ~5e-4 (gelu_pytorch_tanh models: SigLIP, Gemma, PaliGemma); the "
    "tanh approximation is decomposed into mul / add / tanh, which XNNPACK delegates",
    upstream="https://github.com/pytorch/executorch/pull/22851",
)
def gelu_tanh_as_formula(node: torch.fx.Node) -> bool:
    """Replace ``aten.gelu.default(x, approximate="tanh")`` by the nodes of :func:`gelu_tanh`
    (in place: no re-trace; each new node has the fake value of its call).

    Args:
        node: an ``aten.gelu.default`` call; ``x`` any shape, floating dtype.

    Returns:
        True when the node was replaced (``approximate="tanh"``); exact GELU is left alone.

    Source: https://github.com/pytorch/executorch/pull/22851
    """
    approximate = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
    x = node.args[0]
    if approximate != "tanh" or not isinstance(x, torch.fx.Node) or "val" not in x.meta:
        return False
    out = gelu_tanh(x, "tanh", lambda target, *args: call_before(node, target, *args))
    node.replace_all_uses_with(out)
    node.graph.erase_node(node)
    return True
