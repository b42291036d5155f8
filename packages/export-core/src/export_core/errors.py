"""The exporter's error hierarchy: one root, one subclass per stage.

Every message names the stage, the op or input at fault, and the next step. The CLI prints
``str(error)`` as its one line on stderr, so messages are single-line.
"""

from __future__ import annotations

__all__ = [
    "ExportError",
    "InputError",
    "LoadError",
    "CaptureError",
    "PatchError",
    "FixError",
    "TranslationError",
    "LoweringError",
    "RuntimeLoadError",
    "ValidationError",
    "OutputError",
    "BudgetError",
    "first_line",
]


class ExportError(Exception):
    """Root of every error the exporters raise.

    Attributes:
        stage: the name of the stage that failed (``"load"``, ``"capture"``, ``"translate"``, ...),
            one of the exporter's declared stages (:mod:`export_core.stages`). ``None`` until
            the stage it was raised in names it (:class:`~export_core.stages.StageRecorder`
            does so).
    """

    stage: str | None = None

    def __init__(self, message: str, *, stage: str | None = None) -> None:
        super().__init__(" ".join(str(message).split()))
        if stage is not None:
            self.stage = stage

    def __str__(self) -> str:
        return f"[{self.stage or 'export'}] {super().__str__()}"


class InputError(ExportError):
    """Bad user input: an unknown task or backend, inputs that do not fit the model."""

    stage = "inputs"


class LoadError(ExportError):
    """The model directory is missing, unreadable, lacks ``config.json`` or has corrupt weights."""

    stage = "load"


class CaptureError(ExportError):
    """``torch.export`` could not trace the model into an ``ExportedProgram``."""

    stage = "capture"


class PatchError(ExportError):
    """A registered patch could not be resolved, installed or restored (stage: the patch stage
    that installed it)."""


class FixError(ExportError):
    """A registered fix (FX node or program fix, ONNX IR fix) raised while rewriting (stage: the
    fix stage that ran it)."""


class TranslationError(ExportError):
    """The ``ExportedProgram`` could not be translated to ONNX."""

    stage = "translate"


class LoweringError(ExportError):
    """The ``ExportedProgram`` could not be lowered to an ExecuTorch program."""

    stage = "lower"


class RuntimeLoadError(ExportError):
    """The artifact was written but its runtime (ONNX Runtime, ExecuTorch) cannot load or run it."""

    stage = "runtime"


class ValidationError(ExportError):
    """The artifact's outputs differ from eager PyTorch beyond tolerance."""

    stage = "validate"


class OutputError(ExportError):
    """The output directory cannot be created or written."""

    stage = "save"


class BudgetError(ExportError):
    """The artifact, or the memory it plans, would exceed a size budget the caller set
    (``max_artifact_bytes``, ``max_arena_bytes``); raised before the expensive stage, with the
    numbers (stage: the stage that refused it)."""


def first_line(error: BaseException, limit: int = 300) -> str:
    """The root cause of ``error`` as one short line: ``Type: first line of message``."""
    root = error
    while root.__cause__ is not None and not isinstance(root, ExportError):
        root = root.__cause__
    text = str(root).strip()
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    out = f"{type(root).__name__}: {line}" if not isinstance(root, ExportError) else line
    return out if len(out) <= limit else out[: limit - 3] + "..."
