"""Typed, introspectable registries of workarounds: patches, FX node fixes and FX program fixes.

A *patch* swaps an attribute (a ``torch`` op, a backend internal, a model method) for the duration
of one export and is always restored. A *fix* rewrites the traced graph or program. Each
registration is a frozen record naming its target, backend, reason and the upstream bug it exists
for. Backends are plain strings: ``"dynamo"`` (capture level, inherited by every backend),
``"onnx"``, ``"executorch"`` and dotted sub-keys such as ``"executorch.xnnpack"``.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PatchRecord",
    "FxNodeFixRecord",
    "FxProgramFixRecord",
    "ResolvedTarget",
    "register_patch",
    "register_fx_node_fix",
    "register_fx_program_fix",
    "patches_for",
    "fx_node_fixes_for",
    "fx_program_fixes_for",
    "backend_chain",
    "resolve_target",
    "describe",
    "unregister",
]

_LOCK = threading.RLock()


@dataclass(frozen=True)
class PatchRecord:
    """One registered patch.

    Attributes:
        name: unique name, ``"<backend>:<target>"``.
        backend: the backend key it applies to.
        target: dotted path of the attribute swapped, e.g. ``"torch.Tensor.split"``.
        factory: ``factory(original) -> replacement``; called at install time.
        reason: one sentence on what breaks without it.
        upstream: link to the upstream bug it exists for.
        versions: optional ``(package, specifier)`` the patch is limited to, e.g.
            ``("transformers", ">=5,<6")``.
    """

    name: str
    backend: str
    target: str
    factory: Callable[[Any], Any]
    reason: str
    upstream: str
    versions: tuple[str, str] | None = None


@dataclass(frozen=True)
class FxNodeFixRecord:
    """One registered FX node fix: ``fn(node) -> bool`` rewrites one matching node in place.

    Attributes:
        name: unique name within the backend (the function's name).
        backend: the backend key.
        targets: node targets (``OpOverload``, ``OpOverloadPacket`` or callables such as
            ``operator.floordiv``) the fix is offered; empty means every ``call_function`` node.
        fn: returns True when it changed the graph.
        reason, upstream: as for :class:`PatchRecord`.
    """

    name: str
    backend: str
    targets: tuple[Any, ...]
    fn: Callable[[Any], bool]
    reason: str
    upstream: str


@dataclass(frozen=True)
class FxProgramFixRecord:
    """One registered FX program fix: ``fn(exported_program) -> ExportedProgram | None``.

    Returning ``None`` means the program was left unchanged; returning a program replaces it.
    """

    name: str
    backend: str
    fn: Callable[[Any], Any]
    reason: str
    upstream: str


@dataclass(frozen=True)
class ResolvedTarget:
    """A dotted path resolved to its owner object and attribute name."""

    owner: Any
    attribute: str


_PATCHES: dict[str, dict[str, PatchRecord]] = {}
_NODE_FIXES: dict[str, dict[str, FxNodeFixRecord]] = {}
_PROGRAM_FIXES: dict[str, dict[str, FxProgramFixRecord]] = {}


def _require_reason(reason: str, upstream: str, what: str) -> None:
    if not reason or not upstream:
        raise ValueError(f"{what}: a workaround needs a reason and an upstream link")


def register_patch(
    backend: str,
    *targets: str,
    reason: str,
    upstream: str,
    versions: tuple[str, str] | None = None,
) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
    """Register ``factory(original) -> replacement`` for each dotted ``targets`` path.

    Args:
        backend: ``"dynamo"``, ``"onnx"``, ``"executorch"`` or a dotted sub-key.
        *targets: dotted paths of the attributes to swap (module path, then attributes).
        reason: what breaks without the patch.
        upstream: link to the upstream bug.
        versions: optional ``(package, specifier)``; outside it the patch is not installed.

    Raises:
        ValueError: a target is registered twice for one backend, or reason/upstream is empty.
    """
    if not targets:
        raise ValueError("register_patch needs at least one target path")

    def decorate(factory: Callable[[Any], Any]) -> Callable[[Any], Any]:
        _require_reason(reason, upstream, factory.__name__)
        with _LOCK:
            table = _PATCHES.setdefault(backend, {})
            for target in targets:
                if target in table:
                    raise ValueError(f"patch target {target!r} is registered twice for {backend!r}")
            for target in targets:
                table[target] = PatchRecord(
                    name=f"{backend}:{target}",
                    backend=backend,
                    target=target,
                    factory=factory,
                    reason=reason,
                    upstream=upstream,
                    versions=versions,
                )
        return factory

    return decorate


def register_fx_node_fix(
    backend: str, *targets: Any, reason: str, upstream: str
) -> Callable[[Callable[[Any], bool]], Callable[[Any], bool]]:
    """Register ``fn(node) -> bool`` as an FX node fix for ``backend``.

    Args:
        backend: the backend key.
        *targets: node targets the fix is offered (none: every ``call_function`` node).
        reason, upstream: why it exists and the upstream bug.

    Raises:
        ValueError: the same function name is registered twice for one backend.
    """

    def decorate(fn: Callable[[Any], bool]) -> Callable[[Any], bool]:
        _require_reason(reason, upstream, fn.__name__)
        with _LOCK:
            table = _NODE_FIXES.setdefault(backend, {})
            if fn.__name__ in table:
                raise ValueError(f"FX node fix {fn.__name__!r} is registered twice for {backend!r}")
            table[fn.__name__] = FxNodeFixRecord(
                fn.__name__, backend, tuple(targets), fn, reason, upstream
            )
        return fn

    return decorate


def register_fx_program_fix(
    backend: str, *, reason: str, upstream: str
) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
    """Register ``fn(exported_program) -> ExportedProgram | None`` as an FX program fix.

    Raises:
        ValueError: the same function name is registered twice for one backend.
    """

    def decorate(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        _require_reason(reason, upstream, fn.__name__)
        with _LOCK:
            table = _PROGRAM_FIXES.setdefault(backend, {})
            if fn.__name__ in table:
                raise ValueError(
                    f"FX program fix {fn.__name__!r} is registered twice for {backend!r}"
                )
            table[fn.__name__] = FxProgramFixRecord(fn.__name__, backend, fn, reason, upstream)
        return fn

    return decorate


def unregister(backend: str, name: str) -> None:
    """Remove a registration by backend and target path or function name (tests use this)."""
    with _LOCK:
        for table in (_PATCHES, _NODE_FIXES, _PROGRAM_FIXES):
            table.get(backend, {}).pop(name, None)


def backend_chain(backend: str) -> tuple[str, ...]:
    """The backend keys whose workarounds apply to ``backend``, most general first.

    ``"executorch.xnnpack"`` gives ``("executorch", "executorch.xnnpack")``. The capture-level
    ``"dynamo"`` key is applied by :class:`~export_core.exporter.DynamoExporter` itself.
    """
    parts = backend.split(".")
    return tuple(".".join(parts[: i + 1]) for i in range(len(parts)))


def _collect(table: dict[str, dict[str, Any]], backend: str) -> list[Any]:
    with _LOCK:
        out: list[Any] = []
        for key in backend_chain(backend):
            out.extend(table.get(key, {}).values())
        return out


def patches_for(backend: str) -> list[PatchRecord]:
    """Patches registered for ``backend`` and its parent keys, in registration order."""
    return _collect(_PATCHES, backend)


def fx_node_fixes_for(backend: str) -> list[FxNodeFixRecord]:
    """FX node fixes registered for ``backend`` and its parent keys."""
    return _collect(_NODE_FIXES, backend)


def fx_program_fixes_for(backend: str) -> list[FxProgramFixRecord]:
    """FX program fixes registered for ``backend`` and its parent keys."""
    return _collect(_PROGRAM_FIXES, backend)


def resolve_target(path: str) -> ResolvedTarget:
    """Resolve ``"pkg.module.Class.attr"`` to its owner object and attribute name.

    The longest importable module prefix is imported; the rest is walked with ``getattr``.

    Raises:
        LookupError: no prefix imports, or an attribute along the path is missing.
    """
    parts = path.split(".")
    if len(parts) < 2:
        raise LookupError(f"{path!r} is not a dotted attribute path")
    for split in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:split])
        try:
            owner: Any = importlib.import_module(module_name)
        except ImportError:
            continue
        try:
            for attr in parts[split:-1]:
                owner = getattr(owner, attr)
        except AttributeError as e:
            raise LookupError(f"{path!r}: {e}") from e
        if not hasattr(owner, parts[-1]):
            raise LookupError(f"{path!r}: {type(owner).__name__} has no attribute {parts[-1]!r}")
        return ResolvedTarget(owner, parts[-1])
    raise LookupError(f"{path!r}: no importable module prefix")


def _version_ok(versions: tuple[str, str] | None) -> tuple[bool, str]:
    if versions is None:
        return True, ""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.specifiers import SpecifierSet

    package, spec = versions
    try:
        have = version(package)
    except PackageNotFoundError:
        return False, f"{package} is not installed"
    if have not in SpecifierSet(spec):
        return False, f"{package} {have} is outside {spec}"
    return True, ""


def describe(backends: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Every registration as a plain dict, with whether its target resolves here and why not.

    Returns:
        One dict per record: ``kind`` (patch / fx_node_fix / fx_program_fix), ``backend``,
        ``name``, ``target``, ``reason``, ``upstream``, ``resolvable`` and ``problem``.
    """
    with _LOCK:
        keys = sorted(set(_PATCHES) | set(_NODE_FIXES) | set(_PROGRAM_FIXES))
        wanted = set(backends) if backends is not None else set(keys)
        rows: list[dict[str, Any]] = []
        for key in keys:
            if key not in wanted:
                continue
            for rec in _PATCHES.get(key, {}).values():
                ok, problem = _version_ok(rec.versions)
                if ok:
                    try:
                        resolve_target(rec.target)
                    except LookupError as e:
                        ok, problem = False, str(e)
                rows.append(
                    dict(kind="patch", backend=key, name=rec.name, target=rec.target,
                         reason=rec.reason, upstream=rec.upstream, resolvable=ok, problem=problem)
                )
            for rec in _NODE_FIXES.get(key, {}).values():
                rows.append(
                    dict(kind="fx_node_fix", backend=key, name=rec.name,
                         target=",".join(str(t) for t in rec.targets) or "*",
                         reason=rec.reason, upstream=rec.upstream, resolvable=True, problem="")
                )
            for rec in _PROGRAM_FIXES.get(key, {}).values():
                rows.append(
                    dict(kind="fx_program_fix", backend=key, name=rec.name, target="*",
                         reason=rec.reason, upstream=rec.upstream, resolvable=True, problem="")
                )
        return rows
