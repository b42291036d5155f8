"""Timing and announcing an export's stages.

A :class:`StageRecorder` times each stage and tells an optional listener when one starts and ends.
Library code never prints: the CLI passes a listener that draws progress on stderr.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["StageListener", "StageTiming", "StageRecorder"]


class StageListener(Protocol):
    """Receives stage events (the CLI draws them on stderr)."""

    def stage_started(self, name: str) -> None: ...

    def stage_finished(self, name: str, seconds: float, ok: bool) -> None: ...


@dataclass(frozen=True)
class StageTiming:
    """One finished stage: its name and wall time in seconds."""

    name: str
    seconds: float


@dataclass
class StageRecorder:
    """Records stage timings in order; ``current`` is the stage running now (for error reports)."""

    listener: StageListener | None = None
    timings: list[StageTiming] = field(default_factory=list)
    current: str | None = None

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the ``with`` block as stage ``name``."""
        outer = self.current
        self.current = name
        if self.listener is not None:
            self.listener.stage_started(name)
        start = time.perf_counter()
        ok = False
        try:
            yield
            ok = True
        finally:
            seconds = time.perf_counter() - start
            self.timings.append(StageTiming(name, round(seconds, 4)))
            if self.listener is not None:
                self.listener.stage_finished(name, seconds, ok)
            if ok:
                self.current = outer

    def as_list(self) -> list[dict[str, float | str]]:
        return [{"name": t.name, "seconds": t.seconds} for t in self.timings]
