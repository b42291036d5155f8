"""FX program fix: ``nn.LSTM`` as a ``scan`` over the time axis.

The capture keeps ``aten.lstm.input`` whole, with a symbolic time length (the core patch
``rnn_as_while_loop``); the edge lowering then decomposes it with PyTorch's default
decomposition, a Python loop over the time steps of the example input. The loop unrolls into one
cell per example step, so the time axis is pinned to the example's length: the ``.pte`` either
rejects every other length or, worse, returns an output whose time axis has the example's length
for any input (parakeet / Nemotron RNN-T prediction networks: a silently wrong artifact).
PyTorch's own export-friendly LSTM decomposition (``torch.export._patches``) uses
``while_loop``, which the ExecuTorch emitter does not emit.

The fix decomposes the op with a ``torch.ops.higher_order.scan`` over the time axis per layer
and direction, which ExecuTorch emits as a loop: the input projection of every step is one
matrix product before the scan, the recurrent projection and gates run in the scan body. Every
other node is left as it was. The loop's buffers are sized to the dynamic batch by
:mod:`.scan_buffers`. ``nn.GRU`` is left alone: the capture already pins its time axis (see
``export_core.workarounds.rnn_while_loop``), and no ``transformers`` model uses one.

The scan body never views a carry: the emitter binds the body's carry placeholders to the
loop's carry buffers, but a view of a placeholder keeps the placeholder's own planned memory,
which nothing writes (the recurrent term would read zeros after the first step). The carries
are kept ``(batch, features)`` so that ``linear`` lowers to ``addmm`` without a reshape.

The placeholders' ``meta["val"]`` lose ``requires_grad`` afterwards: the edge lowering re-traces
the program with them, and a ``scan`` traced under autograd fails on a symbolic time axis
(``'SymInt' object has no attribute 'unsqueeze'`` in its output stacking).

Source: https://github.com/pytorch/executorch/issues/5176
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch._decomp.decompositions import _rnn_helper, gather_params, lstm_cell

from export_core.fixes import FixContext, FixResult, decompose_called
from export_core.registry import register_fx_program_fix
from export_core.workarounds.recurrence_scan import scan_steps

from ..stages import BACKEND

__all__ = ["lstm_as_scan", "lstm_time_scan"]

_aten = torch.ops.aten
_UPSTREAM = "https://github.com/pytorch/executorch/issues/5176"


def _scan_lstm_layer(
    inp: torch.Tensor, hidden: tuple[torch.Tensor, torch.Tensor], params: Sequence[torch.Tensor],
    has_biases: bool, reverse: bool = False,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """One LSTM layer and direction; ``inp`` ``(time, batch, input)``, ``hidden`` ``(h0, c0)``
    ``(batch, proj)`` / ``(batch, hidden)``; returns ``(time, batch, proj)`` and ``(h_n, c_n)``."""
    ih_weight, hh_weight = params[0], params[1]
    ih_bias = params[2] if has_biases else None
    hh_bias = params[3] if has_biases else None
    hr_weight = params[4] if len(params) == 5 else params[2] if len(params) == 3 else None
    steps = F.linear(inp, ih_weight, ih_bias)
    steps = steps.flip(0) if reverse else steps

    def step(carry: tuple[torch.Tensor, torch.Tensor], x: torch.Tensor):
        # carries stay (batch, features): no view of a carry in the body (see module docs)
        h, c = lstm_cell(x, carry[0], carry[1], hh_weight, hh_bias, hr_weight, chunk_dim=1)
        return (h, c), h.clone()

    (h_n, c_n), out = scan_steps(step, (hidden[0], hidden[1]), steps)
    out = out.flip(0) if reverse else out
    return out, (h_n, c_n)


def lstm_as_scan(
    input: torch.Tensor, hx: Sequence[torch.Tensor], params: Sequence[torch.Tensor],
    has_biases: bool, num_layers: int, dropout: float, train: bool, bidirectional: bool,
    batch_first: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``aten.lstm.input`` with a ``scan`` over time per layer and direction.

    Args:
        input: ``(time, batch, input_size)``, or ``(batch, time, input_size)`` when
            ``batch_first``.
        hx: ``(h0, c0)``, ``(layers * directions, batch, proj_size or hidden_size)`` and
            ``(layers * directions, batch, hidden_size)``.
        params: the flat weights, per layer and direction ``w_ih, w_hh[, b_ih, b_hh][, w_hr]``.
        has_biases, num_layers, dropout, train, bidirectional, batch_first: as ``nn.LSTM``
            (dropout applies in training only, as the default decomposition).

    Returns:
        ``(output, h_n, c_n)`` equal to ``torch.lstm``; the time axis stays symbolic.

    Source: https://github.com/pytorch/executorch/issues/5176
    """
    if len(hx) != 2:
        raise ValueError(f"lstm expects two hidden states (h0, c0), got {len(hx)}")
    grouped = gather_params(params, has_biases, hx[0].size(2) != hx[1].size(2))
    out, finals = _rnn_helper(input, list(zip(hx[0], hx[1])), grouped, has_biases, num_layers,
                              dropout, train, bidirectional, batch_first, _scan_lstm_layer)
    h_n, c_n = zip(*finals)
    return out, torch.stack(h_n, 0), torch.stack(c_n, 0)


_DECOMPOSITIONS = {_aten.lstm.input: lstm_as_scan}


def _detach_placeholder_values(program: torch.export.ExportedProgram) -> None:
    """Drop ``requires_grad`` from the placeholders' example values (parameters keep theirs on
    the state dict): the edge lowering's re-trace would otherwise trace the scan under autograd."""
    for node in program.graph.nodes:
        if node.op != "placeholder":
            continue
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor) and val.requires_grad:
            node.meta["val"] = val.detach()


@register_fx_program_fix(
    BACKEND,
    reason="the edge lowering decomposes lstm into one cell per time step of the example input, "
    "which pins the time axis (the program rejects other lengths or returns the example's "
    "length for any input); it becomes a scan over time, which ExecuTorch emits as a loop",
    upstream=_UPSTREAM,
)
def lstm_time_scan(program: torch.export.ExportedProgram, context: FixContext) -> FixResult:
    """Decompose the program's ``aten.lstm.input`` calls into scans over time.

    Args:
        program: the captured ``ExportedProgram``.
        context: the export's context (unused).

    Returns:
        ``FixResult(new program, modified=True, details=[op names])`` when the program calls
        one of the ops, else ``FixResult(program, False)``.

    Source: https://github.com/pytorch/executorch/issues/5176
    """
    del context
    result = decompose_called(program, _DECOMPOSITIONS)
    if result.modified:
        _detach_placeholder_values(result.program)
    return result
