"""export-core: the shared core of the exporters.

Registries of workarounds (patches, FX node fixes, FX program fixes), reversible patching,
pytree registration of ``transformers`` caches and outputs, dynamic shapes, the
:class:`DynamoExporter` capture, example-input building, validation against eager, and the JSON
report. Backends live in ``export-onnx`` and ``export-executorch``.
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
from .exporter import CaptureResult, DynamoConfig, DynamoExporter, ExportResult
from .fixes import apply_fx_node_fixes, apply_fx_program_fixes
from .patching import EXPORT_LOCK, PatchSession, apply_patches
from .registry import describe, register_fx_node_fix, register_fx_program_fix, register_patch

__version__ = "0.1.0"

__all__ = [
    "CaptureError",
    "CaptureResult",
    "DynamoConfig",
    "DynamoExporter",
    "EXPORT_LOCK",
    "ExportError",
    "ExportResult",
    "FixError",
    "InputError",
    "LoadError",
    "LoweringError",
    "OutputError",
    "PatchError",
    "PatchSession",
    "RuntimeLoadError",
    "TranslationError",
    "ValidationError",
    "apply_fx_node_fixes",
    "apply_fx_program_fixes",
    "apply_patches",
    "describe",
    "register_fx_node_fix",
    "register_fx_program_fix",
    "register_patch",
]
