"""FX program fix: give every dynamic dimension of the captured program a finite range.

ExecuTorch plans every activation buffer at the upper bound of its dynamic dimensions, and a
``Dim.AUTO`` capture leaves most symbols unbounded (``int_oo``): ExecuTorch then silently plans
for the example size, and the program rejects every larger input at run time (error ``0x10``).
The fix writes ``[1, cap]`` into the program's range constraints and its symbols' shape
environment, with caps per axis role chosen by :func:`export_executorch.bounds.dim_limits` from
the config's options and the model's config (see :mod:`export_executorch.bounds`); an axis the
caller declared as ``Dim(max=N)`` keeps N::

    range_constraints[s] = [2, int_oo]  →  [1, min(model bound, cap(role of s))]
    range_constraints[s] = [2, N]       →  [1, N]            (declared Dim(max=N))

The :class:`~export_executorch.bounds.BoundsPlan` it returns as its details is the report's
``bounds`` and decides which validation input sets the program can accept.

Source: https://github.com/pytorch/executorch/issues/8766
"""

from __future__ import annotations

import torch

from export_core.axes import model_config
from export_core.dynamic_shapes import declared_dims
from export_core.fixes import FixContext, FixResult
from export_core.registry import register_fx_program_fix

from ..bounds import apply_dim_bounds, dim_limits
from ..stages import BACKEND

__all__ = ["bound_dynamic_dims", "model_config"]


@register_fx_program_fix(
    BACKEND,
    reason="ExecuTorch plans memory at the upper bound of each dynamic dimension; an unbounded "
    "torch.export symbol makes it plan for the example size and reject larger inputs at run time",
    upstream="https://github.com/pytorch/executorch/issues/8766",
)
def bound_dynamic_dims(program: torch.export.ExportedProgram, context: FixContext) -> FixResult:
    """Bound every dynamic dimension of ``program``'s user inputs (in place).

    Args:
        program: the captured ``ExportedProgram``.
        context: the export's context; ``context.config`` (an ``ExecutorchConfig``) gives
            ``max_batch``, ``max_seq``, ``max_image_size``, ``max_audio_samples`` and
            ``max_frames``,
            ``context.capture`` the input names and the model config.

    Returns:
        ``FixResult(program, modified=<any dim bounded>, details=BoundsPlan)``.

    Raises:
        InputError: an explicit cap is below an example input's size.

    Source: https://github.com/pytorch/executorch/issues/8766
    """
    cfg = context.config
    limits = dim_limits(
        model_config(context.capture.module),
        max_batch=getattr(cfg, "max_batch", None), max_seq=getattr(cfg, "max_seq", None),
        max_image_size=getattr(cfg, "max_image_size", None),
        max_audio_samples=getattr(cfg, "max_audio_samples", None),
        max_frames=getattr(cfg, "max_frames", None),
    )
    capture = context.capture
    declared = declared_dims(capture.kwargs or capture.args, capture.dynamic_shapes,
                             capture.input_names)
    plan = apply_dim_bounds(program, capture.input_names, limits, declared)
    return FixResult(program, bool(plan.dims), plan)
