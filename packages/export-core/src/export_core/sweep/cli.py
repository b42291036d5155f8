"""Command line of the export sweep (console script ``export-sweep``).

Usage::

    export-sweep --all --backend all -j 2 --out sweep-results.json      # the full sweep
    export-sweep --subset ci --backend all -j 2 --out sweep-results.json
    export-sweep --families bert vit --backend onnx --out results.json
    export-sweep --all --out sweep-results.json --redo bounds timeout   # re-measure those
    export-sweep coverage results.json -o COVERAGE.md
    export-sweep check COVERAGE.md [--families bert vit | --subset ci] [--backend onnx]
                 [--results fresh.json]

A sweep run is resumable: ``(type, backend)`` pairs already in ``--out`` are skipped, except
those whose recorded failure stopped at a stage (or whose status is) given to ``--redo``. SIGTERM or Ctrl-C stops the
workers and keeps every result recorded so far. ``check``
runs a fresh sweep of the families in the committed table (or those given; ``--results`` compares
an existing results file instead) and exits 1, printing the differences, when statuses disagree.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["main"]

_COMMANDS = ("run", "coverage", "check")


def _add_run_options(p: argparse.ArgumentParser, *, out_default: str | None) -> None:
    p.add_argument(
        "--backend",
        choices=("onnx", "executorch", "all"),
        default="all",
        help="backend(s) to export to (default all)",
    )
    p.add_argument("-j", "--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--out", default=out_default, help="results JSON (resumed when present)")
    p.add_argument("--timeout", type=float, default=180.0, help="seconds per export (default 180)")
    p.add_argument("--memory-mb", type=int, default=4096, help="MiB per export (default 4096)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")


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
    _add_run_options(r, out_default="sweep-results.json")
    r.add_argument(
        "--redo", nargs="+", default=(), metavar="STAGE",
        help="also re-run recorded pairs that stopped at these stages or have these statuses "
        "(e.g. bounds timeout, or pass)",
    )

    c = sub.add_parser("coverage", help="write COVERAGE.md from a results file")
    c.add_argument("results", help="results JSON of a sweep")
    c.add_argument("-o", "--output", default="COVERAGE.md", help="Markdown file to write")

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
    return p


def _backends(choice: str | None) -> tuple[str, ...]:
    from export_core.sweep.job import BACKENDS

    return BACKENDS if choice in (None, "all") else (choice,)


def _print_totals(data: dict, types: list[str], backends: tuple[str, ...]) -> None:
    from export_core.sweep.run import STATUSES, totals

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


def _sweep(args: argparse.Namespace, types: list[str], out: str) -> dict:
    from export_core.sweep.run import run_sweep

    return run_sweep(
        types,
        out,
        backends=_backends(args.backend),
        workers=args.jobs,
        memory_mb=args.memory_mb,
        timeout_s=args.timeout,
        progress=not args.quiet,
        redo_stages=tuple(getattr(args, "redo", ()) or ()),
    )


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


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in _COMMANDS and argv[0] not in ("-h", "--help"):
        argv.insert(0, "run")
    args = _parser().parse_args(argv)
    with _exit_on_sigterm():
        return _run_command(args)


def _run_command(args: argparse.Namespace) -> int:
    if args.command is None:
        _parser().print_help()
        return 2

    if args.command == "run":
        from export_core.sweep.subsets import SUBSETS

        if args.subset is not None:
            if args.subset not in SUBSETS:
                print(f"export-sweep: unknown subset {args.subset!r}", file=sys.stderr)
                return 2
            types = list(SUBSETS[args.subset])
        elif args.all:
            from export_core.zoo.catalog import base_model_types

            types = base_model_types()
        else:
            types = list(args.families)
        data = _sweep(args, types, args.out)
        _print_totals(data, types, _backends(args.backend))
        return 0

    if args.command == "coverage":
        from export_core.sweep.coverage import coverage_markdown
        from export_core.sweep.run import load_results
        from export_core.zoo.catalog import base_model_types

        data = load_results(args.results)
        Path(args.output).write_text(coverage_markdown(data, all_types=base_model_types()))
        print(f"wrote {args.output} ({len(data['results'])} model types)", file=sys.stderr)
        return 0

    from export_core.sweep.coverage import compare, parse_coverage
    from export_core.sweep.run import load_results

    committed = parse_coverage(Path(args.coverage).read_text())
    if args.subset is not None:
        from export_core.sweep.subsets import SUBSETS

        if args.subset not in SUBSETS:
            print(f"export-sweep: unknown subset {args.subset!r}", file=sys.stderr)
            return 2
        types = list(SUBSETS[args.subset])
    else:
        types = list(args.families or committed)
    missing = [t for t in types if t not in committed]
    if missing:
        print(f"not in {args.coverage}: {', '.join(missing)}", file=sys.stderr)
        return 2
    table_backends = sorted({b for t in types for b in committed[t]})
    backends = _backends(args.backend) if args.backend else tuple(table_backends)
    if args.results:
        data = load_results(args.results)
    else:
        args.backend = "all" if len(backends) > 1 else backends[0]
        out = args.out or str(Path(tempfile.mkdtemp(prefix="export-sweep-")) / "results.json")
        data = _sweep(args, types, out)
    diffs = compare(committed, data, types, backends)
    if diffs:
        print(f"{len(diffs)} status(es) differ from {args.coverage}:")
        for d in diffs:
            print(f"  {d}")
        return 1
    print(f"{args.coverage}: {len(types)} model types x {len(backends)} backend(s) agree")
    return 0
