"""Errors of the sweep and the one helper that turns an exception into a record's error line."""

from __future__ import annotations

__all__ = ["SweepError", "first_line"]


class SweepError(RuntimeError):
    """The sweep cannot run as asked (an optional dependency is missing, a bad argument).

    The message is one line meant for the command line (``export-sweep: <message>``).
    """


def first_line(error: BaseException | str, limit: int = 300) -> str:
    """One line for a results record: ``"Type: first line of the message"``.

    Unlike :func:`export_core.exporter.first_line`, the exception itself is described (not the
    root of its ``__cause__`` chain): a :class:`~export_sweep.zoo.ZooBuildError` names the build
    stage and model type that its cause does not. A first line ending in ``:`` (validation
    errors) gets the next line too, which holds the actual reason.

    Args:
        error: an exception, or a message (its first line is taken, with no type name).
        limit: maximum length of the result, in characters.

    Returns:
        The line, at most ``limit`` characters.
    """
    text = error if isinstance(error, str) else str(error)
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    line = lines[0] if lines else ""
    if line.endswith(":") and len(lines) > 1:
        line = f"{line} {lines[1]}"
    if isinstance(error, BaseException):
        line = f"{type(error).__name__}: {line}" if line else type(error).__name__
    return line[:limit]
