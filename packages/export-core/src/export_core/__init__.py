"""export-core: the shared core of the exporters.

One registry of workarounds of every kind (patches, FX node and program fixes, and the kinds
backends add), each with its stage; stage plans; reversible patching; pytree registration of
``transformers`` caches and outputs; dynamic shapes; the :class:`DynamoExporter` capture;
example-input building; validation against eager; and the JSON report. The core names no
backend: backends register themselves (entry-point group ``export_core.backends``).
"""

from typing import TYPE_CHECKING, Any

from .errors import (
    BudgetError,
    CaptureError,
    ExportError,
    FixError,
    InputError,
    LoadError,
    LoweringError,
    OutputError,
    PatchError,
    RuntimeLoadError,
    TranslationError,
    ValidationError,
)
from .patching import EXPORT_LOCK, PatchSession, apply_patches
from .registry import (
    Workaround,
    WorkaroundStatus,
    describe,
    register_fx_node_fix,
    register_fx_program_fix,
    register_patch,
    register_stage_plan,
    register_workaround,
    workaround_table,
)
from .stages import Stage, StagePlan

if TYPE_CHECKING:  # imported on first use (PEP 562): ``import export_core`` does not load torch
    from .exporter import (
        CaptureResult,
        DynamoConfig,
        DynamoExporter,
        ExportResult,
        ExportRun,
        Lowered,
        Prepared,
    )
    from .fixes import (
        FixContext,
        FixesApplied,
        FixResult,
        apply_fx_node_fixes,
        apply_fx_program_fixes,
        apply_program_fixes,
    )

_LAZY: dict[str, str] = {
    **dict.fromkeys(("CaptureResult", "DynamoConfig", "DynamoExporter", "ExportResult",
                     "ExportRun", "Lowered", "Prepared"), ".exporter"),
    **dict.fromkeys(("FixContext", "FixesApplied", "FixResult", "apply_fx_node_fixes",
                     "apply_fx_program_fixes", "apply_program_fixes"), ".fixes"),
}
"""Names whose modules import torch, imported on first access so that the command-line tools
answer ``--help`` and usage errors without loading torch."""


def __getattr__(name: str) -> Any:
    """Import the torch-dependent names of :data:`_LAZY` on first access (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    importlib.import_module(".workarounds", __name__)  # registers the capture-level patches
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.1.0"

__all__ = [
    "BudgetError",
    "CaptureError",
    "CaptureResult",
    "DynamoConfig",
    "DynamoExporter",
    "EXPORT_LOCK",
    "ExportError",
    "ExportResult",
    "ExportRun",
    "FixContext",
    "FixError",
    "FixResult",
    "FixesApplied",
    "Lowered",
    "Prepared",
    "InputError",
    "LoadError",
    "LoweringError",
    "OutputError",
    "PatchError",
    "PatchSession",
    "RuntimeLoadError",
    "Stage",
    "StagePlan",
    "TranslationError",
    "ValidationError",
    "Workaround",
    "WorkaroundStatus",
    "apply_fx_node_fixes",
    "apply_fx_program_fixes",
    "apply_patches",
    "apply_program_fixes",
    "describe",
    "register_fx_node_fix",
    "register_fx_program_fix",
    "register_patch",
    "register_stage_plan",
    "register_workaround",
    "workaround_table",
]
