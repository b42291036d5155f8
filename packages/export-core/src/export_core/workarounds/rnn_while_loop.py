"""``nn.LSTM`` captured with a symbolic time length, not the example's (an unrolled loop).

``torch.export`` keeps ``aten.lstm.input`` as a node but computes their
output shapes with the default decomposition, which iterates over the input's time axis in
Python (``for inp in precomputed_input``): the loop unrolls for the example's length and the
node's output gets that length as a constant *without a guard*. The capture succeeds, the time
axis stays an input dimension, and every later use of the output is sized for the example
(EnCodec, WavTokenizer: ONNX Runtime ``Reshape`` / broadcast failures at another length;
ExecuTorch returns the example's length). torch ships a ``while_loop`` form of the
decomposition (``torch.export._patches``) that ``torch.onnx.export`` itself enables for
dynamic shapes; our capture calls ``torch.export`` directly, so it never got it.

The patch wraps ``torch.export.export``: when the module holds an ``nn.LSTM``, the trace runs with that form registered (:func:`rnn_while_loop_decompositions`, as
``torch.onnx.export`` does), so the ``aten.lstm.input`` node gets a symbolic time length. Without an LSTM it is the plain call and does not count as fired. A
backend that decomposes the program again must do it under the same registration
(:func:`holds_rnn` tells when): re-tracing a kept node computes its shapes the same way (ONNX's
patch ``rnn_decompositions_while_loop``; the node then becomes an ONNX ``LSTM``).

``nn.GRU`` is left alone: torch's ``while_loop`` GRU form still ends with the time axis pinned in
the ONNX export (measured), so it would only add a loop to a program that fails anyway.

Upstream: https://github.com/pytorch/pytorch/issues/115092 (LSTM with dynamic shapes needs a
loop construct); the while-loop decompositions are torch's answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import torch

from ..patching import MARKS_OWN_FIRING, PatchSession
from ..registry import register_patch

__all__ = ["EXPORT_TARGET", "RNN_OPS", "holds_rnn", "rnn_as_while_loop",
           "rnn_while_loop_decompositions", "under_rnn_while_loop"]

EXPORT_TARGET = "torch.export.export"
"""The capture's call into torch."""

RNN_OPS = (torch.ops.aten.lstm.input,)
"""The recurrent ops decomposed as a ``while_loop`` (torch also has one for ``gru.input``)."""


@contextmanager
def rnn_while_loop_decompositions() -> Iterator[None]:
    """Register torch's ``while_loop`` decomposition of :data:`RNN_OPS` for the block.

    torch's context managers swap the ops' Python kernels but leave each op's dispatch cache,
    so a process that already dispatched an op (an earlier export) would keep the kernel it
    cached: the caches are cleared on entry and on exit.
    """
    from torch.export._patches import register_lstm_while_loop_decomposition

    def clear() -> None:
        for op in RNN_OPS:
            op._dispatch_cache.clear()

    with ExitStack() as stack:
        stack.callback(clear)
        stack.enter_context(register_lstm_while_loop_decomposition())
        clear()
        yield


def holds_rnn(obj: Any) -> bool:
    """Whether ``obj`` (an ``nn.Module``, a ``GraphModule`` or an ``ExportedProgram``) holds an
    ``nn.LSTM`` or calls one of :data:`RNN_OPS` (in any submodule of its graph)."""
    graph_module = obj if isinstance(obj, torch.fx.GraphModule) else getattr(
        obj, "graph_module", None)
    if graph_module is None:
        return isinstance(obj, torch.nn.Module) and any(
            isinstance(m, torch.nn.LSTM) for m in obj.modules())
    return any(node.op == "call_function" and node.target in RNN_OPS
               for gm in graph_module.modules() if hasattr(gm, "graph")
               for node in gm.graph.nodes)


def under_rnn_while_loop(original: Any, session: PatchSession, name: str) -> Any:
    """Wrap ``original(obj, *args, **kwargs)`` so that it runs under
    :func:`rnn_while_loop_decompositions` when ``obj`` :func:`holds_rnn` (and marks patch
    ``name`` fired in ``session`` then); otherwise it is the plain call. The replacement every
    patch of this kind installs (the capture's and a backend's re-decomposition)."""

    def wrapper(obj: Any, *args: Any, **kwargs: Any) -> Any:
        with ExitStack() as stack:
            if holds_rnn(obj):
                session.mark_fired(name)
                stack.enter_context(rnn_while_loop_decompositions())
            return original(obj, *args, **kwargs)

    setattr(wrapper, MARKS_OWN_FIRING, True)
    return wrapper


@register_patch(
    "dynamo",
    EXPORT_TARGET,
    reason=(
        "the default LSTM decomposition unrolls a Python loop over the time axis: "
        "torch.export gives the node the example's length as a constant without a guard "
        "(silently pinned); the capture of a model with an LSTM runs with torch's "
        "while_loop decomposition, as torch.onnx.export does"
    ),
    upstream="https://github.com/pytorch/pytorch/issues/115092",
)
def rnn_as_while_loop(original: Any, session: PatchSession) -> Any:
    """Replace ``torch.export.export(mod, args, kwargs=None, ...)`` with the same call, made
    while torch's ``while_loop`` decomposition of ``aten.lstm.input`` is registered when
    ``mod`` holds an ``nn.LSTM`` (marked fired then).

    Shapes: an LSTM ``input`` ``(time, batch, features)`` (or ``(batch, time, features)``
    with ``batch_first``) keeps a symbolic ``time`` in the program's output shapes.

    Source: https://github.com/pytorch/pytorch/issues/115092
    """
    return under_rnn_while_loop(original, session, f"dynamo:{EXPORT_TARGET}")
