"""export-executorch: export PyTorch and Hugging Face models to ExecuTorch ``.pte`` programs
(XNNPACK, portable kernels, CUDA), validated in the ExecuTorch runtime.

``export_executorch.export(model, inputs, output=...)`` is the one-call API;
:class:`ExecutorchExporter` and :class:`ExecutorchConfig` sit underneath; ``export-executorch`` is
the command.

The names are imported on first access (PEP 562), so ``export-executorch --help`` and usage
errors answer without importing torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from export_core.lazy import LazyExports

from .backend_names import BACKENDS

if TYPE_CHECKING:
    from .api import export
    from .backends import BackendPreparation
    from .bounds import DEFAULT_MAX_BATCH, DEFAULT_MAX_IMAGE_SIZE, DEFAULT_MAX_SEQ
    from .exporter import ExecutorchConfig, ExecutorchExporter, ExecutorchLowered
    from .generation import ExecutorchGenerator, generate
    from .runner import ExecutorchRunner
    from .stages import EXECUTORCH_STAGES

__version__ = "0.1.0"

__all__ = [
    "export",
    "BACKENDS",
    "BackendPreparation",
    "DEFAULT_MAX_BATCH",
    "DEFAULT_MAX_IMAGE_SIZE",
    "DEFAULT_MAX_SEQ",
    "EXECUTORCH_STAGES",
    "ExecutorchConfig",
    "ExecutorchLowered",
    "ExecutorchExporter",
    "ExecutorchRunner",
    "ExecutorchGenerator",
    "generate",
]

_LAZY: dict[str, str] = {
    "export": ".api",
    "BackendPreparation": ".backends",
    "DEFAULT_MAX_BATCH": ".bounds",
    "DEFAULT_MAX_IMAGE_SIZE": ".bounds",
    "DEFAULT_MAX_SEQ": ".bounds",
    "EXECUTORCH_STAGES": ".stages",
    "ExecutorchConfig": ".exporter",
    "ExecutorchLowered": ".exporter",
    "ExecutorchExporter": ".exporter",
    "ExecutorchRunner": ".runner",
    "ExecutorchGenerator": ".generation",
    "generate": ".generation",
}


__getattr__, __dir__ = LazyExports(__name__, _LAZY, __all__).hooks()
