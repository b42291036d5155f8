"""One typed, introspectable registry for every kind of workaround.

A *patch* swaps an attribute (a ``torch`` op, a backend internal, a model method) for the duration
of one export and is always restored. A *fix* rewrites the traced graph or program. Backends add
kinds of their own (ONNX: ``translation``, ``ir_fix``) through :func:`register_workaround`. Every
registration is one frozen :class:`Workaround` record: kind, backend, **stage**, name, targets,
reason, the upstream issue or pull request it exists for, and an optional version range.

Backends are plain strings: ``"dynamo"`` (capture level, inherited by every backend) and each
backend's own key with dotted sub-keys (``"executorch.xnnpack"`` inherits ``"executorch"``). A
backend declares its stages (:class:`~export_core.stages.StagePlan`) with
:func:`register_stage_plan` before registering workarounds; a record's stage must be one of the
plan's stages that runs its kind. The core names no backend: :func:`describe` finds the installed
ones through the ``export_core.backends`` entry-point group.

``python -m export_core`` prints the table of every registered workaround (:func:`main`).
"""

from __future__ import annotations

import builtins
import importlib
import inspect
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from .stages import ARTIFACT_STAGES, CAPTURE_STAGES, CLI_STAGES, StagePlan

__all__ = [
    "BACKEND_ENTRY_POINTS",
    "DYNAMO_PLAN",
    "FX_NODE_FIX",
    "FX_PROGRAM_FIX",
    "PATCH",
    "ResolvedTarget",
    "TABLE_BEGIN",
    "TABLE_END",
    "Workaround",
    "WorkaroundStatus",
    "backend_chain",
    "describe",
    "fx_node_fixes_for",
    "fx_program_fixes_for",
    "load_backends",
    "patches_for",
    "main",
    "plan_for",
    "register_fx_node_fix",
    "register_fx_program_fix",
    "register_patch",
    "register_stage_plan",
    "readme_with_table",
    "register_workaround",
    "resolve_target",
    "unregister",
    "version_ok",
    "withheld",
    "workaround_table",
    "workarounds_for",
]

PATCH = "patch"
"""Kind of a reversible attribute swap (``factory(original) -> replacement``)."""
FX_NODE_FIX = "fx_node_fix"
"""Kind of a per-node graph rewrite (``fn(node) -> bool``)."""
FX_PROGRAM_FIX = "fx_program_fix"
"""Kind of a whole-program rewrite (``fn(program, context) -> FixResult``)."""

BACKEND_ENTRY_POINTS = "export_core.backends"
"""Entry-point group of the installed backends: each names the module that registers the
backend's stage plan and workarounds."""

_UPSTREAM = re.compile(r"^https://github\.com/[\w.-]+/[\w.-]+/(issues|pull)/\d+(#[\w.-]+)?$")

DYNAMO_PLAN = StagePlan("dynamo", (*CLI_STAGES, ARTIFACT_STAGES[0], *CAPTURE_STAGES, *ARTIFACT_STAGES[1:]))
"""The base exporter's plan (capture only): the ``"dynamo"`` patches run at ``patches``."""

_LOCK = threading.RLock()


@dataclass(frozen=True)
class Workaround:
    """One registered workaround, of any kind.

    Attributes:
        kind: ``"patch"``, ``"fx_node_fix"``, ``"fx_program_fix"``, or a backend's own kind
            (``"translation"``, ``"ir_fix"``).
        backend: the registry key it applies to (``"dynamo"``, ``"onnx"``,
            ``"executorch.xnnpack"``).
        stage: the name of the stage that runs it, one of its backend's plan.
        name: unique within ``(backend, kind)``; a patch is ``"<backend>:<target>"``, other
            kinds are their function's name.
        targets: what it applies to: the dotted attribute path of a patch, the op overloads a
            node fix is offered or a translation lowers; empty for program-wide kinds.
        fn: the patch factory (``factory(original[, session]) -> replacement``), node fix
            (``fn(node) -> bool``), program fix, translation or IR fix.
        reason: one sentence on what breaks without it.
        upstream: the upstream issue or pull request it exists for
            (``https://github.com/<owner>/<repo>/issues/<n>`` or ``.../pull/<n>``).
        versions: optional ``(package, specifier)`` it is limited to, e.g.
            ``("transformers", ">=5,<6")``.
        repack: a patch that changes how the outputs are *packed* (not their values) gives
            ``repack(eager_output) -> eager_output``: the unpatched eager reference's output put
            into the layout the patch gave the artifact, so validation compares the true model's
            values leaf by leaf. Applied only when the patch fired during the capture.
    """

    kind: str
    backend: str
    stage: str
    name: str
    targets: tuple[Any, ...]
    fn: Callable[..., Any]
    reason: str
    upstream: str
    versions: tuple[str, str] | None = None
    repack: Callable[[Any], Any] | None = None

    @property
    def target(self) -> str:
        """The targets as one string (``"*"`` for none)."""
        return ",".join(str(t) for t in self.targets) or "*"


@dataclass(frozen=True)
class WorkaroundStatus:
    """One row of :func:`describe`: a record, where its stage sits, and whether it can apply.

    Attributes:
        kind, backend, stage, name, reason, upstream: as in :class:`Workaround`.
        target: the targets as one string.
        stage_number: the stage's number within its part (``0`` when the backend has no plan).
        stage_title: the stage's title.
        function: the registered function's name (a patch: its factory).
        versions: ``"package specifier"`` or ``""``.
        resolvable: the target exists in the installed libraries and the version range holds.
        problem: why not, when ``resolvable`` is false.
    """

    kind: str
    backend: str
    stage: str
    stage_number: int
    stage_title: str
    name: str
    function: str
    target: str
    reason: str
    upstream: str
    versions: str
    resolvable: bool
    problem: str

    def as_dict(self) -> dict[str, Any]:
        """The row as a plain dict."""
        return asdict(self)


@dataclass(frozen=True)
class ResolvedTarget:
    """A dotted path resolved to its owner object and attribute name."""

    owner: Any
    attribute: str

    def stored(self) -> Any:
        """What the owner itself holds under the attribute (``None`` when it holds nothing: an
        inherited class attribute, or a builtin a module's code calls unshadowed)."""
        if inspect.isclass(self.owner) or inspect.ismodule(self.owner):
            return self.owner.__dict__.get(self.attribute)
        return getattr(self.owner, self.attribute, None)


@dataclass
class _Tables:
    records: dict[tuple[str, str], dict[str, Workaround]] = field(default_factory=dict)
    plans: dict[str, StagePlan] = field(default_factory=lambda: {"dynamo": DYNAMO_PLAN})
    backend_errors: dict[str, str] = field(default_factory=dict)
    loaded: bool = False


_TABLES = _Tables()


def register_stage_plan(plan: StagePlan) -> StagePlan:
    """Declare ``plan.backend``'s stages, so its workarounds can name them.

    Registering the same plan again is a no-op; a different plan for the same backend is an
    error.

    Raises:
        ValueError: another plan is registered for the backend.
    """
    with _LOCK:
        have = _TABLES.plans.get(plan.backend)
        if have is not None and have != plan:
            raise ValueError(f"a different stage plan is registered for {plan.backend!r}")
        _TABLES.plans[plan.backend] = plan
    return plan


def plan_for(backend: str) -> StagePlan | None:
    """The stage plan that governs ``backend``: its own, else its nearest parent key's."""
    with _LOCK:
        for key in reversed(backend_chain(backend)):
            if key in _TABLES.plans:
                return _TABLES.plans[key]
    return None


def _resolve_stage(kind: str, backend: str, stage: str | None, what: str) -> str:
    plan = plan_for(backend)
    if plan is None:
        if stage is None:
            raise ValueError(f"{what}: backend {backend!r} declares no stages; pass stage=")
        return stage
    # the capture stages, shared by every backend, run the "dynamo" workarounds only
    shared = plan.backend == DYNAMO_PLAN.backend
    running = [s for s in plan.running(kind) if shared or s.part != CAPTURE_STAGES[0].part]
    if stage is not None:
        if stage not in {s.name for s in running}:
            names = ", ".join(s.name for s in running) or "none"
            raise ValueError(
                f"{what}: stage {stage!r} of {plan.backend!r} does not run {kind} workarounds "
                f"(stages that do: {names})"
            )
        return stage
    if len(running) != 1:
        names = ", ".join(s.name for s in running) or "none"
        raise ValueError(f"{what}: {backend!r} runs {kind} workarounds at {names}; pass stage=")
    return running[0].name


def _check_evidence(reason: str, upstream: str, what: str) -> None:
    if not reason or not reason.strip():
        raise ValueError(f"{what}: a workaround needs a reason")
    if not _UPSTREAM.match(upstream or ""):
        raise ValueError(
            f"{what}: upstream must be a GitHub issue or pull request URL, got {upstream!r}"
        )


def register_workaround(record: Workaround) -> Workaround:
    """Add ``record`` to the registry.

    Raises:
        ValueError: the name is registered twice for its backend and kind; a target of a patch
            or translation is registered twice for one backend; the reason is empty; the
            upstream link is not a GitHub issue or pull request URL; the stage is not one of
            the backend's stages that runs the kind.
    """
    what = f"{record.kind} {record.name}"
    _check_evidence(record.reason, record.upstream, what)
    stage = _resolve_stage(record.kind, record.backend, record.stage or None, what)
    if stage != record.stage:
        record = replace(record, stage=stage)
    with _LOCK:
        table = _TABLES.records.setdefault((record.backend, record.kind), {})
        if record.name in table:
            raise ValueError(f"{what} is registered twice for {record.backend!r}")
        if record.targets:
            taken = {t for rec in table.values() for t in rec.targets}
            for t in record.targets:
                if t in taken:
                    raise ValueError(
                        f"{record.kind} target {t!r} is registered twice for {record.backend!r}"
                    )
        table[record.name] = record
    return record


def register_patch(
    backend: str,
    *targets: str,
    stage: str | None = None,
    reason: str,
    upstream: str,
    versions: tuple[str, str] | None = None,
    repack: Callable[[Any], Any] | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``factory(original) -> replacement`` for each dotted ``targets`` path.

    The factory may take a second parameter, the export's
    :class:`~export_core.patching.PatchSession`, to record what the replacement observed
    (``session.observe(name, item)``). A replacement counts as fired when it is called, unless
    it sets :data:`~export_core.patching.MARKS_OWN_FIRING` and calls
    ``session.mark_fired("<backend>:<target>")`` itself when it acts.

    Args:
        backend: ``"dynamo"`` or a backend key (or a dotted sub-key).
        *targets: dotted paths of the attributes to swap (module path, then attributes).
        stage: the patch stage that installs it; may be omitted when the backend has one.
        reason: what breaks without the patch.
        upstream: the upstream issue or pull request URL.
        versions: optional ``(package, specifier)``; outside it the patch is not installed.
        repack: for a patch that changes only how the outputs are packed: puts the eager
            reference's output into the artifact's layout (see :class:`Workaround`).

    Raises:
        ValueError: as :func:`register_workaround`, or no target is given.
    """
    if not targets:
        raise ValueError("register_patch needs at least one target path")

    def decorate(factory: Callable[..., Any]) -> Callable[..., Any]:
        records = [
            Workaround(PATCH, backend, stage or "", f"{backend}:{t}", (t,), factory, reason,
                       upstream, versions, repack)
            for t in targets
        ]
        with _LOCK:
            for t in targets:
                if f"{backend}:{t}" in _TABLES.records.get((backend, PATCH), {}):
                    raise ValueError(f"patch target {t!r} is registered twice for {backend!r}")
            for rec in records:
                register_workaround(rec)
        return factory

    return decorate


def register_fx_node_fix(
    backend: str, *targets: Any, stage: str | None = None, reason: str, upstream: str
) -> Callable[[Callable[[Any], bool]], Callable[[Any], bool]]:
    """Register ``fn(node) -> bool`` (True when it rewrote the node) as an FX node fix.

    Args:
        backend: the backend key.
        *targets: node targets the fix is offered (``OpOverload``, ``OpOverloadPacket`` or a
            callable such as ``operator.floordiv``); none: every ``call_function`` node.
        stage: the node-fix stage; may be omitted when the backend has one.
        reason, upstream: why it exists and the upstream issue or pull request.

    Raises:
        ValueError: as :func:`register_workaround`.
    """

    def decorate(fn: Callable[[Any], bool]) -> Callable[[Any], bool]:
        register_workaround(Workaround(FX_NODE_FIX, backend, stage or "", fn.__name__,
                                       tuple(targets), fn, reason, upstream))
        return fn

    return decorate


def register_fx_program_fix(
    backend: str, *, stage: str | None = None, reason: str, upstream: str
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn(program, context) -> FixResult`` as an FX program fix.

    ``context`` is the :class:`~export_core.fixes.FixContext` of the export (config, capture);
    the result says whether the program changed and may carry details for the report.

    Raises:
        ValueError: as :func:`register_workaround`.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        register_workaround(Workaround(FX_PROGRAM_FIX, backend, stage or "", fn.__name__, (), fn,
                                       reason, upstream))
        return fn

    return decorate


def unregister(backend: str, name: str) -> None:
    """Remove a registration by backend and name (a patch: its target path or full name)."""
    with _LOCK:
        for (b, _), table in _TABLES.records.items():
            if b == backend:
                table.pop(name, None)
                table.pop(f"{backend}:{name}", None)


@contextmanager
def withheld(backend: str, name: str) -> Iterator[Workaround]:
    """Take the workaround ``name`` of ``backend`` out of the registry for the ``with`` block,
    then put it back where it was (the "fails without it" half of a workaround's tests).

    Yields:
        The withheld record.

    Raises:
        KeyError: no workaround of that name (a patch: its target path or full name).
    """
    with _LOCK:
        found = [(table_key, key) for table_key, table in _TABLES.records.items()
                 for key in (name, f"{backend}:{name}")
                 if table_key[0] == backend and key in table]
        if not found:
            raise KeyError(f"no workaround {name!r} is registered for {backend!r}")
        table_key, key = found[0]
        saved = dict(_TABLES.records[table_key])
        record = _TABLES.records[table_key].pop(key)
    try:
        yield record
    finally:
        with _LOCK:
            current = _TABLES.records[table_key]
            restored = {k: v for k, v in saved.items() if k in current or k == key}
            restored.update({k: v for k, v in current.items() if k not in restored})
            _TABLES.records[table_key] = restored


def backend_chain(backend: str) -> tuple[str, ...]:
    """The backend keys whose workarounds apply to ``backend``, most general first.

    ``"executorch.xnnpack"`` gives ``("executorch", "executorch.xnnpack")``. The capture-level
    ``"dynamo"`` key is applied by :class:`~export_core.exporter.DynamoExporter` itself.
    """
    parts = backend.split(".")
    return tuple(".".join(parts[: i + 1]) for i in range(len(parts)))


def workarounds_for(backend: str, kind: str, stage: str | None = None) -> list[Workaround]:
    """Workarounds of ``kind`` registered for ``backend`` and its parent keys, in registration
    order, limited to ``stage`` when given."""
    with _LOCK:
        out: list[Workaround] = []
        for key in backend_chain(backend):
            out.extend(
                rec for rec in _TABLES.records.get((key, kind), {}).values()
                if stage is None or rec.stage == stage
            )
        return out


def patches_for(backend: str, stage: str | None = None) -> list[Workaround]:
    """The patches :func:`workarounds_for` gives ``backend`` (and its parent keys)."""
    return workarounds_for(backend, PATCH, stage)


def fx_node_fixes_for(backend: str, stage: str | None = None) -> list[Workaround]:
    """The FX node fixes :func:`workarounds_for` gives ``backend`` (and its parent keys)."""
    return workarounds_for(backend, FX_NODE_FIX, stage)


def fx_program_fixes_for(backend: str, stage: str | None = None) -> list[Workaround]:
    """The FX program fixes :func:`workarounds_for` gives ``backend`` (and its parent keys)."""
    return workarounds_for(backend, FX_PROGRAM_FIX, stage)


def resolve_target(path: str) -> ResolvedTarget:
    """Resolve ``"pkg.module.Class.attr"`` to its owner object and attribute name.

    The longest importable module prefix is imported; the rest is walked with ``getattr``. A
    module attribute that is a Python builtin the module does not define (``module.len``)
    resolves too: patching it shadows the builtin for that module's code only.

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
            if inspect.ismodule(owner) and hasattr(builtins, parts[-1]):
                # a builtin the module's code calls (``len``): shadowed by a module global
                return ResolvedTarget(owner, parts[-1])
            raise LookupError(f"{path!r}: {type(owner).__name__} has no attribute {parts[-1]!r}")
        return ResolvedTarget(owner, parts[-1])
    raise LookupError(f"{path!r}: no importable module prefix")


def version_ok(versions: tuple[str, str] | None) -> tuple[bool, str]:
    """Whether the installed package satisfies ``(package, specifier)``, and why not."""
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


def load_backends() -> dict[str, str]:
    """Import every installed backend's registration module (entry-point group
    :data:`BACKEND_ENTRY_POINTS`), once.

    Returns:
        ``{entry point name: error}`` for backends that are installed but failed to import.
    """
    from importlib.metadata import entry_points

    importlib.import_module(f"{__package__}.workarounds")  # the core's capture-level patches
    with _LOCK:
        if not _TABLES.loaded:
            for ep in entry_points(group=BACKEND_ENTRY_POINTS):
                try:
                    ep.load()
                except Exception as e:  # noqa: BLE001 - reported, never dropped
                    _TABLES.backend_errors[ep.name] = f"{type(e).__name__}: {e}"
            _TABLES.loaded = True
        return dict(_TABLES.backend_errors)


def _status(rec: Workaround) -> WorkaroundStatus:
    ok, problem = version_ok(rec.versions)
    if ok and rec.kind == PATCH:
        try:
            resolve_target(rec.targets[0])
        except LookupError as e:
            ok, problem = False, str(e)
    plan = plan_for(rec.backend)
    stage = plan[rec.stage] if plan is not None and rec.stage in plan else None
    return WorkaroundStatus(
        kind=rec.kind, backend=rec.backend, stage=rec.stage,
        stage_number=stage.number if stage else 0, stage_title=stage.title if stage else "",
        name=rec.name, function=getattr(rec.fn, "__name__", rec.name), target=rec.target,
        reason=rec.reason, upstream=rec.upstream,
        versions=" ".join(rec.versions) if rec.versions else "", resolvable=ok, problem=problem,
    )


def describe(backends: Iterable[str] | None = None) -> list[WorkaroundStatus]:
    """Every registered workaround of every installed backend, with its stage and whether its
    target resolves here (and why not).

    Args:
        backends: limit to these registry keys and their sub-keys (``"executorch"`` includes
            ``"executorch.xnnpack"``); default: all.

    Returns:
        One :class:`WorkaroundStatus` per record, grouped by backend, in each backend's stage
        order, then registration order.
    """
    load_backends()
    wanted = tuple(backends) if backends is not None else None

    def selected(key: str) -> bool:
        return wanted is None or any(key == w or key.startswith(w + ".") for w in wanted)

    with _LOCK:
        records = [rec for (key, _), table in _TABLES.records.items() if selected(key)
                   for rec in table.values()]

    def order(rec: Workaround) -> tuple[str, int]:
        plan = plan_for(rec.backend)
        names = plan.names if plan is not None else ()
        return rec.backend, names.index(rec.stage) if rec.stage in names else len(names)

    return [_status(rec) for rec in sorted(records, key=order)]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def workaround_table(backends: Iterable[str] | None = None, *, markdown: bool = True) -> str:
    """The registered workarounds as a Markdown table (or aligned plain text).

    Columns: backend, stage (``number name``), kind, function, target, reason, upstream (which
    also says when a target does not resolve here).
    """
    rows = describe(backends)
    head = ["backend", "stage", "kind", "function", "target", "reason", "upstream"]
    body = [
        [r.backend, f"{r.stage_number} {r.stage}", r.kind, r.function, r.target, r.reason,
         r.upstream + ("" if r.resolvable else f" (not applied here: {r.problem})")]
        for r in rows
    ]
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in body]
        return "\n".join(lines) + "\n"
    short = [[*row[:5], row[6]] for row in body]
    widths = [max(len(x) for x in col) for col in zip(*([head[:5] + head[6:]] + short))]
    fmt = "  ".join(f"{{:{w}}}" for w in widths)
    return "\n".join(fmt.format(*row) for row in [head[:5] + head[6:], *short]) + "\n"


TABLE_BEGIN = "<!-- workarounds:begin (generated by python -m export_core --readme) -->"
"""Marker before the generated workaround table in a README."""
TABLE_END = "<!-- workarounds:end -->"
"""Marker after it."""


def readme_with_table(text: str, backends: Iterable[str] | None) -> str:
    """``text`` (a README) with the block between :data:`TABLE_BEGIN` and :data:`TABLE_END`
    replaced by the Markdown table of ``backends``' workarounds.

    Raises:
        ValueError: the README has no such block.
    """
    begin, end = text.find(TABLE_BEGIN), text.find(TABLE_END)
    if begin < 0 or end < begin:
        raise ValueError(f"no '{TABLE_BEGIN}' ... '{TABLE_END}' block")
    table = workaround_table(backends, markdown=True)
    return text[: begin + len(TABLE_BEGIN)] + "\n" + table + text[end:]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m export_core [--backend KEY ...] [--markdown] [--readme FILE]``:
    print the table of every registered workaround of the installed backends (or rewrite the
    generated table in FILE); exit 1 when a backend failed to load."""
    import argparse
    from pathlib import Path

    p = argparse.ArgumentParser(prog="python -m export_core", description=main.__doc__)
    p.add_argument("--backend", nargs="+", metavar="KEY", help="registry keys to list (default all)")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    p.add_argument("--readme", metavar="FILE",
                   help="rewrite the generated table between the workarounds markers in FILE")
    args = p.parse_args(argv)
    errors = load_backends()
    if args.readme:
        path = Path(args.readme)
        try:
            path.write_text(readme_with_table(path.read_text(), args.backend))
        except (OSError, ValueError) as e:
            print(f"python -m export_core: {args.readme}: {e}", file=sys.stderr)
            return 2
    else:
        sys.stdout.write(workaround_table(args.backend, markdown=args.markdown))
    for name, error in errors.items():
        print(f"backend {name} failed to load: {error}", file=sys.stderr)
    return 1 if errors else 0
