"""The JSON export report written next to every artifact (``export_report.json``).

Its keys are a contract other tools rely on (see DESIGN.md): ``status``, ``stage``, ``task``,
``inputs``, ``outputs``, ``stages``, ``patches``, ``fixes``, ``validation``, ``versions``,
``error``. Backends may add keys of their own.
"""

from __future__ import annotations

import json
import os
import platform
import tempfile
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

__all__ = ["ExportReport", "package_versions", "atomic_write_bytes", "REPORT_NAME"]

REPORT_NAME = "export_report.json"


def package_versions(*extra: str) -> dict[str, str | None]:
    """Installed versions of python, torch, transformers, export-core and ``extra`` packages."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("torch", "transformers", "export-core", *extra):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename,
    so a reader never sees a half-written file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass
class ExportReport:
    """Everything one export did, as the contract's JSON report."""

    task: str | None = None
    status: str = "failed"
    stage: str | None = None
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)
    patches: dict[str, list[str]] = field(default_factory=lambda: {"installed": [], "fired": []})
    fixes: dict[str, list[str]] = field(default_factory=lambda: {"applied": []})
    validation: dict[str, Any] | None = None
    versions: dict[str, str | None] = field(default_factory=dict)
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        d = {
            "status": self.status,
            "stage": self.stage,
            "task": self.task,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "stages": self.stages,
            "patches": self.patches,
            "fixes": self.fixes,
            "validation": self.validation if self.validation is not None else {
                "status": "not_run", "passed": False, "checks": []},
            "versions": self.versions,
            "error": self.error,
        }
        d.update(self.extra)
        return d

    def write(self, directory: Path, name: str = REPORT_NAME) -> Path:
        """Write the report as ``name`` (``export_report.json``) into ``directory`` atomically;
        returns its path."""
        path = Path(directory) / name
        atomic_write_bytes(path, (json.dumps(self.as_dict(), indent=2, default=str) + "\n").encode())
        return path
