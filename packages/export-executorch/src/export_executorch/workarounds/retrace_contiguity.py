"""ExecuTorch patch (``torch_patches``): the edge lowering's re-trace records node metadata
without guards, as the capture does.

``to_edge_transform_and_lower`` re-traces the captured program (its decompositions), and the
re-trace records every node's ``tensor_meta`` with the same guarding contiguity check the capture
patch :mod:`export_core.workarounds.tensor_metadata_contiguity` replaces. There the guard does not
fail: it silently narrows the size to the example's in the new shape environment, and memory
planning sizes the tensors for it (``Attempted to resize a bounded tensor with a maximum capacity
of 2 elements to 3 elements`` at run time, for an image count the capture left dynamic). The same
replacement is installed for the lowering.

Source: https://github.com/pytorch/pytorch/issues/165032
"""

from __future__ import annotations

from typing import Any

from export_core.patching import PatchSession
from export_core.registry import register_patch
from export_core.workarounds.tensor_metadata_contiguity import (
    METADATA_CONTIGUITY_TARGET,
    guard_free_contiguity,
)

from ..stages import BACKEND

__all__ = ["retrace_metadata_without_guards"]


@register_patch(
    BACKEND,
    METADATA_CONTIGUITY_TARGET,
    stage="torch_patches",
    reason=(
        "the edge lowering re-traces the program and records each node's memory format with "
        "a check that guards a backed size at its example value: the size is narrowed to the "
        "example's and memory planning bounds the tensors there (execute fails with "
        "'Attempted to resize a bounded tensor' at other sizes)"
    ),
    upstream="https://github.com/pytorch/pytorch/issues/165032",
    versions=("torch", ">=2.8,<2.14"),
)
def retrace_metadata_without_guards(original: Any, session: PatchSession) -> Any:
    """The capture's replacement (:func:`~export_core.workarounds.tensor_metadata_contiguity.
    guard_free_contiguity`) for the lowering: memory formats from statically known facts only.

    Source: https://github.com/pytorch/pytorch/issues/165032
    """
    del original
    return guard_free_contiguity(session, f"{BACKEND}:{METADATA_CONTIGUITY_TARGET}")
