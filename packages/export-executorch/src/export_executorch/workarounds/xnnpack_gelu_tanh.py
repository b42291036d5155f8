"""FX program fix: XNNPACK runs ``gelu(x, approximate="tanh")`` as the exact (erf) GELU.

XNNPACK's partitioner delegates every ``aten.gelu`` and its serializer writes an ``XNNGelu`` node
without looking at ``approximate``, so a delegated tanh-approximated GELU computes
``0.5 * x * (1 + erf(x / sqrt(2)))`` instead of
``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``. The two differ by up to ~5e-4
(at ``|x|`` near 2.7): a silently wrong artifact, not an error. Every model with
``hidden_act="gelu_pytorch_tanh"`` (SigLIP and the vision-language models built on it, Gemma,
Gemma 4, PaliGemma) came out of lowering with outputs off by 2e-4 .. 7e-4 at fp32.

The fix decomposes each tanh-approximated ``gelu`` into that formula (``mul``, ``add``,
``tanh``, all of which XNNPACK delegates), so the nodes stay inside the delegate and compute what
PyTorch computes; exact GELU is left to ``XNNGelu``. The portable kernels implement both modes,
so the fix is registered for the XNNPACK backend only. Fixed upstream by executorch#22851 (an
``XNNApproxGelu`` node), after ExecuTorch 1.5.

Source: https://github.com/pytorch/executorch/pull/22851
"""

from __future__ import annotations

import math
from typing import Any

import torch

from export_core.fixes import FixContext, FixResult
from export_core.registry import register_fx_program_fix

__all__ = ["gelu_tanh", "gelu_tanh_as_formula", "tanh_gelu_count"]

_aten = torch.ops.aten
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu_tanh(x: torch.Tensor, approximate: str = "none") -> Any:
    """The decomposition of ``aten.gelu.default`` for ``approximate="tanh"``.

    Args:
        x: any shape, floating dtype.
        approximate: ``"tanh"`` decomposes; any other value declines (returns
            ``NotImplemented``, so the node stays ``aten.gelu``).

    Returns:
        ``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``, shape and dtype of ``x``
        (PyTorch's own tanh approximation), or ``NotImplemented``.

    Source: https://github.com/pytorch/executorch/pull/22851
    """
    if approximate != "tanh":
        return NotImplemented
    inner = (x + x * x * x * 0.044715) * _SQRT_2_OVER_PI
    return x * 0.5 * (torch.tanh(inner) + 1.0)


def tanh_gelu_count(program: torch.export.ExportedProgram) -> int:
    """The ``aten.gelu`` nodes of ``program`` (nested graphs included) with
    ``approximate="tanh"``."""
    count = 0
    for module in program.graph_module.modules():
        if not isinstance(module, torch.fx.GraphModule):
            continue
        for node in module.graph.nodes:
            if node.op == "call_function" and node.target is _aten.gelu.default:
                mode = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
                count += mode == "tanh"
    return count


@register_fx_program_fix(
    "executorch.xnnpack",
    reason="XNNPACK's GELU ignores approximate='tanh' and computes the exact (erf) GELU, a "
    "silent error of up to ~5e-4 (gelu_pytorch_tanh models: SigLIP, Gemma, PaliGemma); the "
    "tanh approximation is decomposed into mul / add / tanh, which XNNPACK delegates",
    upstream="https://github.com/pytorch/executorch/pull/22851",
)
def gelu_tanh_as_formula(program: torch.export.ExportedProgram, context: FixContext) -> FixResult:
    """Decompose every ``gelu(x, approximate="tanh")`` of the program with :func:`gelu_tanh`.

    Args:
        program: the captured ``ExportedProgram``.
        context: the export's context (unused).

    Returns:
        ``FixResult(new program, modified=True, details=count)`` (``count``: the tanh GELU
        nodes decomposed) when there is one, else ``FixResult(program, False)``.

    Source: https://github.com/pytorch/executorch/pull/22851
    """
    del context
    count = tanh_gelu_count(program)
    if not count:
        return FixResult(program, False)
    return FixResult(program.run_decompositions({_aten.gelu.default: gelu_tanh}), True, count)
