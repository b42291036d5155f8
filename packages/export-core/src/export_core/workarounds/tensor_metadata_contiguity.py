"""The memory format recorded in each traced node's ``tensor_meta``, decided without guards.

While tracing, ``torch.export`` records a ``TensorMetadata`` for every intermediate tensor
(``torch.fx.passes.shape_prop._extract_tensor_metadata``), including the memory format the tensor
is contiguous in. The check it uses, ``is_contiguous_for_memory_format_or_false``, is meant to
answer ``False`` when undecidable, but with a *backed* symbol it evaluates at the example size and
records a guard: ``numel() < 2`` and ``size == 1`` are asked of every tensor. A tensor of
``s0 - 1`` elements (``counts.cumsum(0)[:-1]`` over ``s0`` images) at an example of two images
asks ``s0 - 1 < 2``, which holds, and ``s0`` is pinned to 2: the artifact rejects any other
number of images (ONNX Runtime: ``Got invalid dimensions for input: grid_thw``) though nothing
in the model needs that size. Metadata is no reason to specialise a shape.

The replacement answers from what is statically known only (``statically_known_true``): a
tensor counts as contiguous in a format when its strides are provably that format's strides
for every size the symbols may take, and the trace gains no guard. An undecided layout is
recorded as no memory format, the answer the check already gives for unbacked sizes.
"""

from __future__ import annotations

from typing import Any

import torch

from ..patching import MARKS_OWN_FIRING, PatchSession
from ..registry import register_patch

__all__ = [
    "METADATA_CONTIGUITY_TARGET", "guard_free_contiguity", "known_contiguous",
    "metadata_contiguity_without_guards",
]

METADATA_CONTIGUITY_TARGET = "torch.fx.passes.shape_prop.is_contiguous_for_memory_format_or_false"
"""The patched attribute; a backend that re-traces the program (ExecuTorch's edge lowering)
registers the same replacement for its own stage, so the re-trace does not pin the sizes the
capture left dynamic."""

_UPSTREAM = "https://github.com/pytorch/pytorch/issues/165032"
"""The same guard from the same metadata query (its ``size == 1`` half, on a strided slice);
pytorch/pytorch#185084 fixes that half. The ``numel() < 2`` half is unfixed in torch 2.13."""

_DIM_ORDER: dict[torch.memory_format, tuple[int, ...]] = {
    torch.channels_last: (1, 3, 2, 0),
    torch.channels_last_3d: (1, 4, 3, 2, 0),
}
"""Axes from the innermost (stride 1) outwards, per channels-last format."""


def _innermost_first(tensor: torch.Tensor, memory_format: torch.memory_format) -> tuple[int, ...] | None:
    if memory_format == torch.contiguous_format:
        return tuple(reversed(range(tensor.dim())))
    order = _DIM_ORDER.get(memory_format)
    return order if order is not None and len(order) == tensor.dim() else None


def known_contiguous(tensor: torch.Tensor, memory_format: torch.memory_format) -> tuple[bool, bool]:
    """Whether ``tensor`` is provably contiguous in ``memory_format``, without guards.

    Args:
        tensor: a (fake) tensor of any rank, sizes and strides plain ints or ``SymInt``\\ s.
        memory_format: ``torch.contiguous_format``, ``torch.channels_last`` (rank 4) or
            ``torch.channels_last_3d`` (rank 5); any other format or rank answers ``False``.

    Returns:
        ``(contiguous, undecided)``: ``contiguous`` holds for every size the symbols may take;
        ``undecided`` is ``True`` when a symbolic comparison could not be settled statically
        (where the stock check would have guarded on the example size).
    """
    from torch.fx.experimental.symbolic_shapes import (
        statically_known_false,
        statically_known_true,
    )

    undecided = False

    def known(condition: Any) -> bool:
        nonlocal undecided
        if statically_known_true(condition):
            return True
        if not statically_known_false(condition):
            undecided = True
        return False

    order = _innermost_first(tensor, memory_format)
    if order is None:
        return False, False
    if known(tensor.numel() < 2):
        return True, undecided
    expected: Any = 1
    sizes, strides = tensor.shape, tensor.stride()
    for axis in order:
        if known(sizes[axis] == 1):
            continue
        if not known(strides[axis] == expected):
            return False, undecided
        expected = expected * sizes[axis]
    return True, undecided


def guard_free_contiguity(session: PatchSession, name: str) -> Any:
    """The replacement of ``is_contiguous_for_memory_format_or_false(a, *, memory_format) ->
    bool`` that answers with :func:`known_contiguous`, marking the patch ``name`` fired in
    ``session`` when a comparison was undecided (where the stock check would have guarded)."""

    def is_contiguous_for_memory_format_or_false(
        a: torch.Tensor, *, memory_format: torch.memory_format
    ) -> bool:
        contiguous, undecided = known_contiguous(a, memory_format)
        if undecided:
            session.mark_fired(name)
        return contiguous

    setattr(is_contiguous_for_memory_format_or_false, MARKS_OWN_FIRING, True)
    return is_contiguous_for_memory_format_or_false


@register_patch(
    "dynamo",
    METADATA_CONTIGUITY_TARGET,
    reason=(
        "the memory format torch.export records in every node's tensor_meta is checked with "
        "guard_or_false, which guards a backed size at its example value (numel() < 2, "
        "size == 1): a tensor of s0 - 1 elements at s0 = 2 pins s0 (grid_thw's image count in "
        "Qwen-VL-style vision towers); the format is decided from statically known facts only"
    ),
    upstream=_UPSTREAM,
    versions=("torch", ">=2.8,<2.14"),
)
def metadata_contiguity_without_guards(original: Any, session: PatchSession) -> Any:
    """Replace ``is_contiguous_for_memory_format_or_false(a, *, memory_format) -> bool`` as
    ``shape_prop`` calls it with :func:`known_contiguous`; marked fired when a comparison was
    undecided (the stock check would have added a guard there).

    Source: pytorch/pytorch#165032 (the same query guarding a strided slice's size).
    """
    del original
    return guard_free_contiguity(session, f"dynamo:{METADATA_CONTIGUITY_TARGET}")
