"""``python -m export_sweep``: the same as the ``export-sweep`` console script."""

from __future__ import annotations

import sys

from export_sweep.cli import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
