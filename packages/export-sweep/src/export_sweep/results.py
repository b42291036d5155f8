"""The results file of the zoo build and the sweep: one reader, one writer.

Both write ``{"versions": {...}, "results": {model_type: record}, ...}`` as indented JSON, after
every finished job, through a temporary file so an interrupted run never leaves half a file.
"""

from __future__ import annotations

import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["VERSION_DISTRIBUTIONS", "load_results", "versions", "write_results"]

VERSION_DISTRIBUTIONS: tuple[str, ...] = (
    "torch",
    "transformers",
    "onnxscript",
    "onnxruntime",
    "executorch",
)
"""Distributions whose versions a results file records."""


def load_results(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a results file; an absent file reads as empty results.

    Args:
        path: the JSON file.

    Returns:
        The data, with at least ``"versions"`` and ``"results"`` keys.
    """
    p = Path(path)
    if not p.is_file():
        return {"versions": {}, "results": {}}
    data = json.loads(p.read_text())
    data.setdefault("versions", {})
    data.setdefault("results", {})
    return data


def write_results(path: str | os.PathLike[str], data: dict[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically (through a temporary file beside it).

    Args:
        path: the JSON file; its parent directories are created.
        data: the results data.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(p)


def versions() -> dict[str, str]:
    """Installed versions of :data:`VERSION_DISTRIBUTIONS` (``"not installed"`` when absent)."""
    out: dict[str, str] = {}
    for dist in VERSION_DISTRIBUTIONS:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out
