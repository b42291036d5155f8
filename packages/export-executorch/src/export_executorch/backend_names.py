"""The ExecuTorch backend names and artifact file names, without importing torch (the command
line lists the backends in ``--help`` and needs the file names before any heavy import)."""

from __future__ import annotations

__all__ = ["ARTIFACT_PATTERNS", "BACKENDS", "DEFAULT_BACKEND", "PROGRAM_NAME", "VERSION_PACKAGES"]

BACKENDS: tuple[str, ...] = ("xnnpack", "portable", "cuda")
"""Backend names, in the order the CLI lists them; each has a preparation function in
:data:`export_executorch.backends._BACKEND_PREPARE` (a test checks they agree)."""

DEFAULT_BACKEND = "xnnpack"
"""The backend used when none is given."""

PROGRAM_NAME = "model.pte"
"""File name of the program in the output directory."""

ARTIFACT_PATTERNS: tuple[str, ...] = (PROGRAM_NAME, "*.ptd")
"""The files an ExecuTorch export writes into its output directory (glob patterns)."""

VERSION_PACKAGES: tuple[str, ...] = ("export-executorch", "executorch")
"""The packages whose versions an ExecuTorch export's report records."""
