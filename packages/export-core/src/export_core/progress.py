"""Stage progress on stderr for the command-line tools (rich)."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from .stages import Stage

__all__ = ["RichStageListener"]


class RichStageListener:
    """Draws each stage on stderr: a spinner while it runs (on a terminal), then its time.

    Implements :class:`export_core.stages.StageListener`.
    """

    def __init__(self, console: Console | None = None, *, quiet: bool = False) -> None:
        self.console = console or Console(stderr=True, highlight=False)
        self.quiet = quiet
        self._status: Any = None

    def stage_started(self, stage: Stage) -> None:
        if self.quiet:
            return
        if self.console.is_terminal:
            self._status = self.console.status(f"{stage.position} {stage.name} …")
            self._status.start()

    def stage_finished(self, stage: Stage, seconds: float, ok: bool) -> None:
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
