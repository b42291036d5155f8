"""SIGINT and SIGTERM as one exception, and short sections that finish before it is raised.

The command-line tools install :func:`handle_signals` before anything heavy is imported, so an
interrupt at any moment (model load, capture, lowering, save) unwinds the export like Ctrl-C does:
``with`` blocks and ``finally`` clauses run (the staging directory is removed, patches are
restored, the output lock is released) and the command prints one line and exits ``128 + signal``
(130 for SIGINT, 143 for SIGTERM). :func:`deferred_signals` protects the few renames that swap a
finished export into its output directory: a signal arriving there is raised once they are done.

Python runs signal handlers in the main thread only, so both helpers act in the main thread and
are no-ops elsewhere (no signal is raised in other threads).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

__all__ = ["HANDLED_SIGNALS", "Interrupted", "deferred_signals", "handle_signals"]

HANDLED_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM)
"""The signals turned into :class:`Interrupted`."""


class Interrupted(KeyboardInterrupt):
    """The process received SIGINT or SIGTERM (a ``KeyboardInterrupt``, so code that handles
    Ctrl-C handles both).

    Attributes:
        signum: the signal number.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)

    @property
    def signal_name(self) -> str:
        """``"SIGINT"`` or ``"SIGTERM"``."""
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        """The shell convention for a process ended by a signal: ``128 + signum``."""
        return 128 + self.signum


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


_Handlers = dict[signal.Signals, Any]


def _install(handler: Callable[[int, FrameType | None], Any]) -> _Handlers:
    """Set ``handler`` for every handled signal; returns the handlers it replaced."""
    previous = {sig: signal.getsignal(sig) for sig in HANDLED_SIGNALS}
    for sig in HANDLED_SIGNALS:
        signal.signal(sig, handler)
    return previous


def _restore(previous: _Handlers) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


@contextmanager
def handle_signals() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise :class:`Interrupted` in the main thread; the
    previous handlers are restored afterwards. A no-op outside the main thread."""
    if not _in_main_thread():
        yield
        return
    previous = _install(_raise)
    try:
        yield
    finally:
        _restore(previous)


@contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends, then deliver the first one received to the
    handler that was installed before (so the block's steps all run, or none of them).

    A no-op outside the main thread (signals are only handled there).
    """
    if not _in_main_thread():
        yield
        return
    received: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous = _install(hold)
    try:
        yield
    finally:
        _restore(previous)
        if received:
            signal.raise_signal(received[0])
