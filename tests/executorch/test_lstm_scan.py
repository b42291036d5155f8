"""The FX program fix ``lstm_time_scan`` and the ExecuTorch patch on ``_Emitter._emit_scan``:
a model holding an ``nn.LSTM`` runs in ExecuTorch at any time length and batch (without the fix
the edge lowering unrolls the LSTM over the example's steps; without the patch the emitted loop
cannot take another batch). Compared with eager in the ExecuTorch runtime at three shapes, batch
1 among them: time-first and batch-first, one and two directions, with a projection, over an
input axis (an RNN-T prediction network), and on real model code (WavTokenizer's encoder)."""

from __future__ import annotations

import pytest
import torch

import export_executorch
from _recurrent import PredictionNetwork, label_ids
from export_core import ExportError
from export_core.registry import withheld
from export_core.workarounds.recurrence_scan import rg_lru_scan
from export_executorch.workarounds.lstm_scan import lstm_as_scan
from export_sweep.zoo.build import build_tiny_model

FIX = "lstm_time_scan"
PATCH = "executorch:executorch.exir.emit._emitter._Emitter._emit_scan"


class _Recurrent(torch.nn.Module):
    """``forward(x)``: ``x`` ``(batch, time, 8)`` (``batch_first``) or ``(time, batch, 8)``
    float32 -> the LSTM's output ``(..., 16 * directions)`` (``proj_size`` when set), and its
    final hidden and cell states ``(layers * directions, batch, 16)``."""

    def __init__(self, batch_first: bool, bidirectional: bool, layers: int = 2,
                 proj_size: int = 0) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lstm = torch.nn.LSTM(8, 16, num_layers=layers, batch_first=batch_first,
                                  bidirectional=bidirectional, proj_size=proj_size)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out, (h_n, c_n) = self.lstm(x)
        return out, h_n, c_n


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("proj_size", [0, 8], ids=["plain", "projected"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["one_way", "two_way"])
def test_decomposition_equals_torch_lstm(bias: bool, proj_size: int, bidirectional: bool) -> None:
    """``lstm_as_scan`` in eager against ``torch.lstm``: three layers, random initial states."""
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(8, 16, num_layers=3, bias=bias, bidirectional=bidirectional,
                         proj_size=proj_size).eval()
    directions = 2 if bidirectional else 1
    x = torch.randn(7, 2, 8)
    h0 = torch.randn(3 * directions, 2, proj_size or 16)
    c0 = torch.randn(3 * directions, 2, 16)
    with torch.no_grad():
        want = torch.lstm(x, (h0, c0), lstm._flat_weights, bias, 3, 0.0, False, bidirectional,
                          False)
        got = lstm_as_scan(x, (h0, c0), lstm._flat_weights, bias, 3, 0.0, False, bidirectional,
                           False)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)


def _shapes(batch_first: bool) -> list[tuple[int, int, int]]:
    """(batch, time) pairs (2, 6), (3, 11), (1, 3) laid out for the layer."""
    pairs = [(2, 6), (3, 11), (1, 3)]
    return [(b, t, 8) if batch_first else (t, b, 8) for b, t in pairs]


def _export(model: torch.nn.Module, shapes: list[tuple[int, ...]]):
    """Export with ``shapes[0]``, validate at every shape; the leading axis is bounded at 16 (a
    time-first layout's 11 steps stand where the batch's default bound is)."""
    g = torch.Generator().manual_seed(0)
    inputs = [(torch.randn(*s, generator=g),) for s in shapes]
    return export_executorch.export(model.eval(), inputs[0], validation_inputs=inputs[1:],
                                    max_batch=16)


@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "time_first"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["one_way", "two_way"])
def test_lstm_takes_any_length_and_batch(batch_first: bool, bidirectional: bool) -> None:
    shapes = _shapes(batch_first)
    report = _export(_Recurrent(batch_first, bidirectional), shapes).report
    assert report["validation"]["passed"] is True
    assert [tuple(c["shapes"]["0"]) for c in report["validation"]["checks"]] == shapes
    assert FIX in report["fixes"]["applied"]
    assert PATCH in report["patches"]["fired"]


def test_lstm_with_a_projection() -> None:
    """``proj_size``: the hidden state (8) is narrower than the cell state (16)."""
    report = _export(_Recurrent(True, False, layers=1, proj_size=8), _shapes(True)).report
    assert report["validation"]["passed"] is True
    assert len(report["validation"]["checks"]) == 3


def test_without_the_fix_the_time_axis_is_pinned() -> None:
    """Documents the edge lowering's unrolled LSTM: the program is planned for the example's 6
    steps (without the runner's bound check it returned 6 steps for an 11-step input, a
    silently wrong artifact). When this stops failing, the fix can go."""
    pinned = r"beyond the program's bounds \(16, 6, 8\) \(axis 1: 11 > 6\)"
    with withheld("executorch", FIX), pytest.raises(ExportError, match=pinned):
        _export(_Recurrent(True, False, layers=1), _shapes(True)[:2])


def test_without_the_patch_the_batch_is_pinned() -> None:
    """Documents the emitted scan loop's fixed-shape copies: when this stops failing, the patch
    can go."""
    with withheld("executorch", PATCH), pytest.raises(ExportError, match="0x12"):
        _export(_Recurrent(True, False, layers=1), _shapes(True)[:2])


def test_an_earlier_scan_in_the_process_leaves_the_export_intact() -> None:
    """A scan run before the export (an eager one, at other sizes) used to make the LSTM's scan
    a recompile with automatic dynamic shapes, whose body failed the lowering (``Node.meta ...
    is missing val field``): see ``scan_steps``."""
    g = torch.Generator().manual_seed(0)
    x, a = torch.randn(2, 7, 5, generator=g), torch.rand(2, 7, 5, generator=g)
    rg_lru_scan(None, x, a, torch.zeros(2, 7, 1, dtype=torch.bool), None)
    report = _export(_Recurrent(True, False, layers=1), _shapes(True)[:2]).report
    assert report["validation"]["passed"] is True
    assert FIX in report["fixes"]["applied"]


def test_a_model_without_an_lstm_fires_neither() -> None:
    report = export_executorch.export(torch.nn.Linear(8, 4).eval(), (torch.randn(2, 8),)).report
    assert FIX not in report["fixes"]["applied"]
    assert PATCH not in report["patches"]["fired"]


def test_lstm_over_an_input_axis_takes_any_length() -> None:
    result = export_executorch.export(PredictionNetwork().eval(), label_ids(2, 5, 0),
                                      validation_inputs=[label_ids(3, 9, 1), label_ids(1, 2, 2)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["0"] for c in report["validation"]["checks"]] == [[2, 5], [3, 9], [1, 2]]


def test_wavtokenizer_encoder_takes_any_length() -> None:
    """Real model code: WavTokenizer's encoder runs an ``nn.LSTM`` over its frames."""
    g = torch.Generator().manual_seed(0)
    audio = [torch.randn(b, 1, n, generator=g) for b, n in [(2, 3200), (3, 4000), (1, 2210)]]
    result = export_executorch.export(build_tiny_model("wavtokenizer_encoder").model,
                                      {"input_values": audio[0]},
                                      validation_inputs=[{"input_values": a} for a in audio[1:]])
    assert result.report["validation"]["passed"] is True
    assert len(result.report["validation"]["checks"]) == 3
    assert FIX in result.report["fixes"]["applied"]

