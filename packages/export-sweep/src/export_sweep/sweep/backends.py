"""The backends the sweep exports to, as one typed table.

The sweep is a QA tool that imports the product: it may name the backend packages here, and only
here. Each :class:`Backend` record says which module to import, which distribution provides it,
how to call its export and which backend-specific options a model class gets (ONNX's
``optimize`` switch for the classes in ``ONNX_DISABLE_OPTIMIZE``). Nothing else in the sweep
branches on a backend's name.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from export_sweep.sweep.skips import SkipEntry, disable_optimize

__all__ = [
    "ALL_BACKENDS",
    "BACKENDS",
    "BACKEND_TABLE",
    "Backend",
    "BackendOptions",
    "EXECUTORCH_ARENA_RESERVE_MB",
    "get_backend",
]

BackendOptions = Callable[[str, Iterable[SkipEntry] | None], dict[str, Any]]
"""``(class_name, optimize_off override) -> export keyword options`` of one backend."""


def _no_options(class_name: str, optimize_off: Iterable[SkipEntry] | None) -> dict[str, Any]:
    return {}


def _portable_options(class_name: str, optimize_off: Iterable[SkipEntry] | None) -> dict[str, Any]:
    """ExecuTorch's portable kernels only (no delegate): ``backend="portable"``."""
    return {"backend": "portable"}


def _onnx_options(class_name: str, optimize_off: Iterable[SkipEntry] | None) -> dict[str, Any]:
    """``optimize=False`` for the classes of ``ONNX_DISABLE_OPTIMIZE`` (an upstream optimizer
    bug each), nothing otherwise."""
    return {"optimize": False} if disable_optimize(class_name, optimize_off) else {}


EXECUTORCH_ARENA_RESERVE_MB = 12288
"""Address space allowed for an ExecuTorch program's memory arena on top of a job's cap (MiB).

Tiny models whose activations grow quadratically with the bounded axes (attention over a 224 px
image or 512 tokens at batch 8, TAPAS's segment reductions) plan arenas of 2-10 GiB; the arena
is one allocation at load, of which validation at the example sizes touches a few MiB."""


@dataclass(frozen=True)
class Backend:
    """One backend of the sweep.

    Attributes:
        name: the key in results files and on the command line (``"onnx"``).
        label: the column heading in COVERAGE.md (``"ONNX"``).
        module: the import name of the backend package (``"export_onnx"``).
        distribution: the distribution that provides it (``"export-onnx"``), named when the
            module is missing.
        function: the export function of ``module``, called as
            ``function(model, inputs, dynamic=True, validate=True, validation_inputs=[...],
            **options)`` and, when it takes a ``capture`` keyword, ``capture=CaptureResult``.
        options: the backend-specific export options for a model class (recorded in the
            result too, e.g. ``"optimize": False``).
        default: swept when no backend is named (``--backend all``); a backend that is not
            is swept only when named, until a full sweep has measured it.
        exporter: the exporter class of ``module`` (``"OnnxExporter"``), built by
            :meth:`make_exporter` for the exports that take an exporter (generation).
        config: its config class (``"OnnxConfig"``); :attr:`options` are its fields.
        reserve_mb: address space the backend's runtime reserves up front when it loads an
            artifact (MiB), added to the job's cap for this backend's export
            (:func:`~export_sweep.zoo.isolate.extra_address_space`): ExecuTorch allocates its
            whole planned memory arena, sized for the dynamic axes' upper bounds (batch 8, 224
            px, 512 tokens by default), when it loads a program; validating at the example
            sizes touches a small part of it.
    """

    name: str
    label: str
    module: str
    distribution: str
    function: str = "export"
    options: BackendOptions = _no_options
    default: bool = True
    exporter: str = ""
    config: str = ""
    reserve_mb: int = 0

    def export_function(self) -> Callable[..., Any]:
        """Import :attr:`module` and return its export function.

        Raises:
            ImportError: the backend package is not installed (or fails to import).
        """
        return getattr(importlib.import_module(self.module), self.function)

    def make_exporter(self, options: dict[str, Any]) -> Any:
        """Import :attr:`module` and build its exporter, configured with ``options`` (the
        :attr:`options` of a model class) and dynamic shapes.

        Raises:
            ImportError: the backend package is not installed (or fails to import).
        """
        module = importlib.import_module(self.module)
        config = getattr(module, self.config)(dynamic=True, **options)
        return getattr(module, self.exporter)(config)

    @staticmethod
    def accepts_capture(function: Callable[..., Any]) -> bool:
        """Whether ``function`` takes a ``capture`` keyword (a shared
        :class:`~export_core.CaptureResult`) instead of capturing the model itself."""
        return _takes_keyword(function, "capture")

    @staticmethod
    def accepts_listener(function: Callable[..., Any]) -> bool:
        """Whether ``function`` takes a ``listener`` keyword (an
        :class:`~export_core.stages.StageListener` told when each export stage starts)."""
        return _takes_keyword(function, "listener")


def _takes_keyword(function: Callable[..., Any], name: str) -> bool:
    """Whether ``function``'s signature has a parameter ``name`` (``False`` when it has no
    signature)."""
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    return name in params


BACKEND_TABLE: tuple[Backend, ...] = (
    Backend("onnx", "ONNX", "export_onnx", "export-onnx", options=_onnx_options,
            exporter="OnnxExporter", config="OnnxConfig"),
    Backend("executorch", "ExecuTorch", "export_executorch", "export-executorch",
            exporter="ExecutorchExporter", config="ExecutorchConfig",
            reserve_mb=EXECUTORCH_ARENA_RESERVE_MB),
    Backend("executorch-portable", "ExecuTorch portable", "export_executorch",
            "export-executorch", options=_portable_options, default=False,
            exporter="ExecutorchExporter", config="ExecutorchConfig",
            reserve_mb=EXECUTORCH_ARENA_RESERVE_MB),
)
"""Every backend the sweep knows, in report order. ``executorch`` is ExecuTorch with the
XNNPACK delegate; ``executorch-portable`` the same program on portable kernels only."""

ALL_BACKENDS: tuple[str, ...] = tuple(b.name for b in BACKEND_TABLE)
"""Every backend name, in report order (``--backend`` accepts each)."""

BACKENDS: tuple[str, ...] = tuple(b.name for b in BACKEND_TABLE if b.default)
"""The backends swept when none is named (``--backend all``), in report order."""


def get_backend(name: str | Backend) -> Backend:
    """The :data:`BACKEND_TABLE` record named ``name`` (a record is returned as is).

    Raises:
        KeyError: unknown backend name.
    """
    if isinstance(name, Backend):
        return name
    for backend in BACKEND_TABLE:
        if backend.name == name:
            return backend
    raise KeyError(f"unknown backend {name!r} (known: {', '.join(BACKENDS)})")
