"""export-core: the shared core of the exporters.

One registry of workarounds of every kind (patches, FX node and program fixes, and the kinds
backends add), each with its stage; stage plans; reversible patching; pytree registration of
``transformers`` caches and outputs; dynamic shapes; the :class:`DynamoExporter` capture;
example-input building; validation against eager; and the JSON report. The core names no
backend: backends register themselves (entry-point group ``export_core.backends``).
"""

from . import workarounds as _workarounds  # noqa: F401  (registers the capture-level patches)
from .errors import (
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

__version__ = "0.1.0"

__all__ = [
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
