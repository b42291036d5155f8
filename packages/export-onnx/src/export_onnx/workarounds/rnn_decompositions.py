"""ONNX patches: ``torch.onnx``'s decomposition and type promotion of a program with an LSTM run
under torch's ``while_loop`` LSTM decomposition.

The capture keeps ``aten.lstm.input`` with a symbolic time length
(:mod:`export_core.workarounds.rnn_while_loop`). ``torch.onnx.export`` decomposes the program
again before translation, and re-tracing the kept node computes its shapes with the default
decomposition, which unrolls over the example's time steps and guards ``Eq(time, example)``:
the time axis becomes a constant and ONNX Runtime rejects every other length. Under the
``while_loop`` registration the shapes stay symbolic, and the node (which torchlib implements)
becomes an ONNX ``LSTM`` with a dynamic sequence axis. The type-promotion pass that follows
runs the decomposed graph once more on fake tensors, the kept node included; under the default
decomposition that run pins an LSTM whose time axis is an input's own dimension (Parakeet's
RNN-T / TDT prediction network over ``decoder_input_ids``), so it runs under the same
registration.

Source: https://github.com/pytorch/pytorch/issues/115092
"""

from __future__ import annotations

from typing import Any

from export_core.patching import PatchSession
from export_core.registry import register_patch
from export_core.workarounds.rnn_while_loop import under_rnn_while_loop

from ..stages import BACKEND

__all__ = ["DECOMPOSE_TARGET", "TYPE_PROMOTION_TARGET", "rnn_decompositions_while_loop",
           "rnn_type_promotion_while_loop"]

DECOMPOSE_TARGET = "torch.onnx._internal.exporter._fx_passes.decompose_with_registry"
"""``torch.onnx``'s decomposition of the program it is given (before translation)."""

TYPE_PROMOTION_TARGET = "torch.onnx._internal.exporter._fx_passes.insert_type_promotion_nodes"
"""``torch.onnx``'s type-promotion pass over the decomposed graph (a fake-tensor run)."""


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


@register_patch(
    BACKEND,
    TYPE_PROMOTION_TARGET,
    stage="onnx_patches",
    reason="torch.onnx's type-promotion pass runs the decomposed graph on fake tensors; a kept "
    "aten.lstm node run with the default (unrolled) decomposition pins a time axis that is an "
    "input's dimension to the example's length; it runs under torch's while_loop decomposition",
    upstream="https://github.com/pytorch/pytorch/issues/115092",
)
def rnn_type_promotion_while_loop(original: Any, session: PatchSession) -> Any:
    """Replace ``insert_type_promotion_nodes(graph_module) -> None`` with the same call made
    under :func:`~export_core.workarounds.rnn_while_loop.rnn_while_loop_decompositions` when
    ``graph_module`` calls ``aten.lstm.input`` (marked fired then).

    Source: https://github.com/pytorch/pytorch/issues/115092
    """
    return under_rnn_while_loop(original, session, f"{BACKEND}:{TYPE_PROMOTION_TARGET}")
