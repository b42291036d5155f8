"""ONNX patch: translations of the shape-only ops on complex tensors that TorchLib lacks.

``torch.onnx`` carries a complex tensor ``(d0, ..., dk)`` as a real one ``(d0, ..., dk, 2)``
(real and imaginary parts on a trailing axis) and dispatches a node with complex inputs only to
functions registered as complex. TorchLib has complex functions for ``squeeze.dim``,
``transpose``, ``permute``, ``view``, ``slice``, ``cat`` and arithmetic, but none for
``unsqueeze``, ``squeeze.dims`` (``prims.squeeze`` once decomposed), ``select.int`` or
``expand``, so rotary embeddings written with
complex numbers (DeepSeek-V2, Llama 4: ``freqs_cis.unsqueeze(1)``) and frequency-domain mixing
(``torch.fft.rfft`` → ``spec.unsqueeze(-1)`` → complex ``matmul``) fail at translation: "No ONNX
function found for aten.unsqueeze ... No decompositions registered for the complex-valued
input". ``torch.onnx.export``'s ``custom_translation_table`` registers every entry as real-valued,
so these cannot be given there.

The patch wraps ``torch.onnx``'s dispatcher: where it finds no complex function for one of
these ops, it answers with the function here, which applies the real op to the real
representation with the axes counted on the complex shape (a negative ``dim`` never reaches the
trailing real/imaginary axis). It marks itself fired only when it answers.

Source: https://github.com/pytorch/pytorch/issues/126972
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from onnxscript import opset18 as op
from onnxscript.function_libs.torch_lib.ops.core import aten_expand
from onnxscript.onnx_types import TensorType

from export_core.patching import MARKS_OWN_FIRING, PatchSession
from export_core.registry import register_patch

from ..stages import BACKEND

__all__ = ["COMPLEX_TRANSLATIONS", "complex_shape_ops"]

_TARGET = "torch.onnx._internal.exporter._dispatching.dispatch"
_NAME = f"{BACKEND}:{_TARGET}"


def _axis(dim: int, complex_rank: int, *, new: bool = False) -> int:
    """``dim`` of a complex tensor of rank ``complex_rank`` as an axis of its real form
    (``new``: an axis being inserted, as ``unsqueeze`` counts it)."""
    size = complex_rank + (1 if new else 0)
    return dim + size if dim < 0 else dim


def complex_unsqueeze(self: TensorType, dim: int) -> TensorType:
    """``aten::unsqueeze`` of a complex ``(d0..dk)`` tensor, carried as ``(d0..dk, 2)``."""
    return op.Unsqueeze(self, [_axis(dim, len(self.shape) - 1, new=True)])


def complex_squeeze_dims(self: TensorType, dim: Sequence[int]) -> TensorType:
    """``aten::squeeze.dims`` of a complex tensor (never the trailing real/imaginary axis)."""
    rank = len(self.shape) - 1
    axes = [_axis(d, rank) for d in dim]
    return op.Squeeze(self, axes) if axes else op.Identity(self)


def complex_select(self: TensorType, dim: int, index: int) -> TensorType:
    """``aten::select.int`` of a complex tensor."""
    return op.Gather(self, index, axis=_axis(dim, len(self.shape) - 1))


def complex_expand(self: TensorType, size: Sequence[Any], implicit: bool = False) -> TensorType:
    """``aten::expand`` of a complex tensor: the size with the trailing axis of 2 appended."""
    return aten_expand(self, [*size, 2], implicit=implicit)


COMPLEX_TRANSLATIONS: dict[Any, Callable[..., Any]] = {
    torch.ops.aten.unsqueeze.default: complex_unsqueeze,
    torch.ops.aten.squeeze.dims: complex_squeeze_dims,
    torch.ops.prims.squeeze.default: complex_squeeze_dims,  # squeeze.dims after decomposition
    torch.ops.aten.select.int: complex_select,
    torch.ops.aten.expand.default: complex_expand,
}
"""Op overload -> its translation for complex inputs (real form with a trailing axis of 2)."""


@register_patch(
    BACKEND,
    _TARGET,
    stage="onnx_patches",
    reason="TorchLib has no complex-valued translation of unsqueeze, squeeze.dims, select.int or "
    "expand, and torch.onnx registers custom translations as real-valued only; complex rotary "
    "embeddings and FFT code fail at translation",
    upstream="https://github.com/pytorch/pytorch/issues/126972",
)
def complex_shape_ops(original: Any, session: PatchSession) -> Any:
    """Wrap ``dispatch(node, registry) -> (function, message)``: a complex-valued node of an op
    in :data:`COMPLEX_TRANSLATIONS` that TorchLib cannot translate gets the function here.

    Source: https://github.com/pytorch/pytorch/issues/126972
    """

    def dispatch(node: torch.fx.Node, registry: Any) -> tuple[Callable[..., Any] | None, str]:
        function, message = original(node, registry)
        fallback = COMPLEX_TRANSLATIONS.get(node.target)
        if function is None and fallback is not None and "complex" in message:
            session.mark_fired(_NAME)
            return fallback, "complex translation of export_onnx.workarounds.complex_shape_ops"
        return function, message

    setattr(dispatch, MARKS_OWN_FIRING, True)
    return dispatch
