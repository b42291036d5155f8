"""The ``export-onnx`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from export_core.cli import base_parser, run_export, workarounds_command
from export_core.progress import RichStageListener

from .exporter import OnnxConfig, OnnxExporter
from .stages import BACKEND

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """``export-onnx [MODEL] [-o OUT] [--task T] [--static] [--opset N] [--no-validate]``
    (``export-onnx workarounds`` lists the workarounds)."""
    p = base_parser(
        "export-onnx",
        "Export a Hugging Face model directory (default: the embedded all-MiniLM-L6-v2) to ONNX "
        "and validate it in ONNX Runtime against eager PyTorch.",
        "model.onnx",
    )
    p.add_argument("--opset", type=int, metavar="N", help="ONNX opset version (default: torch.onnx's)")
    p.add_argument("--no-optimize", dest="optimize", action="store_false",
                   help="skip the onnxscript optimizer")
    return p


def _make(args: argparse.Namespace, listener: RichStageListener, **common: Any) -> OnnxExporter:
    config = OnnxConfig(opset=args.opset, optimize=args.optimize, **common)
    return OnnxExporter(config, listener=listener)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0 only when export and validation passed).

    ``export-onnx workarounds [--markdown]`` prints the registered workarounds instead.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    listed = workarounds_command(argv, "export-onnx", BACKEND)
    if listed is not None:
        return listed
    args = build_parser().parse_args(argv)
    return run_export(
        args, prog="export-onnx", make_exporter=_make,
        version_packages=OnnxExporter.version_packages,
        quiet_loggers=("torch.onnx", "onnxscript", "onnx_ir"),
    )


if __name__ == "__main__":
    sys.exit(main())
