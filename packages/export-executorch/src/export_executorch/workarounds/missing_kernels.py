"""FX program fix: decompose the ops ExecuTorch cannot run into ops it has kernels for.

- ``aten.scatter_reduce.two`` is Core ATen, so lowering accepts it, but the portable library has
  no ``scatter_reduce.two_out`` kernel: the program fails to load (``OperatorMissing``, 0x14;
  executorch#11330). ``sum`` and ``mean`` become ``scatter_add`` (``scatter`` first when
  ``include_self=False``), ``amax`` / ``amin`` / ``prod`` a masked reduction over a one-hot of
  the destinations (memory: ``self.shape[dim] * index.numel()`` elements).
- ``aten.bucketize.Tensor`` is not Core ATen (``SpecViolationError`` at lowering) and has no
  kernel either (executorch#20270): it becomes a comparison against the boundaries and a sum.

The fix runs ``ExportedProgram.run_decompositions`` with these functions only, and only when the
program calls one of the ops; every other node is left as it was.

Source: https://github.com/pytorch/executorch/issues/11330
"""

from __future__ import annotations

from typing import Any

import torch

from export_core.fixes import FixContext, FixResult, called_targets
from export_core.registry import register_fx_program_fix

from ..stages import BACKEND

__all__ = ["bucketize", "decompose_missing_kernels", "scatter_reduce"]

_aten = torch.ops.aten


def _fill(dtype: torch.dtype, reduce: str) -> float | int | bool:
    """The identity of ``reduce`` in ``dtype`` (what an unscattered slot contributes)."""
    if reduce == "prod":
        return True if dtype == torch.bool else 1
    if dtype == torch.bool:
        return reduce == "amin"
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    if dtype.is_floating_point:
        return float("-inf") if reduce == "amax" else float("inf")
    return info.min if reduce == "amax" else info.max


def scatter_reduce(
    self: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor, reduce: str,
    *, include_self: bool = True,
) -> torch.Tensor:
    """``aten.scatter_reduce.two`` from ops with ExecuTorch kernels.

    Args:
        self: the destination, any shape ``(..., n, ...)`` with ``n`` at ``dim``.
        dim: the scattered axis.
        index: int64, ``index.dim() == self.dim()``; ``index.shape[k] <= src.shape[k]`` and,
            for ``k != dim``, ``<= self.shape[k]``.
        src: the values; only its ``index.shape`` corner is read.
        reduce: ``"sum"``, ``"mean"``, ``"prod"``, ``"amax"`` or ``"amin"``.
        include_self: whether ``self``'s value takes part at the slots that receive values.

    Returns:
        A tensor shaped and typed like ``self``, equal to ``torch.scatter_reduce``.

    Source: https://github.com/pytorch/executorch/issues/11330
    """
    dim = dim % max(self.dim(), 1)
    src = src[tuple(slice(0, index.shape[k]) for k in range(index.dim()))]
    if reduce in ("sum", "mean"):
        base = self if include_self else self.scatter(dim, index, 0)
        total = base.scatter_add(dim, index, src)
        if reduce == "sum":
            return total
        count = (torch.ones_like(self) if include_self else torch.zeros_like(self)).scatter_add(
            dim, index, torch.ones_like(src))
        count = torch.where(count == 0, torch.ones_like(count), count)
        if self.dtype.is_floating_point or self.dtype.is_complex:
            return total / count
        return torch.div(total, count, rounding_mode="floor")
    if reduce not in ("prod", "amax", "amin"):
        raise ValueError(f"scatter_reduce: unknown reduce {reduce!r}")
    n = self.shape[dim]
    # hit[t, i...] = index[i...] == t: which destination each value goes to, (n, *index.shape)
    targets = torch.arange(n, device=index.device).view(n, *([1] * index.dim()))
    hit = index.unsqueeze(0) == targets
    values = torch.where(hit, src.unsqueeze(0), torch.full_like(src, _fill(src.dtype, reduce)).unsqueeze(0))
    if reduce == "prod":
        reduced = values.prod(dim + 1)
    elif reduce == "amax":
        reduced = values.amax(dim + 1)
    else:
        reduced = values.amin(dim + 1)
    touched = hit.any(dim + 1)
    # (n, index dims but dim) -> index.shape with n at dim, then padded to self.shape
    reduced, touched = reduced.movedim(0, dim), touched.movedim(0, dim)
    pad: list[Any] = []
    for k in reversed(range(self.dim())):
        pad += [0, self.shape[k] - reduced.shape[k]]
    reduced = torch.nn.functional.pad(reduced, pad)
    touched = torch.nn.functional.pad(touched, pad)
    reduced = reduced.to(self.dtype)
    if include_self:
        if reduce == "prod":
            reduced = reduced * self
        elif reduce == "amax":
            reduced = torch.maximum(reduced, self)
        else:
            reduced = torch.minimum(reduced, self)
    return torch.where(touched, reduced, self)


def bucketize(
    input: torch.Tensor, boundaries: torch.Tensor, *, out_int32: bool = False, right: bool = False
) -> torch.Tensor:
    """``aten.bucketize.Tensor`` as a comparison with every boundary and a count.

    Args:
        input: any shape ``(...)``, a real dtype.
        boundaries: ``(b,)``, ascending.
        out_int32: int32 indices instead of int64.
        right: a value equal to a boundary goes to the bucket after it.

    Returns:
        ``(...)`` int64 (int32 with ``out_int32``): for each value the number of boundaries
        below it (``right=False``) or at most equal to it (``right=True``); NaN gets ``b``, as
        in eager. Memory: ``input.numel() * b`` booleans.

    Source: https://github.com/pytorch/executorch/issues/20270
    """
    x = input.unsqueeze(-1)
    below = (x >= boundaries) if right else (x > boundaries)
    dtype = torch.int32 if out_int32 else torch.int64
    count = below.sum(-1, dtype=dtype)
    if input.dtype.is_floating_point:
        count = torch.where(torch.isnan(input), torch.full_like(count, boundaries.shape[0]), count)
    return count


_DECOMPOSITIONS = {
    _aten.scatter_reduce.two: scatter_reduce,
    _aten.bucketize.Tensor: bucketize,
}
"""Op overload -> its decomposition into ops ExecuTorch runs."""


@register_fx_program_fix(
    BACKEND,
    reason="ExecuTorch has no kernel for scatter_reduce.two (the program fails to load) nor for "
    "bucketize.Tensor (not Core ATen: lowering fails); both decompose into ops it runs",
    upstream="https://github.com/pytorch/executorch/issues/11330",
)
def decompose_missing_kernels(program: torch.export.ExportedProgram, context: FixContext) -> FixResult:
    """Decompose the program's ``scatter_reduce.two`` and ``bucketize.Tensor`` calls.

    Args:
        program: the captured ``ExportedProgram``.
        context: the export's context (unused).

    Returns:
        ``FixResult(new program, modified=True, details=[op names])`` when the program calls
        one of the ops, else ``FixResult(program, False)``.

    Source: https://github.com/pytorch/executorch/issues/11330
    """
    del context
    called = called_targets(program, _DECOMPOSITIONS)
    if not called:
        return FixResult(program, False)
    table = {op: fn for op, fn in _DECOMPOSITIONS.items() if op in called}
    return FixResult(program.run_decompositions(table), True, sorted(str(op) for op in called))
