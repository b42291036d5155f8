"""Size budgets: refuse an export whose artifact would exceed what the caller allows, before the
expensive stage runs.

An artifact holds the model's weights (an ONNX file its initializers, a ``.pte`` its constant
segment), so the bytes of the traced module's parameters and buffers are a lower bound of its
size that is known right after the capture, before translation or lowering; a backend can check
further numbers it learns later (the ExecuTorch planned arena) with :func:`check_budget`.
"""

from __future__ import annotations

import torch

from .errors import BudgetError

__all__ = ["check_budget", "format_bytes", "weight_bytes"]


def format_bytes(n: int) -> str:
    """``1536`` -> ``"1.5 KiB"`` (``B``, ``KiB``, ``MiB``, ``GiB``)."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"  # pragma: no cover


def weight_bytes(module: torch.nn.Module) -> int:
    """Bytes of ``module``'s parameters and buffers, each tensor counted once (tied weights
    share storage).

    Args:
        module: any ``torch.nn.Module``.

    Returns:
        ``sum(numel * element_size)`` over the distinct tensors, in bytes.
    """
    seen: set[int] = set()
    total = 0
    for t in [*module.parameters(), *module.buffers()]:
        key = t.untyped_storage().data_ptr() if t.device.type != "meta" else id(t)
        if key in seen and key != 0:
            continue
        seen.add(key)
        total += t.numel() * t.element_size()
    return total


def check_budget(what: str, size: int, limit: int | None, option: str, stage: str) -> None:
    """Refuse ``size`` bytes of ``what`` above ``limit``.

    Args:
        what: what was measured (``"the model's weights"``), for the message.
        size: its size in bytes.
        limit: the budget in bytes (``None``: no budget).
        option: the option that sets the budget, named in the message with its command-line
            flag (``"max_artifact_bytes"``: ``--max-artifact-mb``).
        stage: the stage that refuses (the one that would have spent the time).

    Raises:
        BudgetError: ``size > limit``; the message has both numbers and the option.
    """
    if limit is None or size <= limit:
        return
    raise BudgetError(
        f"{what}: {format_bytes(size)} ({size} bytes), above the budget {option}="
        f"{limit} ({format_bytes(limit)}); raise it (--{option.removesuffix('_bytes').replace('_', '-')}-mb "
        f"on the command line) or export a smaller model",
        stage=stage,
    )
