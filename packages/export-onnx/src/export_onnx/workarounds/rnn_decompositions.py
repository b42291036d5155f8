"""ONNX patch: ``torch.onnx``'s decomposition of a program with an LSTM runs under torch's
``while_loop`` LSTM decomposition.

The capture keeps ``aten.lstm.input`` with a symbolic time length
(:mod:`export_core.workarounds.rnn_while_loop`). ``torch.onnx.export`` decomposes the program
again before translation, and re-tracing the kept node computes its shapes with the default
decomposition, which unrolls over the example's time steps and guards ``Eq(time, example)``:
the time axis becomes a constant and ONNX Runtime rejects every other length. Under the
``while_loop`` registration the shapes stay symbolic, and the node (which torchlib implements)
becomes an ONNX ``LSTM`` with a dynamic sequence axis.

Source: https://github.com/pytorch/pytorch/issues/115092
"""

from __future__ import annotations

from typing import Any

from export_core.patching import PatchSession
from export_core.registry import register_patch
from export_core.workarounds.rnn_while_loop import under_rnn_while_loop

from ..stages import BACKEND

__all__ = ["DECOMPOSE_TARGET", "rnn_decompositions_while_loop"]

DECOMPOSE_TARGET = "torch.onnx._internal.exporter._fx_passes.decompose_with_registry"
"""``torch.onnx``'s decomposition of the program it is given (before translation)."""


@register_patch(
    BACKEND,
    DECOMPOSE_TARGET,
    stage="onnx_patches",
    reason="torch.onnx decomposes the program again; re-tracing a kept aten.lstm node with "
    "the default (unrolled) decomposition pins its time axis to the example's length; it runs "
    "under torch's while_loop LSTM decomposition",
    upstream="https://github.com/pytorch/pytorch/issues/115092",
)
def rnn_decompositions_while_loop(original: Any, session: PatchSession) -> Any:
    """Replace ``decompose_with_registry(program, registry) -> ExportedProgram`` with the same
    call made under :func:`~export_core.workarounds.rnn_while_loop.rnn_while_loop_decompositions`
    when ``program`` calls ``aten.lstm.input`` (marked fired then).

    Source: https://github.com/pytorch/pytorch/issues/115092
    """
    return under_rnn_while_loop(original, session, f"{BACKEND}:{DECOMPOSE_TARGET}")
