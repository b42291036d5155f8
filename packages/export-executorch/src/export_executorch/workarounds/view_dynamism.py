"""ExecuTorch patch: a ``view_copy`` whose shape dynamism differs from its base's stays a copy.

``to_executorch`` runs ``ReplaceViewCopyWithViewPass``, which turns each ``view_copy`` into a
memory view of its base and builds a ``_ViewSpec`` sharing the base's storage. The spec derives
its shape dynamism from the view's own sizes and refuses to exist when that differs from the
base's: ``Exception: _ViewSpec is incompatible with its base on creation. It has
shape_dynamism=1, but its base has shape_dynamism=0``. That happens on valid programs: a static
tensor (a position-embedding table) reshaped with sizes written in terms of the input's symbols
that are constant in fact (PVT, ViTDet), or the reverse (executorch#20008, an LSTM's output).

The pass decides what to replace with its module-level ``_is_view_copy(node)``; the patch
answers ``False`` for such a node, so it stays a ``view_copy`` (a copy kernel: the same values,
one more buffer) and the pass's own checks agree. Every other view is replaced as before.

Source: https://github.com/pytorch/executorch/issues/20008
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from export_core.patching import MARKS_OWN_FIRING, PatchSession
from export_core.registry import register_patch

__all__ = ["TARGET", "views_of_matching_dynamism"]

TARGET = "executorch.exir.passes.replace_view_copy_with_view_pass._is_view_copy"
_UPSTREAM = "https://github.com/pytorch/executorch/issues/20008"


def _dynamism_differs(node: torch.fx.Node) -> bool:
    """Whether ``node``'s output dynamism differs from its base's planned spec."""
    from executorch.exir.tensor import determine_tensor_dynanism

    base = node.args[0] if node.args else None
    spec = base.meta.get("spec") if isinstance(base, torch.fx.Node) else None
    val = node.meta.get("val")
    if spec is None or not isinstance(val, torch.Tensor):
        return False
    return determine_tensor_dynanism(torch.Size(val.shape)) != spec.shape_dynamism


@register_patch(
    "executorch",
    TARGET,
    stage="executorch_patches",
    reason="to_executorch turns each view_copy into a view of its base and raises when the "
    "view's shape dynamism differs from the base's (_ViewSpec is incompatible with its base on "
    "creation: a static table reshaped with symbolic sizes that are constant); such a view "
    "stays a copy",
    upstream=_UPSTREAM,
)
def views_of_matching_dynamism(original: Any, session: PatchSession) -> Any:
    """Wrap ``_is_view_copy(node) -> bool`` so it is ``False`` for a ``view_copy`` whose shape
    dynamism (static, bounded, unbounded) differs from its base's spec; fired only then.

    Source: https://github.com/pytorch/executorch/issues/20008
    """

    @functools.wraps(original)
    def _is_view_copy(node: torch.fx.Node) -> bool:
        if not original(node):
            return False
        if _dynamism_differs(node):
            session.mark_fired(f"executorch:{TARGET}")
            return False
        return True

    setattr(_is_view_copy, MARKS_OWN_FIRING, True)
    return _is_view_copy
