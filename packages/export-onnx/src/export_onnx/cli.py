"""The ``export-onnx`` command.

Importing this module, parsing the options and refusing bad ones import no torch; the exporter is
imported once the model directory and the output directory have been checked.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from export_core.cli import base_parser, main_flow

from .artifacts import ARTIFACT_PATTERNS, VERSION_PACKAGES
from .opsets import MAX_OPSET, MIN_OPSET, SUPPORTED_OPSETS
from .stages import BACKEND

if TYPE_CHECKING:
    from export_core.progress import RichStageListener

    from .exporter import OnnxExporter

__all__ = ["main", "build_parser"]


def _opset(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value not in SUPPORTED_OPSETS:
        raise argparse.ArgumentTypeError(
            f"opset {value} is not supported; choose one from {MIN_OPSET} to {MAX_OPSET}"
        )
    return value


def build_parser() -> argparse.ArgumentParser:
    """``export-onnx [MODEL] [-o OUT] [--task T] [--static] [--opset N] [--no-validate]``
    (``export-onnx workarounds`` lists the workarounds)."""
    p = base_parser(
        "export-onnx",
        "Export a Hugging Face model directory (default: the embedded all-MiniLM-L6-v2) to ONNX "
        "and validate it in ONNX Runtime against eager PyTorch.",
        "model.onnx",
    )
    p.add_argument("--opset", type=_opset, metavar="N",
                   help=f"ONNX opset version, {MIN_OPSET} to {MAX_OPSET} (default: torch.onnx's)")
    p.add_argument("--no-optimize", dest="optimize", action="store_false",
                   help="skip the onnxscript optimizer")
    return p


def _make(args: argparse.Namespace, listener: RichStageListener, **common: Any) -> OnnxExporter:
    from .exporter import OnnxConfig, OnnxExporter

    config = OnnxConfig(opset=args.opset, optimize=args.optimize, **common)
    return OnnxExporter(config, listener=listener)


def _generator(directory: Path) -> Any:
    from .generation import OnnxGenerator

    return OnnxGenerator(directory)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0 only when export and validation passed; 1 failed;
    2 usage; 130 / 143 interrupted by SIGINT / SIGTERM).

    ``export-onnx workarounds [--markdown]`` prints the registered workarounds instead;
    ``export-onnx generate OUT --prompt TEXT`` generates text from a ``-with-past`` export.
    """
    return main_flow(
        argv, prog="export-onnx", backend=BACKEND, build_parser=build_parser, make_exporter=_make,
        artifact_patterns=ARTIFACT_PATTERNS, version_packages=VERSION_PACKAGES,
        make_generator=_generator,
        quiet_loggers=("torch.onnx", "onnxscript", "onnx_ir"),
    )


if __name__ == "__main__":
    sys.exit(main())
