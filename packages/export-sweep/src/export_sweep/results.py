"""The results file of the zoo build and the sweep: one reader, one writer.

Both write ``{"versions": {...}, "results": {model_type: record}, ...}`` as indented JSON, after
every finished job, through a temporary file so an interrupted run never leaves half a file.
"""

from __future__ import annotations

import copy
import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = [
    "VERSION_DISTRIBUTIONS",
    "ResultsMergeError",
    "load_results",
    "merge_results",
    "versions",
    "write_results",
]

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


class ResultsMergeError(ValueError):
    """Results files that cannot be merged: different versions, or one backend in two files."""


def merge_results(first: dict[str, Any], *others: dict[str, Any]) -> dict[str, Any]:
    """One results data from sweeps of different backends over the same versions.

    ``first`` (the main sweep) keeps its records, build results and wall time; each of
    ``others`` (a sweep of further backends, e.g. ``executorch-portable``) adds its backends'
    records, peak memory and worker seconds to the same model types. A type only ``others``
    recorded is added whole. The wall time of every file is kept per file under
    ``"wall_seconds_by_file"`` (``[{"backends": [...], "seconds": s, "workers": n}]``).

    Args:
        first: the main results data (not modified).
        others: results data of further backends (not modified).

    Returns:
        The merged data.

    Raises:
        ResultsMergeError: the files were measured with different versions, or two files
            recorded the same backend for one model type.
    """
    merged = copy.deepcopy(first)
    results: dict[str, Any] = merged.setdefault("results", {})
    walls = []
    for data in (first, *others):
        names = sorted({b for rec in data.get("results", {}).values()
                        for b in rec.get("backends", {})})
        walls.append({"backends": names, "seconds": data.get("wall_seconds"),
                      "workers": data.get("workers")})
    for data in others:
        if data.get("versions") != first.get("versions"):
            raise ResultsMergeError(
                f"results measured with different versions: {first.get('versions')} and "
                f"{data.get('versions')}"
            )
        for model_type, rec in data.get("results", {}).items():
            if model_type not in results:
                results[model_type] = copy.deepcopy(rec)
                continue
            into = results[model_type]
            both = set(into.get("backends", {})) & set(rec.get("backends", {}))
            if both:
                raise ResultsMergeError(
                    f"{model_type}: backend(s) {', '.join(sorted(both))} recorded in two files"
                )
            into.setdefault("backends", {}).update(copy.deepcopy(rec.get("backends", {})))
            into.setdefault("peak_rss_mb", {}).update(rec.get("peak_rss_mb", {}))
            if rec.get("worker_seconds"):
                into["worker_seconds"] = round(
                    float(into.get("worker_seconds") or 0.0) + rec["worker_seconds"], 3
                )
    merged["wall_seconds_by_file"] = walls
    return merged


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
