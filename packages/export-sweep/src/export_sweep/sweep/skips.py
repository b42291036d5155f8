"""Skip lists of the export sweep, as data.

``EXPORT_SKIPS`` opts a model class out of the sweep only when it is fundamentally non-exportable
as is; each entry names the model-side change needed. ``ONNX_DISABLE_OPTIMIZE`` disables the
onnxscript optimizer for one model class, only with a reference to a specific upstream bug.

Both lists must shrink: the sweep still attempts every listed model (recording ``xfail``, or
``xpass`` when it now exports), and ``tests/sweep/test_skips.py`` runs every entry as a strict
expected failure, so an entry that starts passing fails the suite until it is removed.

The lists start empty: an entry is added only once it is measured and its reason verified.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "EXPORT_SKIPS",
    "ONNX_DISABLE_OPTIMIZE",
    "SCOPES",
    "Scope",
    "SkipEntry",
    "applicable_skip",
    "disable_optimize",
    "validate_entries",
]

Scope = Literal["all", "onnx", "executorch", "dynamic"]
SCOPES: tuple[str, ...] = ("all", "onnx", "executorch", "dynamic")
"""Valid scopes: every backend, one backend, or only dynamic-shape exports (the sweep always
exports with dynamic shapes, so ``dynamic`` applies to both backends there)."""


@dataclass(frozen=True)
class SkipEntry:
    """One skip-list record.

    Attributes:
        model_type: the ``config.model_type`` the sweep builds (needed to rebuild it in tests).
        class_name: the model class the zoo builds for that type (e.g. ``"BertModel"``).
        scope: ``"all"``, ``"onnx"``, ``"executorch"`` or ``"dynamic"``.
        reason: why the export fails, measured (stage and error).
        fix: the model-side change needed (``EXPORT_SKIPS``) or the upstream bug URL
            (``ONNX_DISABLE_OPTIMIZE``).
    """

    model_type: str
    class_name: str
    scope: Scope
    reason: str
    fix: str

    def applies_to(self, backend: str, *, dynamic: bool = True) -> bool:
        """Whether this entry covers an export to ``backend`` (``"onnx"`` / ``"executorch"``)."""
        if self.scope == "all":
            return True
        if self.scope == "dynamic":
            return dynamic
        return self.scope == backend


EXPORT_SKIPS: tuple[SkipEntry, ...] = ()
"""Model classes that are fundamentally non-exportable as is (expected failures)."""

ONNX_DISABLE_OPTIMIZE: tuple[SkipEntry, ...] = ()
"""Model classes exported with ``optimize=False`` because of an upstream optimizer bug."""


def validate_entries(entries: Iterable[SkipEntry], *, require_url: bool = False) -> list[str]:
    """Problems with skip-list records (an empty list when all are valid).

    Args:
        entries: the records to check.
        require_url: ``fix`` must be an ``http(s)://`` URL (``ONNX_DISABLE_OPTIMIZE``).

    Returns:
        One line per problem.
    """
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    for e in entries:
        label = f"{e.model_type}/{e.class_name}/{e.scope}"
        if not e.model_type or not e.class_name:
            problems.append(f"{label}: model_type and class_name are required")
        if e.scope not in SCOPES:
            problems.append(f"{label}: scope must be one of {', '.join(SCOPES)}")
        if len(e.reason.strip()) < 10:
            problems.append(f"{label}: reason must explain the measured failure")
        if not e.fix.strip():
            problems.append(f"{label}: fix (model-side change or bug URL) is required")
        elif require_url and not e.fix.startswith(("http://", "https://")):
            problems.append(f"{label}: fix must be the upstream bug URL")
        if (e.class_name, e.scope) in seen:
            problems.append(f"{label}: duplicate entry")
        seen.add((e.class_name, e.scope))
    return problems


def applicable_skip(
    class_name: str,
    backend: str,
    *,
    dynamic: bool = True,
    entries: Iterable[SkipEntry] | None = None,
) -> SkipEntry | None:
    """The ``EXPORT_SKIPS`` entry (or one of ``entries``) covering this class and backend."""
    for e in EXPORT_SKIPS if entries is None else entries:
        if e.class_name == class_name and e.applies_to(backend, dynamic=dynamic):
            return e
    return None


def disable_optimize(class_name: str, entries: Iterable[SkipEntry] | None = None) -> bool:
    """Whether ``ONNX_DISABLE_OPTIMIZE`` (or ``entries``) lists this class."""
    return any(
        e.class_name == class_name for e in (ONNX_DISABLE_OPTIMIZE if entries is None else entries)
    )
