"""export-executorch: export PyTorch and Hugging Face models to ExecuTorch ``.pte`` programs
(XNNPACK, portable kernels, CUDA), validated in the ExecuTorch runtime.

``export_executorch.export(model, inputs, output=...)`` is the one-call API;
:class:`ExecutorchExporter` and :class:`ExecutorchConfig` sit underneath; ``export-executorch`` is
the command.
"""

from .api import export
from .backends import BACKENDS, BackendPreparation
from .bounds import DEFAULT_MAX_BATCH, DEFAULT_MAX_IMAGE_SIZE, DEFAULT_MAX_SEQ
from .exporter import ExecutorchConfig, ExecutorchExporter, ExecutorchLowered
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
]
