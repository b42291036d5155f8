"""Where the zoo keeps its cache (built model directories, the workers' bytecode)."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["zoo_cache_root"]


def zoo_cache_root() -> Path:
    """Root of the zoo cache: ``$EXPORT_SWEEP_ZOO_CACHE``, else the older
    ``$EXPORT_CORE_ZOO_CACHE``, else ``~/.cache/export_sweep/zoo``."""
    root = os.environ.get("EXPORT_SWEEP_ZOO_CACHE") or os.environ.get("EXPORT_CORE_ZOO_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "export_sweep" / "zoo"
