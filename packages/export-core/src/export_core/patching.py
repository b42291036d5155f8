"""Installing registered patches for the duration of one export, and always restoring them.

Patching is process-global state, so every export holds :data:`EXPORT_LOCK` (re-entrant: an
export may call helpers that also take it) from the first install to the last restore.
"""

from __future__ import annotations

import builtins
import functools
import inspect
import logging
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from .errors import PatchError
from .registry import PATCH, Workaround, resolve_target, version_ok, workarounds_for

__all__ = ["EXPORT_LOCK", "MARKS_OWN_FIRING", "PatchSession", "apply_patches", "output_repacks"]

logger = logging.getLogger(__name__)

EXPORT_LOCK = threading.RLock()
"""Serializes exports: patches are process-global."""

_MISSING = object()


@dataclass
class PatchSession:
    """What one :func:`apply_patches` block did.

    Attributes:
        installed: names of patches swapped in, in install order.
        fired: names of installed patches whose replacement was called at least once.
        skipped: ``{name: reason}`` for patches not installed (target absent in this version,
            outside the record's version range).
        observations: ``{patch name: [item, ...]}``: what patch replacements recorded while
            they ran (:meth:`observe`), for the stage that installed them to read back.
    """

    installed: list[str] = field(default_factory=list)
    fired: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    observations: dict[str, list[Any]] = field(default_factory=dict)

    def mark_fired(self, name: str) -> None:
        """Record that patch ``name``'s replacement ran."""
        if name not in self.fired:
            self.fired.append(name)

    def observe(self, name: str, item: Any) -> None:
        """Record ``item`` (once) under patch ``name``: a replacement's side channel to the
        export that installed it."""
        items = self.observations.setdefault(name, [])
        if item not in items:
            items.append(item)

    def observed(self, name: str) -> list[Any]:
        """What the replacement of patch ``name`` recorded, in order (empty if nothing)."""
        return list(self.observations.get(name, ()))

    def merge(self, other: PatchSession) -> None:
        for n in other.installed:
            if n not in self.installed:
                self.installed.append(n)
        for n in other.fired:
            self.mark_fired(n)
        self.skipped.update(other.skipped)
        for name, items in other.observations.items():
            for item in items:
                self.observe(name, item)


MARKS_OWN_FIRING = "__marks_own_firing__"
"""Attribute a replacement sets (to ``True``) when it calls ``session.mark_fired`` itself, only
when it acts: a replacement called for every node or op (a dispatcher) would otherwise count as
fired in every export, and a replacement that is not a function (a table) as fired on install."""


def _wrap(record: Workaround, replacement: Any, session: PatchSession) -> Any:
    if getattr(replacement, MARKS_OWN_FIRING, False):
        return replacement
    if not callable(replacement) or isinstance(replacement, type):
        session.mark_fired(record.name)
        return replacement

    @functools.wraps(replacement)
    def fired(*args: Any, **kwargs: Any) -> Any:
        session.mark_fired(record.name)
        return replacement(*args, **kwargs)

    return fired


_LAZY_PREFIX = "transformers.models."


def _model_module_loaded(target: str) -> bool:
    """Model-specific targets (``transformers.models.<family>.<module>...``) are resolved only
    when their module is already imported: importing dozens of modeling modules just to patch
    them would cost seconds per process, and an unimported model cannot be the one exported."""
    if not target.startswith(_LAZY_PREFIX):
        return True
    parts = target.split(".")
    return any(".".join(parts[:i]) in sys.modules for i in range(len(parts) - 1, 3, -1))


def _takes_session(factory: Any) -> bool:
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    return len(params) >= 2


@contextmanager
def apply_patches(
    backends: str | Sequence[str],
    session: PatchSession | None = None,
    *,
    stage: str | None = None,
) -> Iterator[PatchSession]:
    """Install every patch registered for ``backends`` (at ``stage``); restore them all on exit.

    Targets are resolved before anything is installed. A target that does not exist in the
    installed library versions is skipped and recorded in ``session.skipped``. Restoration runs in
    reverse install order inside ``finally``, also when the block raises.

    Args:
        backends: one backend key or several (``"dynamo"`` and the backends' own keys).
        session: a session to record into; a new one when omitted.
        stage: install only the patches registered at this stage (default: all).

    Yields:
        The :class:`PatchSession` recording installed, fired and skipped patches.

    Raises:
        PatchError: a patch factory raised, or an original could not be restored.
    """
    if isinstance(backends, str):
        backends = (backends,)
    session = session if session is not None else PatchSession()
    records: list[Workaround] = []
    for backend in backends:
        records.extend(workarounds_for(backend, PATCH, stage))

    with EXPORT_LOCK:
        plan = []
        for rec in records:
            path = rec.targets[0]
            if not _model_module_loaded(path):
                continue  # the model's module was never imported: no model of it is in use
            ok, why = version_ok(rec.versions)
            if not ok:
                session.skipped[rec.name] = why
                continue
            try:
                target = resolve_target(path)
            except LookupError as e:
                session.skipped[rec.name] = str(e)
                logger.debug("patch %s skipped: %s", rec.name, e)
                continue
            plan.append((rec, target))

        undo: list[tuple[Any, str, Any]] = []
        try:
            for rec, target in plan:
                owner, attr = target.owner, target.attribute
                if inspect.isclass(owner) or inspect.ismodule(owner):
                    stored = owner.__dict__.get(attr, _MISSING)
                else:
                    stored = getattr(owner, attr)
                # a module attribute may be a builtin its code calls, shadowed while installed
                original = getattr(owner, attr) if hasattr(owner, attr) else getattr(builtins, attr)
                try:
                    replacement = (rec.fn(original, session) if _takes_session(rec.fn)
                                   else rec.fn(original))
                except Exception as e:
                    raise PatchError(
                        f"patch {rec.name} could not be built: {type(e).__name__}: {e}"
                    ) from e
                if isinstance(stored, staticmethod):
                    replacement = staticmethod(_wrap(rec, replacement, session))
                else:
                    replacement = _wrap(rec, replacement, session)
                setattr(owner, attr, replacement)
                undo.append((owner, attr, stored))
                session.installed.append(rec.name)
            yield session
        finally:
            errors = []
            for owner, attr, stored in reversed(undo):
                try:
                    if stored is _MISSING:
                        delattr(owner, attr)
                    else:
                        setattr(owner, attr, stored)
                except Exception as e:  # pragma: no cover - restoring a setattr cannot normally fail
                    errors.append(f"{attr}: {e}")
            if errors:
                raise PatchError("could not restore patched attributes: " + "; ".join(errors))


def output_repacks(session: PatchSession, backends: str | Sequence[str] = "dynamo") -> list[Workaround]:
    """The patches of ``backends`` that fired in ``session`` and changed how the outputs are
    packed (:attr:`~export_core.registry.Workaround.repack`), in registration order: their
    ``repack`` puts the eager reference's output into the artifact's layout."""
    if isinstance(backends, str):
        backends = (backends,)
    fired = set(session.fired)
    return [rec for backend in backends for rec in workarounds_for(backend, PATCH)
            if rec.repack is not None and rec.name in fired]
