"""ExecuTorch patch (``executorch_patches``): dim orders of tensors with data-dependent strides
decided without a guard.

``to_executorch`` gives every node a ``TensorSpec`` whose strides are the contiguous strides of
its shape, and derives the dim order from them (``dim_order_from_stride``: sort the axes by
stride, largest first). With a data-dependent size the strides hold an unbacked symbol:
``(64*u24, 64, 1)`` for a ``(n, u24, 64)`` tensor (the tokens a mask kept: V-JEPA 2, Idefics2/3,
SmolVLM, ModernVBERT). The comparator decides what it can (``guard_or_false``, divisibility) and
then guards: ``64*u24 < 64`` holds only for ``u24 = 0``, an empty tensor, which has no layout to
get wrong, yet the guard fails the whole lowering (``GuardOnDataDependentSymNode``).

The patch runs the original and, only where it raised that error, sorts with the same
decidable comparisons and treats an undecidable one as "not smaller": Python's stable sort then
keeps the axes in their given order, which for the contiguous strides a ``TensorSpec`` derives
from its shape is the contiguous dim order, and any size >= 1 agrees with it.

Upstream: ExecuTorch reworked this comparator without ``guard_size_oblivious``
(https://github.com/pytorch/executorch/pull/19516); 1.5.1 still guards the undecidable case.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from export_core.patching import MARKS_OWN_FIRING, PatchSession
from export_core.registry import register_patch

from ..stages import BACKEND

__all__ = ["DIM_ORDER_TARGETS", "guard_free_dim_order"]

DIM_ORDER_TARGETS = (
    "executorch.exir.tensor.dim_order_from_stride",
    "executorch.exir.emit._emitter.dim_order_from_stride",
    "executorch.exir.tensor_layout.dim_order_from_stride",
    "executorch.exir.passes.replace_view_copy_with_view_pass.dim_order_from_stride",
    "executorch.backends.native.serialization.graph_serialize.dim_order_from_stride",
)
"""The function and the modules that import it by name (executorch 1.5.1)."""


def _smaller(a: Any, b: Any) -> bool:
    from torch.fx.experimental.symbolic_shapes import guard_or_false, guard_or_true

    if guard_or_false(a < b):
        return True
    # a divides b and differs from it: a < b for positive strides (u0 < 2*u0, 1 < u0)
    return guard_or_false(b % a == 0) and guard_or_true(a != b)


def guard_free_dim_order(stride: Sequence[Any]) -> tuple[int, ...]:
    """The axes of ``stride`` from the largest stride to the smallest, without guards.

    Args:
        stride: one stride per axis (``int`` or ``SymInt``; no zero stride).

    Returns:
        The dim order, e.g. ``(0, 1, 2)`` for ``(64*u24, 64, 1)``. Two strides whose order the
        symbolic facts cannot decide keep their given order.
    """
    axes = list(range(len(stride)))
    # insertion sort, stable, descending by stride: an axis moves left past smaller strides only
    for i in range(1, len(axes)):
        j = i
        while j > 0 and _smaller(stride[axes[j - 1]], stride[axes[j]]):
            axes[j - 1], axes[j] = axes[j], axes[j - 1]
            j -= 1
    return tuple(axes)


def _register(target: str) -> None:
    name = f"{BACKEND}:{target}"

    @register_patch(
        BACKEND,
        target,
        stage="executorch_patches",
        reason=(
            "to_executorch derives each tensor's dim order by sorting its contiguous strides and "
            "guards when a data-dependent stride's order is undecidable (64*u0 < 64 holds only "
            "for an empty tensor): the lowering fails with GuardOnDataDependentSymNode; "
            "undecidable comparisons keep the contiguous order"
        ),
        upstream="https://github.com/pytorch/executorch/pull/19516",
        versions=("executorch", ">=1.0,<1.6"),
    )
    def dim_order_without_guards(original: Any, session: PatchSession) -> Any:
        """``dim_order_from_stride`` that falls back to :func:`guard_free_dim_order` where the
        original raises ``GuardOnDataDependentSymNode`` (marked fired then).

        Source: https://github.com/pytorch/executorch/pull/19516
        """
        from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

        def dim_order_from_stride(stride: Sequence[Any]) -> Any:
            try:
                return original(stride)
            except GuardOnDataDependentSymNode:
                session.mark_fired(name)
                return guard_free_dim_order(stride)

        setattr(dim_order_from_stride, MARKS_OWN_FIRING, True)
        return dim_order_from_stride


for _target in DIM_ORDER_TARGETS:
    _register(_target)
