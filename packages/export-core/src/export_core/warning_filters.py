"""Warnings a user of the exporters cannot act on, silenced for the duration of one export only.

Libraries the export drives (torch's pytree, torch.export, transformers) emit deprecation notes
addressed to their own maintainers and notices about optional packages an export never uses.
:func:`quiet_unactionable_warnings` hides exactly those, by category and message, while an export
runs, and restores the warning filters and the library loggers' levels afterwards: nothing is
filtered globally, and every other warning still reaches the user.
"""

from __future__ import annotations

import logging
import re
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["UNACTIONABLE_LOGS", "UNACTIONABLE_WARNINGS", "LogFilter", "WarningFilter",
           "quiet_unactionable_warnings"]


@dataclass(frozen=True)
class WarningFilter:
    """One ``warnings`` message an export hides.

    Attributes:
        category: the warning class.
        message: a regular expression searched in the message (``warnings`` matches it at the
            start, so each is installed with a leading ``.*``).
        reason: why the user cannot act on it.
    """

    category: type[Warning]
    message: str
    reason: str


@dataclass(frozen=True)
class LogFilter:
    """One logger message an export hides.

    Attributes:
        logger: the logger's name.
        message: a regular expression searched in the formatted message.
        reason: why the user cannot act on it.
    """

    logger: str
    message: str
    reason: str


UNACTIONABLE_WARNINGS: tuple[WarningFilter, ...] = (
    WarningFilter(FutureWarning, r"`?isinstance\(treespec, LeafSpec\)",
                  "torch.export's own use of a deprecated pytree API"),
    WarningFilter(FutureWarning, r"`torch\.export\.export_for_training` is deprecated",
                  "torch.onnx calls the deprecated entry point itself"),
    WarningFilter(UserWarning, r"torchvision is not installed",
                  "an optional image backend of transformers that the export never uses"),
)
"""The ``warnings`` an export hides, in the order the filters are installed."""

UNACTIONABLE_LOGS: tuple[LogFilter, ...] = (
    LogFilter("transformers", r"torchvision is not installed",
              "an optional image backend the export never uses"),
    LogFilter("torch.onnx._internal.exporter._registration", r"torchvision is not installed",
              "torch.onnx skips translations of torchvision ops a transformers model never uses"),
)
"""Logger messages an export hides (a ``logging.Filter`` on each logger for the export)."""


class _Drop(logging.Filter):
    def __init__(self, pattern: str) -> None:
        super().__init__()
        self.pattern = re.compile(pattern)

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            return not self.pattern.search(record.getMessage())
        except Exception:  # noqa: BLE001 - a broken record is not ours to drop
            return True


_GUARD = threading.Lock()
_DEPTH = 0
_SAVED: list[object] = []
_ADDED: list[tuple[logging.Logger, logging.Filter]] = []


@contextmanager
def quiet_unactionable_warnings() -> Iterator[None]:
    """Hide :data:`UNACTIONABLE_WARNINGS` and :data:`UNACTIONABLE_LOGS` within the block.

    Re-entrant and safe across threads: the first export to enter installs the filters, the last
    to leave restores ``warnings.filters`` as they were and removes the logger filters (a plain
    ``warnings.catch_warnings`` per thread would restore another thread's state).
    """
    global _DEPTH
    with _GUARD:
        if _DEPTH == 0:
            _SAVED[:] = [list(warnings.filters)]
            for f in reversed(UNACTIONABLE_WARNINGS):
                warnings.filterwarnings("ignore", message=f".*{f.message}", category=f.category)
            for f in UNACTIONABLE_LOGS:
                logger = logging.getLogger(f.logger)
                drop = _Drop(f.message)
                logger.addFilter(drop)
                _ADDED.append((logger, drop))
        _DEPTH += 1
    try:
        yield
    finally:
        with _GUARD:
            _DEPTH -= 1
            if _DEPTH == 0:
                warnings.filters[:] = _SAVED.pop()  # type: ignore[index]
                mutated = getattr(warnings, "_filters_mutated", None)
                if callable(mutated):  # reset the "already warned" caches, as catch_warnings does
                    mutated()
                for logger, drop in _ADDED:
                    logger.removeFilter(drop)
                _ADDED.clear()
