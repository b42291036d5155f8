"""What an ONNX export writes and records, without importing torch (the command line needs it
before the exporter is loaded)."""

from __future__ import annotations

__all__ = ["ARTIFACT_PATTERNS", "VERSION_PACKAGES"]

ARTIFACT_PATTERNS: tuple[str, ...] = ("model.onnx", "model.onnx.data")
"""The files an ONNX export writes into its output directory (glob patterns)."""

VERSION_PACKAGES: tuple[str, ...] = ("export-onnx", "onnx", "onnxscript", "onnx-ir", "onnxruntime")
"""The packages whose versions an ONNX export's report records."""
