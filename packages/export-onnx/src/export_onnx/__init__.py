"""export-onnx: export PyTorch and Hugging Face models to ONNX, validated in ONNX Runtime.

``export_onnx.export(model, inputs, output=...)`` is the one-call API; :class:`OnnxExporter`
and :class:`OnnxConfig` sit underneath; ``export-onnx`` is the command.
"""

from .api import export
from .exporter import OnnxConfig, OnnxExporter, OnnxLowered
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
    "export",
    "register_ir_fix",
    "register_onnx_translation",
]
