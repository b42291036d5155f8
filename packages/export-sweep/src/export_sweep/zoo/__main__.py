"""``python -m export_sweep.zoo ARGS``: the same as ``export-sweep zoo ARGS``.

Usage::

    python -m export_sweep.zoo build --all -j 2 --out zoo-results.json
    python -m export_sweep.zoo build bert gpt2 --out results.json --retry-failed
    python -m export_sweep.zoo list [--include-config-only]
    python -m export_sweep.zoo report zoo-results.json
    python -m export_sweep.zoo save llama ./tiny-llama
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run ``export-sweep zoo`` with ``argv``; returns the process exit code."""
    from export_sweep.cli import main as cli_main

    return cli_main(["zoo", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
