"""The ``export-executorch`` command.

Importing this module, parsing the options and refusing bad ones import no torch; the exporter is
imported once the model directory and the output directory have been checked.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from export_core.cli import base_parser, main_flow, positive_int, positive_mib

from .backend_names import ARTIFACT_PATTERNS, BACKENDS, DEFAULT_BACKEND, VERSION_PACKAGES
from .stages import BACKEND

if TYPE_CHECKING:
    from export_core.progress import RichStageListener

    from .exporter import ExecutorchExporter

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """``export-executorch [MODEL] [-o OUT] [--backend xnnpack|portable|cuda] [--static]
    [--no-validate] [--max-batch N] [--max-seq N] [--max-image-size N]
    [--max-audio-samples N] [--max-frames N] [--max-artifact-mb MB] [--max-arena-mb MB]``."""
    p = base_parser(
        "export-executorch",
        "Export a Hugging Face model directory (default: the embedded all-MiniLM-L6-v2) to an "
        "ExecuTorch program and validate it in the ExecuTorch runtime against eager PyTorch.",
        "model.pte",
    )
    p.add_argument("--backend", choices=BACKENDS, default=DEFAULT_BACKEND,
                   help="xnnpack: CPU, XNNPACK delegate (default); portable: CPU, portable "
                   "kernels only; cuda: bfloat16 on a CUDA GPU")
    p.add_argument("--max-seq", type=positive_int, metavar="N",
                   help="longest sequence the program accepts (default: the config's position "
                   "limit, at most 512; a larger N than the model accepts is lowered to its "
                   "limit, with a warning)")
    p.add_argument("--max-image-size", type=positive_int, metavar="N",
                   help="largest image height / width the program accepts (default: the "
                   "config's image_size, else 224)")
    p.add_argument("--max-audio-samples", type=positive_int, metavar="N",
                   help="longest waveform (input_values) the program accepts, in samples "
                   "(default: 1 s at the config's sampling_rate, else 16000)")
    p.add_argument("--max-frames", type=positive_int, metavar="N",
                   help="most video frames (axis 1 of a 5-d pixel input) the program accepts "
                   "(default: the config's num_frames / frames_per_clip, else 64)")
    p.add_argument("--max-arena-mb", type=positive_mib, metavar="MB",
                   help="refuse, after memory planning and before the save, a program whose "
                   "planned activation arena exceeds MB mebibytes (default: no limit)")
    return p


def _make(args: argparse.Namespace, listener: RichStageListener, **common: Any) -> ExecutorchExporter:
    from .exporter import ExecutorchConfig, ExecutorchExporter

    config = ExecutorchConfig(
        backend=args.backend,
        max_batch=args.max_batch,
        max_seq=args.max_seq,
        max_image_size=args.max_image_size,
        max_audio_samples=args.max_audio_samples,
        max_frames=args.max_frames,
        max_arena_bytes=args.max_arena_mb,
        **common,
    )
    return ExecutorchExporter(config, listener=listener)


def _generator(directory: Path) -> Any:
    from .generation import ExecutorchGenerator

    return ExecutorchGenerator(directory)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0 only when export and validation passed; 1 failed;
    2 usage; 130 / 143 interrupted by SIGINT / SIGTERM).

    ``export-executorch workarounds [--markdown]`` prints the registered workarounds instead;
    ``export-executorch generate OUT --prompt TEXT`` generates text from a ``-with-past`` export.
    """
    return main_flow(
        argv, prog="export-executorch", backend=BACKEND, build_parser=build_parser,
        make_exporter=_make, artifact_patterns=ARTIFACT_PATTERNS,
        version_packages=VERSION_PACKAGES, quiet_loggers=("executorch",),
        make_generator=_generator,
    )


if __name__ == "__main__":
    sys.exit(main())
