"""ExecuTorch patch: a ``view_copy`` its base's planned storage cannot take stays a copy.

``to_executorch`` runs ``ReplaceViewCopyWithViewPass``, which turns each ``view_copy`` into a
memory view of its base and builds a ``_ViewSpec`` sharing the base's storage. Two kinds of
valid views break that:

- Shape dynamism differs from the base's. The spec refuses to exist: ``Exception: _ViewSpec is
  incompatible with its base on creation. It has shape_dynamism=1, but its base has
  shape_dynamism=0``: a static tensor (a position-embedding table) reshaped with sizes written
  in terms of the input's symbols that are constant in fact (PVT, ViTDet), or the reverse
  (executorch#20008, an LSTM's output).
- The view's upper-bound size exceeds its base's. The pass checks the sizes while they are
  symbolic (equal); the shape pass after it bounds each size on its own, and the product of the
  bounds of a split (``n`` chunks of ``L // n``) exceeds the bound of the product. The view's
  planned tensor then overruns its base's storage, and where that is the arena's end the
  program does not load (``MemoryAllocationFailed``, 0x21; Mamba-2's chunked scan).

The pass decides what to replace with its module-level ``_is_view_copy(node)``; the patch
answers ``False`` for such a node, so it stays a ``view_copy`` (a copy kernel: the same values,
one more buffer planned at its own bound) and the pass's own checks agree. Every other view is
replaced as before.

Source: https://github.com/pytorch/executorch/issues/20008 (dynamism); the pass's own note
"We do not guard nbytes because dynamic symints are replaced by upper bounds" (sizes).
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


def _upper_numel(shape: Any) -> int | None:
    """The element count of ``shape`` with each size at the upper bound ExecuTorch plans it for
    (``sym_util.eval_upper_bound``, looked up at call time so the bound patches apply);
    ``None`` when a size has no concrete bound."""
    from executorch.exir import sym_util

    n = 1
    for size in shape:
        try:
            bound = sym_util.eval_upper_bound(size)
        except Exception:  # noqa: BLE001 - no bound: the shape pass raises its own error later
            return None
        if not isinstance(bound, int):
            return None
        n *= bound
    return n


def _view_and_base_spec(node: torch.fx.Node) -> tuple[torch.Tensor, Any] | None:
    """``node``'s value and its base's planned spec, or ``None`` when either is missing."""
    base = node.args[0] if node.args else None
    spec = base.meta.get("spec") if isinstance(base, torch.fx.Node) else None
    val = node.meta.get("val")
    if spec is None or not isinstance(val, torch.Tensor):
        return None
    return val, spec


def _outgrows_base(node: torch.fx.Node) -> bool:
    """Whether ``node``'s upper-bound size exceeds its base's, each size bounded on its own."""
    pair = _view_and_base_spec(node)
    if pair is None:
        return False
    mine, theirs = _upper_numel(pair[0].shape), _upper_numel(pair[1].shape)
    return mine is not None and theirs is not None and mine > theirs


def _dynamism_differs(node: torch.fx.Node) -> bool:
    """Whether ``node``'s output dynamism differs from its base's planned spec."""
    from executorch.exir.tensor import determine_tensor_dynanism

    pair = _view_and_base_spec(node)
    if pair is None:
        return False
    return determine_tensor_dynanism(torch.Size(pair[0].shape)) != pair[1].shape_dynamism


@register_patch(
    "executorch",
    TARGET,
    stage="executorch_patches",
    reason="to_executorch turns each view_copy into a view of its base and raises when the "
    "view's shape dynamism differs from the base's (_ViewSpec is incompatible with its base on "
    "creation: a static table reshaped with symbolic sizes that are constant), or plans a view "
    "whose sizes, bounded one by one, exceed its base's (a split into n chunks of L // n: the "
    "program overruns the arena, 0x21 at load); such a view stays a copy",
    upstream=_UPSTREAM,
)
def views_of_matching_dynamism(original: Any, session: PatchSession) -> Any:
    """Wrap ``_is_view_copy(node) -> bool`` so it is ``False`` for a ``view_copy`` whose shape
    dynamism (static, bounded, unbounded) differs from its base's spec, or whose upper-bound
    element count exceeds its base's; fired only then.

    Source: https://github.com/pytorch/executorch/issues/20008
    """

    @functools.wraps(original)
    def _is_view_copy(node: torch.fx.Node) -> bool:
        if not original(node):
            return False
        if _dynamism_differs(node) or _outgrows_base(node):
            session.mark_fired(f"executorch:{TARGET}")
            return False
        return True

    setattr(_is_view_copy, MARKS_OWN_FIRING, True)
    return _is_view_copy
