"""The output directory of an export: one export at a time, written whole or not at all.

The contract (README "Output directory"):

- **Lock.** An export holds ``OUT/.export.lock`` (``fcntl.flock``, holder pid inside) from the
  directory check to the last write. A second export into the same directory, from another
  process or another thread, fails at once with one line naming the holder's pid (stage
  ``output``); it does not wait. The kernel releases the lock when its holder dies, so a lock
  file left by a dead process is taken over. The lock file is removed when the export ends.
- **Staging.** Every artifact file is written into a fresh ``OUT/.staging-<pid>-<random>/``
  directory, loaded and validated from there, and moved into ``OUT`` only when the export
  succeeded, followed by ``export_report.json``; files of the earlier export that the new one
  does not write are then removed. A signal arriving during these renames is delivered after
  them. The staging directory is always removed (also on failure and on SIGINT / SIGTERM);
  leftovers of a process killed with SIGKILL are removed by the next export that takes the lock.
- **Failure.** A failed export never touches an earlier successful export's files. When
  ``OUT/export_report.json`` records a successful export, it and its artifact are kept and the
  failure is written to ``OUT/export_report.failed.json`` (removed again by the next successful
  export). Otherwise the failure is written to ``export_report.json`` and artifact files of this
  backend are removed from ``OUT`` (no report vouches for them). So ``export_report.json`` always
  describes the files beside it.
- **Interrupt.** An interrupted export (SIGINT, SIGTERM) writes no report and changes nothing in
  ``OUT``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .errors import OutputError
from .interrupts import deferred_signals
from .report import REPORT_NAME, ExportReport

try:  # POSIX; elsewhere exports are not locked (documented)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "FAILED_REPORT_NAME",
    "LOCK_NAME",
    "STAGING_PREFIX",
    "EarlierExport",
    "OutputLock",
    "commit_export",
    "earlier_export",
    "lock_output",
    "prepare_output",
    "record_failure",
    "staging_directory",
]

logger = logging.getLogger(__name__)

LOCK_NAME = ".export.lock"
"""The lock file an export holds in its output directory."""
FAILED_REPORT_NAME = "export_report.failed.json"
"""Where a failure goes when ``export_report.json`` records an earlier successful export."""
STAGING_PREFIX = ".staging-"
"""Prefix of the per-export staging directories inside the output directory."""


def prepare_output(output: str | os.PathLike[str]) -> Path:
    """Create ``output`` (with parents) and check a file can be written in it.

    Raises:
        OutputError: (stage ``output``) the directory cannot be created or written.
    """
    out = Path(output)
    try:
        out.mkdir(parents=True, exist_ok=True)
        # signals wait until the probe is gone: SIGTERM between its creation and its removal
        # left a .write-probe-* file behind (measured: an interrupt at startup)
        with deferred_signals():
            fd, probe = tempfile.mkstemp(dir=out, prefix=".write-probe-")
            try:
                os.close(fd)
            finally:
                os.unlink(probe)
    except OSError as e:
        raise OutputError(
            f"output directory {out} is not writable: {e.strerror or e}", stage="output"
        ) from e
    return out


@dataclass
class OutputLock:
    """The lock one export holds on its output directory (see :func:`lock_output`).

    Attributes:
        directory: the output directory (resolved).
        path: the lock file.
        pid: this process's id (written into the lock file).
        took_over: the pid recorded by a previous holder that died without removing the file.
    """

    directory: Path
    path: Path
    pid: int
    took_over: int | None = None
    _fd: int | None = None
    _thread: int = 0
    _depth: int = 1


_HELD: dict[Path, OutputLock] = {}
_HELD_GUARD = threading.Lock()


def _recorded_pid(fd: int) -> int | None:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 64).decode(errors="replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None


def _busy(directory: Path, holder: int | None) -> OutputError:
    who = f"pid {holder}" if holder is not None else "a process that has not written its pid yet"
    return OutputError(
        f"output directory {directory} is in use by another export ({who}); wait for it to "
        "finish or pass another -o",
        stage="output",
    )


def _acquire(directory: Path) -> OutputLock:
    path = directory / LOCK_NAME
    lock = OutputLock(directory, path, os.getpid(), _thread=threading.get_ident())
    if fcntl is None:  # pragma: no cover - Windows
        return lock
    for _ in range(10):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise OutputError(f"cannot create the lock file {path}: {e.strerror or e}",
                              stage="output") from e
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _recorded_pid(fd)
            os.close(fd)
            raise _busy(directory, holder) from None
        # the previous holder unlinks the file before releasing it: make sure ours is the file
        # at that path now, else another process may lock a new file of the same name
        try:
            current = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(fd)
    else:  # pragma: no cover - ten lost races in a row
        raise _busy(directory, None)
    previous = _recorded_pid(fd)
    if previous is not None and previous != lock.pid:
        lock.took_over = previous
        logger.info("took over the lock of %s left by pid %s, which has exited", directory, previous)
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, f"{lock.pid}\n".encode())
    lock._fd = fd
    _remove_leftover_staging(directory)
    return lock


def _release(lock: OutputLock) -> None:
    if lock._fd is None:
        return
    try:
        lock.path.unlink(missing_ok=True)
    finally:
        os.close(lock._fd)
        lock._fd = None


def _remove_leftover_staging(directory: Path) -> None:
    """Staging directories of exports killed without cleanup (SIGKILL, power loss): with the lock
    held, none belongs to a running export."""
    for entry in directory.glob(f"{STAGING_PREFIX}*"):
        if entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)


@contextmanager
def lock_output(directory: str | os.PathLike[str]) -> Iterator[OutputLock]:
    """Hold the export lock of ``directory`` (which must exist) for the ``with`` block.

    Re-entrant within one thread (the command line takes it before loading the model, the
    exporter again around its stages); another thread or process gets an error at once.

    Raises:
        OutputError: (stage ``output``) another export holds the lock; the message names its pid.
    """
    key = Path(directory).resolve()
    me = threading.get_ident()
    with _HELD_GUARD:
        held = _HELD.get(key)
        if held is not None:
            if held._thread != me:
                raise _busy(key, held.pid)
            held._depth += 1
            lock = held
        else:
            lock = _acquire(key)
            _HELD[key] = lock
    try:
        yield lock
    finally:
        with _HELD_GUARD:
            lock._depth -= 1
            if lock._depth == 0:
                _HELD.pop(key, None)
                _release(lock)


@contextmanager
def staging_directory(directory: Path) -> Iterator[Path]:
    """A fresh, empty ``<directory>/.staging-<pid>-<random>/``, removed with its contents when the
    block ends (whatever was not moved out of it)."""
    path = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=directory))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@dataclass(frozen=True)
class EarlierExport:
    """A successful export found in an output directory.

    Attributes:
        report: its ``export_report.json``.
        files: the artifact files it lists (``files`` in the report; empty for reports written
            before that key existed).
    """

    report: Path
    files: tuple[str, ...]


def earlier_export(directory: Path) -> EarlierExport | None:
    """The successful export ``directory`` holds (``export_report.json`` with ``status: ok``),
    or ``None``."""
    path = Path(directory) / REPORT_NAME
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("status") != "ok":
        return None
    files = data.get("files") or ()
    return EarlierExport(path, tuple(str(f) for f in files if isinstance(f, str)))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _replace(source: Path, target: Path, staging: Path) -> None:
    """Move ``source`` onto ``target``: a file by one rename; a directory (one graph of a
    generative export) after moving the old one into ``staging``, where it is removed with it."""
    if source.is_dir() and (target.exists() or target.is_symlink()):
        os.replace(target, staging / f".replaced-{target.name}")
    os.replace(source, target)


def _matching(directory: Path, patterns: Iterable[str]) -> set[str]:
    return {p.name for pattern in patterns for p in directory.glob(pattern) if p.is_file()}


def _safe_name(name: str) -> bool:
    return bool(name) and "/" not in name and "\\" not in name and name not in (".", "..")


def record_failure(
    directory: Path, report: ExportReport, artifact_patterns: Sequence[str]
) -> Path:
    """Write a failed export's report by the contract of this module; returns its path.

    Args:
        directory: the output directory (its lock is held by the caller).
        report: the failed export's report.
        artifact_patterns: glob patterns of the backend's artifact files (``model.onnx``,
            ``*.ptd``), removed when no successful export vouches for them.
    """
    directory = Path(directory)
    with deferred_signals():
        if earlier_export(directory) is not None:
            report.extra["earlier_export_kept"] = True
            return report.write(directory, name=FAILED_REPORT_NAME)
        for name in _matching(directory, artifact_patterns):
            (directory / name).unlink(missing_ok=True)
        (directory / FAILED_REPORT_NAME).unlink(missing_ok=True)
        return report.write(directory)


def commit_export(
    staging: Path,
    directory: Path,
    files: Sequence[str],
    report: ExportReport,
    artifact_patterns: Sequence[str],
) -> list[Path]:
    """Move a successful export's ``files`` from ``staging`` into ``directory``, write its
    report, and remove what the earlier export left that the new one does not replace (its
    listed files, this backend's artifact files, ``export_report.failed.json``).

    SIGINT and SIGTERM are held until the renames are done.

    Args:
        staging: the staging directory the files were written and validated in.
        directory: the output directory (its lock is held by the caller).
        files: names of the artifact files in ``staging``, the artifact first; an entry may be
            a directory (a generative export's ``prefill`` / ``decode`` graphs).
        report: the finished report (``files`` is set to ``files``).
        artifact_patterns: glob patterns of the backend's artifact files.

    Returns:
        The final paths of ``files``.

    Raises:
        OutputError: (stage ``save``) a file cannot be moved or written.
    """
    directory = Path(directory)
    for name in files:
        if not _safe_name(name):
            raise OutputError(f"artifact file name {name!r} is not a plain file name", stage="save")
    earlier = earlier_export(directory)
    stale = (set(earlier.files) if earlier else set()) | _matching(directory, artifact_patterns)
    stale = {n for n in stale if _safe_name(n)} - set(files)
    report.extra["files"] = list(files)
    try:
        with deferred_signals():
            for name in files:
                _replace(staging / name, directory / name, staging)
            report.write(directory)
            for name in sorted(stale):
                _remove(directory / name)
            (directory / FAILED_REPORT_NAME).unlink(missing_ok=True)
    except OSError as e:
        raise OutputError(f"cannot move the artifact into {directory}: {e}", stage="save") from e
    return [directory / name for name in files]
