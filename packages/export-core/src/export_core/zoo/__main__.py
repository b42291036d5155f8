"""Command line of the tiny-model zoo.

Usage::

    python -m export_core.zoo build --all -j 2 --out zoo-results.json
    python -m export_core.zoo build bert gpt2 --out results.json --retry-failed
    python -m export_core.zoo list [--include-config-only]
    python -m export_core.zoo report zoo-results.json
    python -m export_core.zoo save llama ./tiny-llama
"""

from __future__ import annotations

import argparse
import json
import os
import sys

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m export_core.zoo",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build", help="build tiny models in isolated workers (resumable)")
    b.add_argument("types", nargs="*", help="model types (default with --all: every base type)")
    b.add_argument("--all", action="store_true", help="every type of MODEL_MAPPING_NAMES")
    b.add_argument(
        "--include-config-only",
        action="store_true",
        help="with --all, also types of CONFIG_MAPPING_NAMES that have a head class",
    )
    b.add_argument("-j", "--jobs", type=int, default=2, help="worker processes (default 2)")
    b.add_argument("--out", default="zoo-results.json", help="results JSON (resumed if present)")
    b.add_argument("--timeout", type=float, default=180.0, help="seconds per model (default 180)")
    b.add_argument("--memory-mb", type=int, default=3072, help="MiB per model (default 3072)")
    b.add_argument("--retry-failed", action="store_true", help="rebuild recorded failures")
    b.add_argument("--save", action="store_true", help="also write the cached model directories")

    ls = sub.add_parser("list", help="list model types with modality and class")
    ls.add_argument("--include-config-only", action="store_true")
    ls.add_argument("--json", action="store_true")

    r = sub.add_parser("report", help="summarize a results file")
    r.add_argument("results")

    s = sub.add_parser("save", help="write one tiny model directory")
    s.add_argument("model_type")
    s.add_argument("directory", nargs="?")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = _parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.command == "list":
        from export_core.zoo.catalog import catalog

        entries = catalog(include_config_only=args.include_config_only)
        if args.json:
            print(
                json.dumps([{**e.__dict__, "modality": str(e.modality)} for e in entries], indent=1)
            )
        else:
            for e in entries:
                print(f"{e.model_type:40s} {e.modality!s:16s} {e.model_class}")
        return 0
    if args.command == "report":
        from export_core.zoo.sweep import load_results, summarize

        print(summarize(load_results(args.results)).format())
        return 0
    if args.command == "save":
        from export_core.zoo.build import save_tiny_model

        print(save_tiny_model(args.model_type, args.directory))
        return 0

    from export_core.zoo.catalog import base_model_types, catalog
    from export_core.zoo.sweep import build_zoo, summarize

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
        print("nothing to build: name model types or pass --all", file=sys.stderr)
        return 2
    data = build_zoo(
        types,
        args.out,
        workers=args.jobs,
        memory_mb=args.memory_mb,
        timeout_s=args.timeout,
        retry_failed=args.retry_failed,
        save=args.save,
    )
    summary = summarize(data, types)
    print(summary.format(), file=sys.stderr)
    print(f"wall time of this run: {data.get('wall_seconds_last_run', 0):.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
