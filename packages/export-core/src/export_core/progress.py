"""Stage progress on stderr for the command-line tools (rich)."""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.console import Console

from .stages import Stage

__all__ = ["HEARTBEAT_SECONDS", "RichStageListener"]

HEARTBEAT_SECONDS = 15.0
"""When stderr is no terminal (a CI log), a stage still running after this many seconds prints
a line saying so, and again every as many seconds (ExecuTorch lowering takes 40-50 s on
all-MiniLM-L6-v2)."""


class RichStageListener:
    """Draws each stage on stderr: a spinner while it runs (on a terminal), then one line with
    its time.

    When stderr is no terminal (a CI log, a pipe), there is no spinner: a stage that runs longer
    than ``heartbeat`` seconds prints ``  … <position> <name> running, <n> s`` every
    ``heartbeat`` seconds, so a log shows what a long export is doing, and each stage ends with
    its one line as on a terminal.

    Implements :class:`export_core.stages.StageListener`.

    Args:
        console: where to draw (default: stderr).
        quiet: print only warnings (:meth:`warning`), no stage lines.
        heartbeat: seconds between the "still running" lines off a terminal.
    """

    def __init__(self, console: Console | None = None, *, quiet: bool = False,
                 heartbeat: float = HEARTBEAT_SECONDS) -> None:
        self.console = console or Console(stderr=True, highlight=False)
        self.quiet = quiet
        self.heartbeat = heartbeat
        self._status: Any = None
        self._beat: threading.Event | None = None

    def stage_started(self, stage: Stage) -> None:
        if self.quiet:
            return
        self._stop_heartbeat()
        if self.console.is_terminal:
            self._status = self.console.status(f"{stage.position} {stage.name} …")
            self._status.start()
        elif self.heartbeat > 0:
            done = threading.Event()
            self._beat = done
            threading.Thread(target=self._beats, args=(stage, done), daemon=True,
                             name=f"progress-{stage.name}").start()

    def _beats(self, stage: Stage, done: threading.Event) -> None:
        start = time.perf_counter()
        while not done.wait(self.heartbeat):
            self.console.print(f"  … {stage.position:<14} {stage.name:<18} running, "
                               f"{time.perf_counter() - start:.0f} s", soft_wrap=True,
                               markup=False, highlight=False)

    def _stop_heartbeat(self) -> None:
        if self._beat is not None:
            self._beat.set()
            self._beat = None

    def stage_finished(self, stage: Stage, seconds: float, ok: bool) -> None:
        self._stop_heartbeat()
        if self._status is not None:
            self._status.stop()
            self._status = None
        if self.quiet:
            return
        mark = "[green]✓[/]" if ok else "[red]✗[/]"
        self.console.print(
            f"  {mark} {stage.position:<14} {stage.name:<18} {seconds:7.2f} s", soft_wrap=True
        )

    def info(self, message: str) -> None:
        """Print a progress message (not with ``quiet``)."""
        if not self.quiet:
            self.console.print(message, soft_wrap=True)

    def warning(self, message: str) -> None:
        """Print a message the user should read, also with ``quiet`` (one line, no markup)."""
        self.console.print(message, soft_wrap=True, markup=False, highlight=False)
