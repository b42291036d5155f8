"""An export's stages, declared once as data, and the recorder that times them.

Every exporter declares its ordered stages in one :class:`StagePlan`: each :class:`Stage` has a
part (``"cli"``, ``"artifact"``, ``"capture"``, or the backend's own part such as ``"onnx"``), a
number within that part, a name and a title, and the workaround kinds it runs. That one
declaration is the vocabulary of everything else:

- the report's ``stages`` list and an ``ExportError``'s ``stage`` are stage *names*;
- the progress lines show ``<part> <number>/<count> <name>``;
- the source labels each step with a comment ``<Part> stage <number>: <title>`` between ``# ──``
  rules (a test checks the labels against the plan, so a stage cannot exist only as a comment);
- workaround records name the stage they run at, and :func:`export_core.registry.describe`
  shows its number and title.

A :class:`StageRecorder` times each stage of one export and tells an optional listener when one
starts and ends. Library code never prints: the CLI passes a listener that draws on stderr.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "ARTIFACT_STAGES",
    "CAPTURE_STAGES",
    "CLI_PLAN",
    "CLI_STAGES",
    "Stage",
    "StageListener",
    "StagePlan",
    "StageRecorder",
    "StageTiming",
]


@dataclass(frozen=True)
class Stage:
    """One declared step of an export.

    Attributes:
        part: the part of the pipeline that owns it (``"cli"``, ``"artifact"``, ``"capture"``
            or a backend's name); the part's source labels the step.
        number: 1-based position within ``part``.
        name: the stage's name in reports, errors and progress (``"translate"``).
        title: a short human title (``"ONNX translation"``), used in the source label.
        runs: workaround kinds this stage runs (``"patch"``, ``"fx_node_fix"``, ...); empty for a
            step that runs none.
        of: how many stages ``part`` has.
    """

    part: str
    number: int
    name: str
    title: str
    runs: tuple[str, ...] = ()
    of: int = 0

    @property
    def position(self) -> str:
        """``"<part> <number>/<of>"``, for progress lines."""
        return f"{self.part} {self.number}/{self.of}"

    @property
    def label(self) -> str:
        """The source label, ``"<Part> stage <number>: <title>"`` (the part capitalised,
        ``"onnx"`` and ``"cli"`` upper-cased)."""
        return f"{_part_title(self.part)} stage {self.number}: {self.title}"


def _part_title(part: str) -> str:
    special = {"onnx": "ONNX", "cli": "CLI", "executorch": "ExecuTorch"}
    return special.get(part, part.capitalize())


def _numbered(part: str, steps: Iterable[tuple[str, str] | tuple[str, str, tuple[str, ...]]]) -> tuple[Stage, ...]:
    steps = list(steps)
    out = []
    for i, step in enumerate(steps, start=1):
        name, title, *rest = step
        out.append(Stage(part, i, name, title, tuple(rest[0]) if rest else (), len(steps)))
    return tuple(out)


CLI_STAGES: tuple[Stage, ...] = _numbered("cli", (
    ("imports", "import torch, transformers and the backend"),
    ("load", "load the model directory"),
    ("inputs", "build example inputs"),
))
"""Steps the command-line tools run before an export (``export_core.cli``); their timings open
the report's ``stages``, so the stage seconds add up to the command's wall time."""



CAPTURE_STAGES: tuple[Stage, ...] = _numbered("capture", (
    ("signature", "forward-signature patch"),
    ("patches", "capture patches", ("patch",)),
    ("pytree", "pytree registration"),
    ("dynamic_shapes", "dynamic shapes"),
    ("capture", "state cleanup and torch.export"),
    ("capture_node_fixes", "capture FX node fixes", ("fx_node_fix",)),
))
"""The capture every backend shares (:meth:`export_core.exporter.DynamoExporter.capture`); the
``patches`` stage installs the ``"dynamo"`` patches and the ``capture_node_fixes`` stage runs the
``"dynamo"`` FX node fixes on the captured program, before any backend forks it."""

ARTIFACT_STAGES: tuple[Stage, ...] = _numbered("artifact", (
    ("output", "output directory, lock and staging"),
    ("save", "save into the staging directory"),
    ("runtime", "load in the runtime"),
    ("validate", "compare with eager"),
))
"""The steps around an artifact (:meth:`export_core.exporter.DynamoExporter.export`):
``output`` runs before capture, the others after the backend's stages."""


@dataclass(frozen=True)
class StagePlan:
    """An exporter's ordered stages.

    Attributes:
        backend: the registry key whose workarounds the plan's stages run (``"onnx"``); the
            capture stages run ``"dynamo"``'s.
        stages: every stage, in the order an export runs them.

    Raises:
        ValueError: (at construction) two stages share a name, or a part's numbers are not
            1, 2, 3, ...
    """

    backend: str
    stages: tuple[Stage, ...]

    def __post_init__(self) -> None:
        names = [s.name for s in self.stages]
        if len(set(names)) != len(names):
            raise ValueError(f"stage names repeat in the {self.backend!r} plan: {names}")
        parts: dict[str, list[int]] = {}
        for s in self.stages:
            parts.setdefault(s.part, []).append(s.number)
        for part, numbers in parts.items():
            if sorted(numbers) != list(range(1, len(numbers) + 1)):
                raise ValueError(f"part {part!r} of the {self.backend!r} plan is numbered {numbers}")

    @classmethod
    def for_backend(
        cls,
        backend: str,
        steps: Iterable[tuple[str, str] | tuple[str, str, tuple[str, ...]]],
        *,
        before_capture: Iterable[str] = (),
    ) -> StagePlan:
        """The full plan of a backend exporter: the CLI steps, ``output``, the backend steps
        named in ``before_capture``, the capture stages, the other backend steps, then ``save``,
        ``runtime`` and ``validate``.

        Args:
            backend: the backend's part name and registry key (``"onnx"``).
            steps: ``(name, title[, kinds])`` of the backend's own stages, numbered in this
                order.
            before_capture: names of backend steps that run before the capture (ExecuTorch's
                backend preparation).
        """
        own = _numbered(backend, steps)
        early = set(before_capture)
        output, *after = ARTIFACT_STAGES
        return cls(backend, (
            *CLI_STAGES,
            output,
            *(s for s in own if s.name in early),
            *CAPTURE_STAGES,
            *(s for s in own if s.name not in early),
            *after,
        ))

    def __getitem__(self, name: str) -> Stage:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(f"{name!r} is not a stage of the {self.backend!r} plan ({', '.join(self.names)})")

    def __contains__(self, name: object) -> bool:
        return any(s.name == name for s in self.stages)

    def __iter__(self) -> Iterator[Stage]:
        return iter(self.stages)

    @property
    def names(self) -> tuple[str, ...]:
        """Stage names in run order."""
        return tuple(s.name for s in self.stages)

    def part(self, part: str) -> tuple[Stage, ...]:
        """The stages of one part, by number."""
        return tuple(sorted((s for s in self.stages if s.part == part), key=lambda s: s.number))

    def running(self, kind: str) -> tuple[Stage, ...]:
        """The stages that run workarounds of ``kind``."""
        return tuple(s for s in self.stages if kind in s.runs)

    def as_rows(self) -> list[dict[str, object]]:
        """Every stage as a plain dict (``part``, ``number``, ``name``, ``title``, ``runs``)."""
        return [dict(part=s.part, number=s.number, name=s.name, title=s.title, runs=list(s.runs))
                for s in self.stages]


CLI_PLAN: StagePlan = StagePlan("cli", CLI_STAGES)
"""The CLI steps alone: what the command-line tools time before the backend is imported."""


class StageListener(Protocol):
    """Receives stage events (the CLI draws them on stderr)."""

    def stage_started(self, stage: Stage) -> None: ...

    def stage_finished(self, stage: Stage, seconds: float, ok: bool) -> None: ...


@dataclass(frozen=True)
class StageTiming:
    """One finished stage: its name and wall time in seconds."""

    name: str
    seconds: float


@dataclass
class StageRecorder:
    """Times the stages of one export, in order.

    Attributes:
        plan: the exporter's plan; a stage not declared in it is refused.
        listener: told when each stage starts and ends.
        timings: finished stages, in order.
        current: the stage running now (an error is attributed to it).

    An :class:`~export_core.errors.ExportError` raised inside a stage without a stage of its own
    is given that stage's name.
    """

    plan: StagePlan
    listener: StageListener | None = None
    timings: list[StageTiming] = field(default_factory=list)
    current: str | None = None

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the ``with`` block as stage ``name``.

        Raises:
            KeyError: ``name`` is not a stage of the plan.
        """
        from .errors import ExportError

        declared = self.plan[name]
        outer = self.current
        self.current = name
        if self.listener is not None:
            self.listener.stage_started(declared)
        start = time.perf_counter()
        ok = False
        try:
            yield
            ok = True
        except ExportError as e:
            if e.stage is None:
                e.stage = name
            raise
        finally:
            seconds = time.perf_counter() - start
            self.timings.append(StageTiming(name, round(seconds, 4)))
            if self.listener is not None:
                self.listener.stage_finished(declared, seconds, ok)
            if ok:
                self.current = outer

    def ran(self) -> list[str]:
        """Names of the stages finished so far, in order, each once."""
        return list(dict.fromkeys(t.name for t in self.timings))

    def as_list(self) -> list[dict[str, float | str]]:
        """The report's ``stages``: ``[{"name", "seconds"}]``."""
        return [{"name": t.name, "seconds": t.seconds} for t in self.timings]
