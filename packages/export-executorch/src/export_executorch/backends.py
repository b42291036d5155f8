"""Stage 1 of an ExecuTorch export: backend preparation (device, dtype, partitioner, configs).

Each backend name maps, in :data:`_BACKEND_PREPARE`, to a function that checks the backend can be
used here and returns a :class:`BackendPreparation`: what the exporter needs to lower for it
(partitioners, edge and emit configs) and to run it (the dtype float inputs are cast to, the
runtime backend that must be registered, tolerances for the comparison with eager).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from export_core.errors import InputError, LoweringError

from .backend_names import BACKENDS

__all__ = [
    "BACKENDS",
    "BackendPreparation",
    "check_backend",
    "prepare_backend",
    "prepare_for_cuda",
    "prepare_for_portable",
    "prepare_for_xnnpack",
]


@dataclass(frozen=True)
class BackendPreparation:
    """What one backend needs from the exporter.

    Attributes:
        name: the backend name (``"xnnpack"``, ``"portable"``, ``"cuda"``).
        registry_key: the workaround registry key (``"executorch.<name>"``); its parent
            ``"executorch"`` applies too (``export_core.registry.backend_chain``).
        partitioners: partitioner instances given to ``to_edge_transform_and_lower``; empty for
            portable kernels only.
        dtype: floating dtype the model and float inputs are cast to before capture.
        device: where the delegate runs (``"cpu"`` or ``"cuda"``).
        compile_config: ``EdgeCompileConfig`` for ``to_edge_transform_and_lower`` (``None``:
            ExecuTorch's default).
        backend_config: ``ExecutorchBackendConfig`` for ``to_executorch`` (``None``: default).
        decompositions: extra ``run_decompositions`` table applied before lowering.
        runtime_backend: name the ExecuTorch runtime registers the delegate under
            (``"XnnpackBackend"``); ``None`` when no delegate is used.
        external_data: the backend writes named data (weights) beside the ``.pte`` as ``.ptd``.
        atol, rtol: tolerances of the comparison with eager (float32 eager as reference).
    """

    name: str
    registry_key: str
    partitioners: tuple[Any, ...] = ()
    dtype: torch.dtype = torch.float32
    device: str = "cpu"
    compile_config: Any = None
    backend_config: Any = None
    decompositions: dict[Any, Any] = field(default_factory=dict)
    runtime_backend: str | None = None
    external_data: bool = False
    atol: float = 1e-4
    rtol: float = 1e-3


def prepare_for_xnnpack() -> BackendPreparation:
    """XNNPACK: float32 on CPU, the ops XNNPACK supports delegated by ``XnnpackPartitioner``;
    the rest runs on ExecuTorch's portable / optimized CPU kernels."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    return BackendPreparation(
        name="xnnpack",
        registry_key="executorch.xnnpack",
        partitioners=(XnnpackPartitioner(),),
        runtime_backend="XnnpackBackend",
    )


def prepare_for_portable() -> BackendPreparation:
    """Portable: float32 on CPU, no delegate; every op runs on ExecuTorch's portable kernels."""
    return BackendPreparation(name="portable", registry_key="executorch.portable")


def prepare_for_cuda() -> BackendPreparation:
    """CUDA: bfloat16, the whole graph compiled by AOTInductor (``CudaPartitioner``), weights
    written beside the program as a ``.ptd`` file.

    The settings follow ExecuTorch's CUDA examples (``examples/models/dinov2/export_dinov2.py``):
    IR validity checks and dim-order ops off, ``conv1d`` decomposed to ``conv2d``, delegate
    segments extracted, graph inputs not planned.

    Raises:
        LoweringError: (stage ``prepare``) no CUDA device is visible to torch, or ExecuTorch was
            installed without its CUDA backend.
    """
    if not torch.cuda.is_available():
        raise LoweringError(
            "the cuda backend needs a CUDA GPU and none is visible to torch "
            "(torch.cuda.is_available() is False); use --backend xnnpack or portable on this machine",
            stage="prepare",
        )
    try:
        from executorch.backends.cuda.cuda_backend import CudaBackend
        from executorch.backends.cuda.cuda_partitioner import CudaPartitioner
        from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig
        from executorch.exir.passes import MemoryPlanningPass
        from torch._inductor.decomposition import conv1d_to_conv2d
    except ImportError as e:
        raise LoweringError(
            f"this ExecuTorch installation has no CUDA backend: {e}", stage="prepare"
        ) from e
    specs = [CudaBackend.generate_method_name_compile_spec("forward")]
    return BackendPreparation(
        name="cuda",
        registry_key="executorch.cuda",
        partitioners=(CudaPartitioner(specs),),
        dtype=torch.bfloat16,
        device="cuda",
        compile_config=EdgeCompileConfig(_check_ir_validity=False, _skip_dim_order=True),
        backend_config=ExecutorchBackendConfig(
            extract_delegate_segments=True,
            memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False),
            do_quant_fusion_and_const_prop=True,
        ),
        decompositions={torch.ops.aten.conv1d.default: conv1d_to_conv2d},
        runtime_backend="CudaBackend",
        external_data=True,
        atol=5e-2,
        rtol=5e-2,
    )


_BACKEND_PREPARE: dict[str, Callable[[], BackendPreparation]] = {
    "xnnpack": prepare_for_xnnpack,
    "portable": prepare_for_portable,
    "cuda": prepare_for_cuda,
}
"""Backend name -> preparation function, in the order the CLI lists them."""

if tuple(_BACKEND_PREPARE) != BACKENDS:  # pragma: no cover - a programming error
    raise RuntimeError(f"backend_names.BACKENDS {BACKENDS} != the preparations {tuple(_BACKEND_PREPARE)}")


def check_backend(name: str) -> str:
    """Return ``name`` if it is a known backend.

    Raises:
        InputError: ``name`` is not one of :data:`BACKENDS`.
    """
    if name not in _BACKEND_PREPARE:
        raise InputError(f"unknown ExecuTorch backend {name!r}; choose one of {', '.join(BACKENDS)}")
    return name


def prepare_backend(name: str) -> BackendPreparation:
    """Run the preparation function registered for backend ``name``.

    Raises:
        InputError: unknown backend.
        LoweringError: (stage ``prepare``) the backend cannot be used on this machine.
    """
    return _BACKEND_PREPARE[check_backend(name)]()
