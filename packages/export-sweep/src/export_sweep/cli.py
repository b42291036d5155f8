"""Command line of the zoo and the export sweep (console script ``export-sweep``).

Usage::

    export-sweep --all --backend all -j 2 --out sweep-results.json      # the full sweep
    export-sweep --subset ci --backend all -j 2 --out sweep-results.json
    export-sweep --families bert vit --backend onnx --out results.json
    export-sweep --all --out sweep-results.json --redo bounds timeout   # re-measure those
    export-sweep --subset ci --out results.json --ray auto              # as Ray tasks
    export-sweep --all --mode generate --backend onnx --out generate-results.json
    export-sweep coverage results.json --generate generate-results.json -o COVERAGE.md
    export-sweep check COVERAGE.md [--families bert vit | --subset ci] [--backend onnx]
                 [--results fresh.json]
    export-sweep zoo build --all -j 2 --out zoo-results.json            # = python -m export_sweep.zoo
    export-sweep zoo list | report zoo-results.json | save llama ./tiny-llama

A sweep run is resumable: ``(type, backend)`` pairs already in ``--out`` are skipped, except
those whose recorded failure stopped at a stage (or whose status is) given to ``--redo``. Each
model type is one job (built once, exported to each backend) with a deadline of ``--timeout``
per backend. ``--mode generate`` sweeps the types with a generative head instead: each exports
its prefill and decode graphs with the cache and must generate eager ``generate()``'s greedy
tokens (:mod:`export_sweep.sweep.generate`). SIGTERM or Ctrl-C stops the workers and keeps every result recorded so far.
``check`` runs a fresh sweep of the families in the committed table (or those given;
``--results`` compares an existing results file instead) and exits 1, printing the differences,
when statuses disagree.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from export_sweep.errors import SweepError

__all__ = ["main"]

_COMMANDS = ("run", "coverage", "check", "zoo")


# ── Options shared by the sweep and the zoo build ───────────────────────────────────────────────
def _add_worker_options(
    p: argparse.ArgumentParser,
    *,
    out_default: str | None,
    timeout_s: float,
    memory_mb: int,
    what: str,
) -> None:
    p.add_argument("-j", "--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--out", default=out_default, help="results JSON (resumed when present)")
    p.add_argument(
        "--timeout", type=float, default=timeout_s,
        help=f"seconds per {what} (default {timeout_s:.0f})",
    )
    p.add_argument(
        "--memory-mb", type=int, default=memory_mb, help=f"MiB per {what} (default {memory_mb})"
    )


_TIMEOUT_S = {"export": 180.0, "generate": 600.0}
"""Default ``--timeout`` per backend of each sweep mode, in seconds."""


def _add_run_options(p: argparse.ArgumentParser, *, out_default: str | None) -> None:
    from export_sweep.sweep.backends import ALL_BACKENDS, BACKENDS

    p.add_argument(
        "--backend",
        choices=(*ALL_BACKENDS, "all"),
        default="all",
        help=f"backend to export to; all (default): {', '.join(BACKENDS)}",
    )
    _add_worker_options(p, out_default=out_default, timeout_s=180.0, memory_mb=4096, what="export")
    p.set_defaults(timeout=None)
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument(
        "--ray", metavar="ADDRESS",
        help="run the jobs as Ray tasks on this cluster (auto, host:port; needs export-sweep[ray])",
    )


def _add_zoo_commands(zoo: argparse.ArgumentParser) -> None:
    sub = zoo.add_subparsers(dest="zoo_command", required=True)
    b = sub.add_parser("build", help="build tiny models in isolated workers (resumable)")
    b.add_argument("types", nargs="*", help="model types (default with --all: every base type)")
    b.add_argument("--all", action="store_true", help="every type of MODEL_MAPPING_NAMES")
    b.add_argument(
        "--include-config-only",
        action="store_true",
        help="with --all, also types of CONFIG_MAPPING_NAMES that have a head class",
    )
    _add_worker_options(
        b, out_default="zoo-results.json", timeout_s=180.0, memory_mb=3072, what="model"
    )
    b.add_argument("--retry-failed", action="store_true", help="rebuild recorded failures")
    b.add_argument("--save", action="store_true", help="also write the cached model directories")

    ls = sub.add_parser("list", help="list model types with modality and class")
    ls.add_argument("--include-config-only", action="store_true")
    ls.add_argument("--json", action="store_true")

    r = sub.add_parser("report", help="summarize a zoo results file")
    r.add_argument("results")

    s = sub.add_parser("save", help="write one tiny model directory")
    s.add_argument("model_type")
    s.add_argument("directory", nargs="?")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="export-sweep",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command")
    r = sub.add_parser("run", help="export model types in isolated workers (the default command)")
    which = r.add_mutually_exclusive_group(required=True)
    which.add_argument("--families", nargs="+", metavar="TYPE", help="model types to sweep")
    which.add_argument("--subset", help="a named subset of model types (ci)")
    which.add_argument(
        "--all", action="store_true", help="every base model type of the installed transformers"
    )
    _add_run_options(r, out_default=None)
    r.add_argument(
        "--mode", choices=tuple(_TIMEOUT_S), default="export",
        help="export (default): the cache-less export of every type, validated at two shapes "
        "(results in sweep-results.json); generate: the types with a generative head, exported "
        "with their cache and checked by generation (generate-results.json; --timeout default "
        f"{_TIMEOUT_S['generate']:.0f} s)",
    )
    r.add_argument(
        "--redo", nargs="+", default=(), metavar="STAGE",
        help="also re-run recorded pairs that stopped at these stages or have these statuses "
        "(e.g. bounds timeout, or pass)",
    )

    c = sub.add_parser("coverage", help="write COVERAGE.md from results files")
    c.add_argument(
        "results", nargs="+",
        help="results JSON of a sweep; further files add their backends' columns (e.g. a "
        "--backend executorch-portable sweep of the same versions)",
    )
    c.add_argument("-o", "--output", default="COVERAGE.md", help="Markdown file to write")
    c.add_argument("--generate", metavar="RESULTS",
                   help="results JSON of a generate-mode sweep: adds the generation section")

    k = sub.add_parser("check", help="fail when a fresh sweep disagrees with COVERAGE.md")
    k.add_argument("coverage", help="the committed COVERAGE.md")
    kwhich = k.add_mutually_exclusive_group()
    kwhich.add_argument(
        "--families", nargs="+", metavar="TYPE", help="types to check (default all)"
    )
    kwhich.add_argument("--subset", help="check a named subset of model types (ci)")
    k.add_argument("--results", help="compare this results file instead of sweeping afresh")
    _add_run_options(k, out_default=None)
    k.set_defaults(backend=None)

    z = sub.add_parser(
        "zoo", help="the tiny-model zoo: build, list, report, save (= python -m export_sweep.zoo)"
    )
    _add_zoo_commands(z)
    return p


# ── The sweep ──────────────────────────────────────────────────────────────────────────────────
def _backends(choice: str | None) -> tuple[str, ...]:
    from export_sweep.sweep.backends import BACKENDS

    return BACKENDS if choice in (None, "all") else (choice,)


def _subset(name: str) -> list[str]:
    from export_sweep.sweep.subsets import SUBSETS

    if name not in SUBSETS:
        raise SweepError(f"unknown subset {name!r} (known: {', '.join(SUBSETS)})")
    return list(SUBSETS[name])


def _known_types(types: list[str]) -> list[str]:
    """``types`` unchanged when transformers knows every one of them.

    Raises:
        SweepError: a type is no ``config.model_type`` of the installed transformers (a typo
            would otherwise be recorded as a model type the zoo cannot build); the message
            suggests the closest known names.
    """
    import difflib

    from export_core.modality import auto_mappings

    known = auto_mappings()["CONFIG_MAPPING_NAMES"]
    unknown = [t for t in types if t not in known]
    if unknown:
        hints = []
        for t in unknown:
            close = difflib.get_close_matches(t, list(known), n=2)
            hints.append(f"{t} (did you mean {' or '.join(close)}?)" if close else t)
        raise SweepError(f"unknown model type(s): {', '.join(hints)}")
    return types


def _print_totals(data: dict, types: list[str], backends: tuple[str, ...]) -> None:
    from export_sweep.sweep.run import STATUSES, totals

    tot = totals(data, types)
    print(f"{'modality':16s} {'types':>5s} {'built':>5s}  " + "  ".join(backends))
    grand: dict[str, dict[str, int]] = {b: {} for b in backends}
    for mod, row in tot.items():
        cells = []
        for b in backends:
            counts = row.get(b, {})
            for s, n in counts.items():
                grand[b][s] = grand[b].get(s, 0) + n
            cells.append(" ".join(f"{s}={counts[s]}" for s in STATUSES if counts.get(s)))
        print(f"{mod:16s} {row['types']:5d} {row['built']:5d}  " + "  |  ".join(cells))
    for b in backends:
        line = " ".join(f"{s}={grand[b][s]}" for s in STATUSES if grand[b].get(s))
        secs = [
            r["backends"][b]["seconds"]
            for t in types
            if (r := data["results"].get(t))
            and b in r.get("backends", {})
            and r["backends"][b].get("seconds")
        ]
        mean = sum(secs) / len(secs) if secs else 0.0
        print(f"total {b}: {line}  (mean export {mean:.1f} s over {len(secs)})")


def _sweep(
    args: argparse.Namespace, types: list[str], out: str, backends: Sequence[str] | None = None
) -> dict:
    from export_sweep.sweep.run import JOB_TARGET, run_sweep

    mode = getattr(args, "mode", "export")
    target = JOB_TARGET
    if mode == "generate":
        from export_sweep.sweep.generate import GENERATE_TARGET

        target = GENERATE_TARGET
    return run_sweep(
        types,
        out,
        backends=tuple(backends) if backends is not None else _backends(args.backend),
        workers=args.jobs,
        memory_mb=args.memory_mb,
        timeout_s=args.timeout if args.timeout is not None else _TIMEOUT_S[mode],
        progress=not args.quiet,
        redo_stages=tuple(getattr(args, "redo", ()) or ()),
        ray_address=args.ray,
        job_target=target,
    )


def _run(args: argparse.Namespace) -> int:
    if args.subset is not None:
        types = _subset(args.subset)
    elif args.all:
        from export_sweep.zoo.catalog import base_model_types

        types = base_model_types()
    else:
        types = _known_types(list(args.families))
    if args.mode == "generate":
        from export_sweep.sweep.generate import generative_types

        given, types = types, generative_types(types)
        if not types:
            raise SweepError(f"none of {', '.join(given[:5])}{' ...' if len(given) > 5 else ''} "
                             "has a generative head (causal LM, seq2seq LM or speech seq2seq)")
    out = args.out or f"{'generate' if args.mode == 'generate' else 'sweep'}-results.json"
    data = _sweep(args, types, out)
    _print_totals(data, types, _backends(args.backend))
    return 0


def _coverage(args: argparse.Namespace) -> int:
    from export_sweep.results import ResultsMergeError, load_results, merge_results
    from export_sweep.sweep.coverage import coverage_markdown
    from export_sweep.zoo.catalog import base_model_types

    for path in args.results:
        if not Path(path).is_file():
            raise SweepError(f"no results file {path}")
    try:
        data = merge_results(*(load_results(p) for p in args.results))
    except ResultsMergeError as e:
        raise SweepError(f"cannot merge {' and '.join(args.results)}: {e}") from None
    generation = None
    if args.generate:
        if not Path(args.generate).is_file():
            raise SweepError(f"--generate: no results file {args.generate}")
        generation = load_results(args.generate)
    text = coverage_markdown(data, all_types=base_model_types(), generation=generation)
    Path(args.output).write_text(text)
    print(f"wrote {args.output} ({len(data['results'])} model types)", file=sys.stderr)
    return 0


def _check(args: argparse.Namespace) -> int:
    from export_sweep.results import load_results
    from export_sweep.sweep.coverage import compare, parse_coverage

    committed = parse_coverage(Path(args.coverage).read_text())
    types = (_subset(args.subset) if args.subset is not None
             else _known_types(list(args.families)) if args.families else list(committed))
    missing = [t for t in types if t not in committed]
    if missing:
        raise SweepError(f"not in {args.coverage}: {', '.join(missing)}")
    from export_sweep.sweep.backends import BACKENDS

    # By default the default backends the table has (a portable column is checked when named).
    table_backends = {b for t in types for b in committed[t]}
    backends = (_backends(args.backend) if args.backend
                else tuple(b for b in BACKENDS if b in table_backends))
    if args.results:
        data = load_results(args.results)
    else:
        out = args.out or str(Path(tempfile.mkdtemp(prefix="export-sweep-")) / "results.json")
        data = _sweep(args, types, out, backends)
    diffs = compare(committed, data, types, backends)
    if diffs:
        print(f"{len(diffs)} status(es) differ from {args.coverage}:")
        for d in diffs:
            print(f"  {d}")
        return 1
    print(f"{args.coverage}: {len(types)} model types x {len(backends)} backend(s) agree")
    return 0


# ── The zoo ─────────────────────────────────────────────────────────────────────────────────────
def _zoo(args: argparse.Namespace) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.zoo_command == "list":
        from export_sweep.zoo.catalog import catalog

        entries = catalog(include_config_only=args.include_config_only)
        if args.json:
            rows: list[dict[str, Any]] = [
                {**e.__dict__, "modality": str(e.modality)} for e in entries
            ]
            print(json.dumps(rows, indent=1))
        else:
            for e in entries:
                print(f"{e.model_type:40s} {e.modality!s:16s} {e.model_class}")
        return 0
    if args.zoo_command == "report":
        from export_sweep.results import load_results
        from export_sweep.zoo.batch import summarize

        print(summarize(load_results(args.results)).format())
        return 0
    if args.zoo_command == "save":
        from export_sweep.zoo.build import save_tiny_model

        print(save_tiny_model(args.model_type, args.directory))
        return 0

    from export_sweep.zoo.batch import build_zoo, summarize
    from export_sweep.zoo.catalog import base_model_types, catalog

    types = list(args.types)
    if args.all:
        types += base_model_types()
        if args.include_config_only:
            types += [
                e.model_type
                for e in catalog(include_config_only=True)
                if not e.in_base_mapping and e.model_class
            ]
    if not types:
        raise SweepError("nothing to build: name model types or pass --all")
    data = build_zoo(
        types,
        args.out,
        workers=args.jobs,
        memory_mb=args.memory_mb,
        timeout_s=args.timeout,
        retry_failed=args.retry_failed,
        save=args.save,
    )
    print(summarize(data, types).format(), file=sys.stderr)
    print(f"wall time of this run: {data.get('wall_seconds_last_run', 0):.0f} s", file=sys.stderr)
    return 0


# ── Entry point ────────────────────────────────────────────────────────────────────────────────
@contextmanager
def _exit_on_sigterm() -> Iterator[None]:
    """Turn SIGTERM into ``SystemExit`` (status 143) while the command runs, so the worker
    pool's cleanup stops its workers; the previous handler is restored afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


_HANDLERS = {"run": _run, "coverage": _coverage, "check": _check, "zoo": _zoo}


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``export-sweep``; returns the process exit code.

    Args:
        argv: the arguments (default ``sys.argv[1:]``); without a command, ``run`` is implied.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in _COMMANDS and argv[0] not in ("-h", "--help"):
        argv.insert(0, "run")
    args = _parser().parse_args(argv)
    if args.command is None:
        _parser().print_help()
        return 2
    with _exit_on_sigterm():
        try:
            return _HANDLERS[args.command](args)
        except SweepError as e:
            print(f"export-sweep: {e}", file=sys.stderr)
            return 2
