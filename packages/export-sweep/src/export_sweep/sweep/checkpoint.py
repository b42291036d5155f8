"""What a running sweep job has finished so far, in a small JSON file the parent can read.

A job exports one model type to several backends in one worker. Before each phase it rewrites
its progress file (atomically, through a temporary file and a rename): the shared phase it is in
(``build``, ``capture``), or the backend it is exporting, when that export started and the export
stage it is in (:class:`StageProgress`, the export's stage listener), and every finished
backend's record. When the worker crashes, runs out of memory or overruns its deadline,
the parent reads the file: finished backends keep their records, the running one is recorded as
the failure (naming the stage it hung or died in), and the backends that never started are run
again on their own.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

__all__ = ["JobProgress", "Phase", "StageProgress"]

Phase = Literal["build", "capture", "export", "done"]


@dataclass(frozen=True)
class JobProgress:
    """The state of one sweep job.

    Attributes:
        phase: ``"build"`` (building or loading the model), ``"capture"`` (the shared capture),
            ``"export"`` (exporting to :attr:`running`) or ``"done"``.
        running: the backend being exported in the ``export`` phase, else ``None``.
        started: seconds since the job started when :attr:`running`'s export began.
        finished: ``backend -> record`` of every finished export, in the order they ran.
        model: the type-level fields known so far (``class_name``, ``modality``, ``build``,
            ``capture``).
        stage: the export stage :attr:`running` is in (the exporter's stage name, ``lower``),
            ``None`` before its first stage or when its export reports no stages.
    """

    phase: Phase = "build"
    running: str | None = None
    started: float = 0.0
    finished: dict[str, dict[str, Any]] = field(default_factory=dict)
    model: dict[str, Any] = field(default_factory=dict)
    stage: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON-able form."""
        return {
            "phase": self.phase,
            "running": self.running,
            "started": self.started,
            "stage": self.stage,
            "finished": self.finished,
            "model": self.model,
        }

    @classmethod
    def from_json(cls, data: Any) -> JobProgress:
        """Read :meth:`to_json`'s form; anything else (``None``, a torn file) reads as a job
        still in its ``build`` phase."""
        if not isinstance(data, dict):
            return cls()
        return cls(
            phase=data.get("phase") or "build",
            running=data.get("running"),
            started=float(data.get("started") or 0.0),
            stage=data.get("stage"),
            finished=dict(data.get("finished") or {}),
            model=dict(data.get("model") or {}),
        )

    def write(self, path: str | os.PathLike[str] | None) -> JobProgress:
        """Write to ``path`` atomically (no-op when ``path`` is ``None``); returns ``self``."""
        if path is not None:
            p = Path(path)
            tmp = p.with_name(p.name + ".tmp")
            tmp.write_text(json.dumps(self.to_json()))
            tmp.replace(p)
        return self

    def with_changes(self, **changes: Any) -> JobProgress:
        """A copy with ``changes`` applied (``dataclasses.replace``)."""
        return replace(self, **changes)


@dataclass
class StageProgress:
    """An export's stage listener (``export(..., listener=...)``) that writes the stage each
    export stage starts into the job's progress file, so a timeout or a crash names the stage
    it happened in.

    Attributes:
        progress: the job's progress while one backend exports (phase ``export``).
        path: the progress file (``None``: nothing is written).
    """

    progress: JobProgress
    path: str | os.PathLike[str] | None

    def stage_started(self, stage: Any) -> None:
        """Record ``stage`` (an :class:`export_core.stages.Stage`; its ``name``) as running."""
        self.progress = self.progress.with_changes(stage=getattr(stage, "name", str(stage)))
        self.progress.write(self.path)

    def stage_finished(self, stage: Any, seconds: float, ok: bool) -> None:
        """Nothing: the next stage's start, or the job's next write, replaces the stage."""
