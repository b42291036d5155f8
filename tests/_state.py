"""A snapshot of the process-global state an export may touch, to check that a failed export
leaves none of it changed: patched attributes, pytree registrations, global torch flags, logger
levels, warning filters and the transformers verbosity."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import torch
import torch.utils._pytree as pytree

__all__ = ["assert_unchanged", "global_state"]


def _patch_targets() -> dict[str, object]:
    from export_core import describe
    from export_core.registry import load_backends, resolve_target

    load_backends()
    out = {}
    for row in describe():
        if row.kind == "patch" and row.resolvable:
            t = resolve_target(row.target)
            out[row.target] = t.stored()
    return out


def global_state() -> dict[str, Any]:
    """Everything an export could leave changed, as comparable values.

    The product's pytree registrations are made once per process and kept on purpose (they are
    idempotent), so they are made before the snapshot: the check is that an export registers or
    removes nothing else.
    """
    from torch.fx.experimental import _config as fx_config
    from transformers.utils import logging as hf_logging

    from export_core.pytree import register_pytree_nodes

    register_pytree_nodes()
    loggers = {name: lg.level for name, lg in logging.root.manager.loggerDict.items()
               if isinstance(lg, logging.Logger)}
    return {
        "patch targets": _patch_targets(),
        "pytree nodes": set(pytree.SUPPORTED_NODES),
        "flags": (torch.is_grad_enabled(), torch.get_default_dtype(),
                  torch.are_deterministic_algorithms_enabled(), fx_config.backed_size_oblivious,
                  torch.get_num_threads()),
        "root logger": logging.getLogger().level,
        "loggers": loggers,
        "warning filters": list(warnings.filters),
        "transformers": (hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()),
    }


def assert_unchanged(before: dict[str, Any]) -> None:
    """The global state equals ``before`` (loggers created since are not compared)."""
    after = global_state()
    after["loggers"] = {k: v for k, v in after["loggers"].items() if k in before["loggers"]}
    for key in before:
        if key == "pytree nodes":
            from export_core.pytree import _REGISTERED

            # cache classes of model modules imported since are the product's own registrations
            removed, added = before[key] - after[key], after[key] - before[key] - _REGISTERED
            assert not removed and not added, f"pytree registrations changed: {removed or added}"
            continue
        assert after[key] == before[key], f"{key} changed"
