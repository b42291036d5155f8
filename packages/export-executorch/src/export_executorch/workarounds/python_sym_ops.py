"""FX program fix: let the edge verifier admit the Python symbolic-size functions ExecuTorch runs.

A model that computes a size with ``max``/``min`` of a dynamic size and a constant (MPT's ALiBi
bias, padding to a minimum length, ``torch.sym_float(seq)`` as a scale) is captured with call
nodes of the Python functions ``torch.sym_max``, ``torch.sym_min``, ``torch.sym_float``, ... .
ExecuTorch has runtime prim ops for them and swaps them in when it emits the program
(``ReplaceEdgeWithBackendPass``: ``executorch_prim::sym_max.Scalar``, ...), but its edge verifier,
which runs earlier inside ``to_edge_transform_and_lower``, admits a plain Python function only if
it is named ``alloc``, and fails with a bare ``AssertionError`` (22 model types of the sweep:
MPT, SEW, RADIO, SmolVLM, ...).

Rewriting the nodes to the prim ops before lowering is *wrong*: the edge decomposition re-traces
them, evaluates them at the example's sizes and bakes the result in (a tiny model then returned
shape ``(3, 6, 4)`` for eager's ``(3, 9, 4)`` without an error). So the fix leaves the graph alone
and reports the functions the program calls; the lowering stage adds them to the
``EdgeCompileConfig``'s ``_core_aten_ops_exception_list``, the exception list the verifier's own
message recommends, and ExecuTorch's emitter turns them into its prim ops as it always does.

Source: https://github.com/pytorch/executorch/issues/11988
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from export_core.fixes import FixContext, FixResult, called_targets
from export_core.registry import register_fx_program_fix

from ..stages import BACKEND

__all__ = ["PYTHON_SYM_FUNCTIONS", "AdmittedSymOps", "admit_python_sym_ops", "edge_config_admitting"]

PYTHON_SYM_FUNCTIONS = (
    torch.sym_max,
    torch.sym_min,
    torch.sym_float,
    torch.sym_int,
    torch.sym_not,
    torch.sym_ite,
)
"""The Python functions (not ``OpOverload``s, not builtins) a captured graph may call on symbolic
sizes that ExecuTorch maps to runtime prim ops
(``executorch.exir.passes.executorch_prim_ops_registry``)."""


@dataclass(frozen=True)
class AdmittedSymOps:
    """The Python symbolic-size functions a program calls, which the edge verifier must admit.

    Attributes:
        functions: the functions, in :data:`PYTHON_SYM_FUNCTIONS` order.
    """

    functions: tuple[object, ...]

    @property
    def names(self) -> list[str]:
        """Their names (``["torch.sym_max"]``), for the report."""
        return [f"torch.{getattr(f, '__name__', f)}" for f in self.functions]


def _mapped_by_executorch() -> set[object]:
    """The functions of :data:`PYTHON_SYM_FUNCTIONS` ExecuTorch's emitter maps to prim ops."""
    from executorch.exir.passes.executorch_prim_ops_registry import (
        _PYTHON_SYM_OPS_TO_EXECUTORCH_SYM_OPS,
    )

    return {f for f in PYTHON_SYM_FUNCTIONS if f in _PYTHON_SYM_OPS_TO_EXECUTORCH_SYM_OPS}


@register_fx_program_fix(
    BACKEND,
    reason="the edge verifier fails with a bare AssertionError on the Python symbolic-size "
    "functions (torch.sym_max, sym_min, sym_float, ...) that ExecuTorch itself maps to runtime "
    "prim ops later in lowering",
    upstream="https://github.com/pytorch/executorch/issues/11988",
)
def admit_python_sym_ops(program: torch.export.ExportedProgram, context: FixContext) -> FixResult:
    """Find the Python symbolic-size functions ``program`` calls that ExecuTorch can run.

    The graph is not rewritten (see the module docstring); the lowering stage admits the
    functions through :func:`edge_config_admitting`.

    Args:
        program: the captured ``ExportedProgram``.
        context: the export's context (unused).

    Returns:
        ``FixResult(program, modified=<any found>, details=AdmittedSymOps)`` (``details`` is
        ``None`` when the program calls none).

    Source: https://github.com/pytorch/executorch/issues/11988
    """
    del context
    called = called_targets(program, PYTHON_SYM_FUNCTIONS)
    if not called:
        return FixResult(program, False)
    runnable = called & _mapped_by_executorch()
    found = tuple(f for f in PYTHON_SYM_FUNCTIONS if f in runnable)
    return FixResult(program, bool(found), AdmittedSymOps(found) if found else None)


def edge_config_admitting(config: object | None, admitted: AdmittedSymOps | None) -> object | None:
    """``config`` (an ``EdgeCompileConfig``, ``None``: ExecuTorch's default) with ``admitted``'s
    functions added to its ``_core_aten_ops_exception_list``; ``config`` itself when there is
    nothing to admit.

    Source: https://github.com/pytorch/executorch/issues/11988
    """
    if admitted is None or not admitted.functions:
        return config
    import dataclasses

    from executorch.exir import EdgeCompileConfig

    base = config if config is not None else EdgeCompileConfig()
    listed = list(base._core_aten_ops_exception_list or [])
    extra = [f for f in admitted.functions if f not in listed]
    return dataclasses.replace(base, _core_aten_ops_exception_list=[*listed, *extra])
