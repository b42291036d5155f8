"""export-onnx: export PyTorch and Hugging Face models to ONNX, validated in ONNX Runtime.

``export_onnx.export(model, inputs, output=...)`` is the one-call API; :class:`OnnxExporter`
and :class:`OnnxConfig` sit underneath; ``export-onnx`` is the command.

The names are imported on first access (PEP 562), so ``export-onnx --help`` and usage errors
answer without importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from export_core.lazy import LazyExports

if TYPE_CHECKING:
    from .api import export
    from .exporter import OnnxConfig, OnnxExporter, OnnxLowered
    from .generation import OnnxGenerator, generate
    from .ir_fixes import register_ir_fix
    from .runner import OrtRunner
    from .stages import ONNX_STAGES
    from .translations import register_onnx_translation

__version__ = "0.1.0"

__all__ = [
    "ONNX_STAGES",
    "OnnxConfig",
    "OnnxExporter",
    "OnnxLowered",
    "OrtRunner",
    "OnnxGenerator",
    "export",
    "generate",
    "register_ir_fix",
    "register_onnx_translation",
]

_LAZY: dict[str, str] = {
    "export": ".api",
    "generate": ".generation",
    "OnnxGenerator": ".generation",
    "OnnxConfig": ".exporter",
    "OnnxExporter": ".exporter",
    "OnnxLowered": ".exporter",
    "register_ir_fix": ".ir_fixes",
    "OrtRunner": ".runner",
    "ONNX_STAGES": ".stages",
    "register_onnx_translation": ".translations",
}


__getattr__, __dir__ = LazyExports(__name__, _LAZY, __all__).hooks()
