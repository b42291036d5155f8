"""FX program fix: decompose the ops ExecuTorch cannot run into ops it has kernels for.

- ``aten.scatter_reduce.two`` is Core ATen, so lowering accepts it, but the portable library has
  no ``scatter_reduce.two_out`` kernel: the program fails to load (``OperatorMissing``, 0x14;
  executorch#11330). ``sum`` and ``mean`` become ``scatter_add`` (``scatter`` first when
  ``include_self=False``), ``amax`` / ``amin`` / ``prod`` a masked reduction over a one-hot of
  the destinations (memory: ``self.shape[dim] * index.numel()`` elements).
- ``aten.bucketize.Tensor`` is not Core ATen (``SpecViolationError`` at lowering) and has no
  kernel either (executorch#20270): it becomes a comparison against the boundaries and a sum.
- ``aten.repeat_interleave.Tensor`` / ``.self_Tensor`` (repeats given as a tensor: Qwen-VL-style
  vision towers expand per-image sizes to per-patch ones) are not Core ATen (``SpecViolationError``
  at lowering), though the portable library has a kernel (executorch#7264): they become a
  :func:`bucketize` of the output positions into the running total of the repeats (and an
  ``index_select``); the output length stays a data-dependent size.
- ``aten.sort.default`` / ``aten.argsort.default`` (V-JEPA 2's predictor orders its masked
  tokens) have no portable kernel (the program fails to load: ``Missing operator:
  aten::sort.values``): they become a ``topk`` of the whole axis. ``sort.stable`` (equal
  elements in index order) is left alone.
- ``aten.conv3d`` (video patch embeddings: ViViT, TimeSformer-style tubelets, VideoPrism): the
  portable ``convolution.out`` takes 3-d and 4-d inputs only ("Expect input tensor to be 3-D or
  4-D, but got, 5"; executorch#11704, its fix was reverted) and XNNPACK delegates 2-d
  convolutions only. It becomes one 2-d convolution per temporal kernel tap, summed.

The fix runs ``ExportedProgram.run_decompositions`` with these functions only, and only when the
program calls one of the ops; every other node is left as it was.

Source: https://github.com/pytorch/executorch/issues/11330
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from export_core.fixes import FixContext, FixResult, decompose_called
from export_core.registry import register_fx_program_fix

from ..stages import BACKEND

__all__ = [
    "bucketize", "conv3d", "decompose_missing_kernels", "repeat_interleave",
    "argsort", "rand_like", "randn_like", "repeat_interleave_self", "scatter_reduce", "sort",
]

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


def repeat_interleave(repeats: torch.Tensor, *, output_size: int | None = None) -> torch.Tensor:
    """``aten.repeat_interleave.Tensor`` (``torch.repeat_interleave(repeats)``, the index form)
    as a :func:`bucketize` of the output positions into the running total of ``repeats``.

    Args:
        repeats: ``(n,)`` int32 or int64, non-negative.
        output_size: ``repeats.sum()`` when known; otherwise read from the data (an unbacked
            size, as the op itself has).

    Returns:
        ``(output_size,)`` in ``repeats``' dtype: ``i`` repeated ``repeats[i]`` times, in order.
        Memory: ``output_size * n`` booleans.

    Source: https://github.com/pytorch/executorch/pull/7264 (the portable kernel exists; the op
        is not Core ATen, so the edge dialect verifier rejects it)
    """
    if output_size is None:
        output_size = repeats.sum().item()
        torch._check(output_size >= 0)
    positions = torch.arange(output_size, device=repeats.device, dtype=repeats.dtype)
    return bucketize(positions, repeats.cumsum(0), out_int32=repeats.dtype == torch.int32,
                     right=True)


def repeat_interleave_self(
    self: torch.Tensor, repeats: torch.Tensor, dim: int | None = None, *,
    output_size: int | None = None,
) -> torch.Tensor:
    """``aten.repeat_interleave.self_Tensor`` (``x.repeat_interleave(repeats_tensor, dim)``):
    an ``index_select`` with the indices of :func:`repeat_interleave`.

    Args:
        self: any shape ``(..., n, ...)`` with ``n`` at ``dim``; flattened when ``dim`` is None.
        repeats: ``(n,)``, or one element applied to every slice; int32 or int64.
        dim: the repeated axis (None: the flattened input).
        output_size: ``repeats.sum()`` (``n * repeats`` for one element) when known.

    Returns:
        ``self`` with slice ``i`` along ``dim`` repeated ``repeats[i]`` times.

    Source: https://github.com/pytorch/executorch/pull/7264
    """
    from torch.fx.experimental.symbolic_shapes import guard_or_false

    if dim is None:
        self, dim = self.flatten(), 0
    dim = dim % max(self.dim(), 1)
    if repeats.dim() == 0 or guard_or_false(repeats.shape[0] == 1):
        repeats = repeats.reshape(1).expand(self.shape[dim])
    return self.index_select(dim, repeat_interleave(repeats, output_size=output_size))


def _triple(value: int | Sequence[int]) -> tuple[int, int, int]:
    if isinstance(value, int):
        return (value, value, value)
    values = tuple(value)
    return values * 3 if len(values) == 1 else values  # type: ignore[return-value]


def conv3d(
    input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None,
    stride: int | Sequence[int] = 1, padding: int | Sequence[int] | str = 0,
    dilation: int | Sequence[int] = 1, groups: int = 1,
) -> torch.Tensor:
    """``aten.conv3d`` (both overloads: padding as sizes or ``"valid"`` / ``"same"``) as a sum
    of 2-d convolutions, one per temporal tap of the kernel.

    Output frame ``t`` is ``sum_k conv2d(x[:, :, t * stride_t + k * dilation_t], weight[:, :, k])``;
    the frames of each tap are gathered with one strided slice and run as a batch of
    ``batch * frames_out`` images.

    Args:
        input: ``(batch, in_channels, frames, height, width)`` or unbatched
            ``(in_channels, frames, height, width)``, floating point.
        weight: ``(out_channels, in_channels / groups, kt, kh, kw)``.
        bias: ``(out_channels,)`` or None.
        stride, padding, dilation: an int or three, ``(time, height, width)``; ``padding``
            may be ``"valid"`` or ``"same"`` (zeros split as ``torch`` splits them).
        groups: the channel groups.

    Returns:
        ``(batch, out_channels, frames_out, height_out, width_out)`` (unbatched: no batch),
        equal to ``torch.nn.functional.conv3d`` up to float summation order.

    Source: https://github.com/pytorch/executorch/issues/11704
    """
    stride, dilation = _triple(stride), _triple(dilation)
    kernel = tuple(weight.shape[2:])
    unbatched = input.dim() == 4
    x = input.unsqueeze(0) if unbatched else input
    if isinstance(padding, str):
        if padding == "valid":
            padding = (0, 0, 0)
        elif padding == "same":
            pad: list[int] = []
            for k, d in reversed(list(zip(kernel, dilation, strict=True))):
                total = d * (k - 1)
                pad += [total // 2, total - total // 2]
            x = torch.nn.functional.pad(x, pad)
            padding = (0, 0, 0)
        else:
            raise ValueError(f"conv3d: unknown padding {padding!r}")
    padding = _triple(padding)
    if padding[0]:
        x = torch.nn.functional.pad(x, (0, 0, 0, 0, padding[0], padding[0]))
    batch, channels, frames, height, width = x.shape
    frames_out = (frames - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    per_tap = []
    for k in range(kernel[0]):
        start = k * dilation[0]
        taps = x[:, :, start:start + stride[0] * (frames_out - 1) + 1:stride[0]]
        images = taps.transpose(1, 2).reshape(batch * frames_out, channels, height, width)
        per_tap.append(torch.nn.functional.conv2d(images, weight[:, :, k], None, stride[1:],
                                                  padding[1:], dilation[1:], groups))
    out = per_tap[0]
    for y in per_tap[1:]:
        out = out + y
    out = out.reshape(batch, frames_out, *out.shape[1:]).transpose(1, 2)
    if bias is not None:
        out = out + bias.view(1, -1, 1, 1, 1)
    return out.squeeze(0) if unbatched else out


def sort(self: torch.Tensor, dim: int = -1, descending: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``aten.sort.default`` as a ``topk`` of the whole axis (the portable library has a
    ``topk.values`` kernel and no ``sort.values``).

    Args:
        self: any shape and dtype ``topk`` takes; ``dim`` the axis to sort (its size may be
            symbolic).
        descending: largest first.

    Returns:
        ``(values, indices)``, the shape of ``self``; ``indices`` int64. Equal elements may come
        in another order than eager's (``sort.default`` promises no order for them).

    Source: https://github.com/pytorch/executorch/issues/11330
    """
    if self.dim() == 0:
        return self.clone(), torch.zeros_like(self, dtype=torch.int64)
    return torch.topk(self, self.size(dim), dim, largest=descending, sorted=True)


def argsort(self: torch.Tensor, dim: int = -1, descending: bool = False) -> torch.Tensor:
    """``aten.argsort.default`` as the indices of :func:`sort`: int64, the shape of ``self``.

    Source: https://github.com/pytorch/executorch/issues/11330
    """
    return sort(self, dim, descending)[1]


def randn_like(self: torch.Tensor, *, dtype: torch.dtype | None = None, layout: Any = None,
               device: Any = None, pin_memory: bool | None = None,
               memory_format: Any = None) -> torch.Tensor:
    """``aten.randn_like.default`` as ``randn`` of ``self``'s shape: standard normal samples in
    ``dtype`` (default ``self.dtype``), contiguous.

    Source: https://github.com/pytorch/executorch/issues/11330 (ops without a kernel or outside
        Core ATen, decomposed)
    """
    del layout, pin_memory, memory_format
    return torch.randn(self.shape, dtype=dtype or self.dtype, device=device or self.device)


def rand_like(self: torch.Tensor, *, dtype: torch.dtype | None = None, layout: Any = None,
              device: Any = None, pin_memory: bool | None = None,
              memory_format: Any = None) -> torch.Tensor:
    """``aten.rand_like.default`` as ``rand`` of ``self``'s shape: uniform samples in ``[0, 1)``
    in ``dtype`` (default ``self.dtype``), contiguous.

    Source: https://github.com/pytorch/executorch/issues/11330
    """
    del layout, pin_memory, memory_format
    return torch.rand(self.shape, dtype=dtype or self.dtype, device=device or self.device)


_DECOMPOSITIONS = {
    _aten.scatter_reduce.two: scatter_reduce,
    _aten.bucketize.Tensor: bucketize,
    _aten.repeat_interleave.Tensor: repeat_interleave,
    _aten.repeat_interleave.self_Tensor: repeat_interleave_self,
    _aten.conv3d.default: conv3d,
    _aten.conv3d.padding: conv3d,
    _aten.sort.default: sort,
    _aten.argsort.default: argsort,
    _aten.randn_like.default: randn_like,
    _aten.rand_like.default: rand_like,
}
"""Op overload -> its decomposition into ops ExecuTorch runs."""


@register_fx_program_fix(
    BACKEND,
    reason="ExecuTorch has no kernel for scatter_reduce.two (the program fails to load), "
    "bucketize.Tensor or repeat_interleave with tensor repeats (not Core ATen: lowering fails) "
    "or conv3d (the portable convolution takes 3-d and 4-d inputs only: the program fails at "
    "run time), or sort (no kernel: the program fails to load), randn_like / rand_like (not "
    "Core ATen); each decomposes into ops it runs",
    upstream="https://github.com/pytorch/executorch/issues/11330",
)
def decompose_missing_kernels(program: torch.export.ExportedProgram, context: FixContext) -> FixResult:
    """Decompose the program's ``scatter_reduce.two``, ``bucketize.Tensor``,
    ``repeat_interleave.Tensor`` / ``.self_Tensor``, ``conv3d``, ``sort.default``,
    ``argsort.default``, ``randn_like.default`` and ``rand_like.default`` calls.

    Args:
        program: the captured ``ExportedProgram``.
        context: the export's context (unused).

    Returns:
        ``FixResult(new program, modified=True, details=[op names])`` when the program calls
        one of the ops, else ``FixResult(program, False)``.

    Source: https://github.com/pytorch/executorch/issues/11330
    """
    del context
    return decompose_called(program, _DECOMPOSITIONS)
