"""The shape shared by the XNNPACK partitioner patches: a config's ``check_constraints`` that
turns away the nodes XNNPACK would fail to serialize or run, and reports itself fired only then.

Not a workaround itself (registers nothing); :mod:`.xnnpack_reshape_dims`,
:mod:`.xnnpack_max_dim` and :mod:`.xnnpack_passthrough` build their replacements with it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from export_core.patching import MARKS_OWN_FIRING, PatchSession

__all__ = ["CONFIGS", "rejecting", "xnnpack_patch_name"]

CONFIGS = "executorch.backends.xnnpack.partition.config"
"""The package of XNNPACK's partitioner configs."""


def xnnpack_patch_name(config: str) -> str:
    """The registered name of the patch of ``<CONFIGS>.<config>.check_constraints`` (``config``
    as ``module.Class``, e.g. ``node_configs.BatchNormConfig``)."""
    return f"executorch.xnnpack:{CONFIGS}.{config}.check_constraints"


def rejecting(original: Any, reject: Callable[[torch.fx.Node], bool], session: PatchSession,
              name: str) -> Any:
    """``original`` (a partitioner config's ``check_constraints(self, node, ep) -> bool``)
    answering ``False`` for the nodes ``reject`` names; the patch ``name`` is marked fired in
    ``session`` only when it turns a node away that ``original`` would have taken."""

    @functools.wraps(original)
    def check_constraints(self: Any, node: torch.fx.Node, ep: Any) -> bool:
        if not original(self, node, ep):
            return False
        if reject(node):
            session.mark_fired(name)
            return False
        return True

    setattr(check_constraints, MARKS_OWN_FIRING, True)
    return check_constraints
