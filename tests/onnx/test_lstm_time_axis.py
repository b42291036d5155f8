"""The capture patch ``rnn_as_while_loop`` and the ONNX patch ``rnn_decompositions_while_loop``:
a model holding an ``nn.LSTM`` keeps a symbolic time length (without them the default LSTM
decomposition unrolls over the example's steps and pins the time axis without a guard). Compared
with eager in ONNX Runtime at three shapes, batch 1 among them, time-first and batch-first,
one and two directions, and on real model code (WavTokenizer's encoder)."""

from __future__ import annotations

import pytest
import torch

import export_onnx
from _recurrent import PredictionNetwork, label_ids
from export_core import ExportError
from export_core.registry import withheld
from export_sweep.zoo.build import build_tiny_model

CAPTURE = "dynamo:torch.export.export"
DECOMPOSE = "onnx:torch.onnx._internal.exporter._fx_passes.decompose_with_registry"


class _Recurrent(torch.nn.Module):
    """``forward(x)``: ``x`` ``(batch, time, 8)`` (``batch_first``) or ``(time, batch, 8)`` ->
    the LSTM's output, ``(..., 16 * directions)``, reshaped through its time axis."""

    def __init__(self, batch_first: bool, bidirectional: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lstm = torch.nn.LSTM(8, 16, num_layers=2, batch_first=batch_first,
                                  bidirectional=bidirectional)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.lstm(x)[0]
        return out.reshape(out.shape[0], out.shape[1], -1, 4).sum(-1)  # sizes read back


def _shapes(batch_first: bool) -> list[tuple[int, int, int]]:
    """(batch, time) pairs (2, 6), (3, 11), (1, 3) laid out for the layer."""
    pairs = [(2, 6), (3, 11), (1, 3)]
    return [(b, t, 8) if batch_first else (t, b, 8) for b, t in pairs]


@pytest.mark.parametrize("batch_first", [True, False], ids=["batch_first", "time_first"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["one_way", "two_way"])
def test_lstm_takes_any_length(batch_first: bool, bidirectional: bool) -> None:
    shapes = _shapes(batch_first)
    result = export_onnx.export(
        _Recurrent(batch_first, bidirectional).eval(), (torch.randn(*shapes[0]),),
        validation_inputs=[(torch.randn(*s),) for s in shapes[1:]])
    report = result.report
    assert report["validation"]["passed"] is True
    assert [tuple(c["shapes"]["0"]) for c in report["validation"]["checks"]] == shapes
    assert {CAPTURE, DECOMPOSE} <= set(report["patches"]["fired"])


def test_without_the_patches_the_time_axis_is_pinned() -> None:
    """Documents torch's unrolled LSTM decomposition: when this stops failing, the patches can
    go."""
    shapes = _shapes(True)
    with withheld("dynamo", CAPTURE), withheld("onnx", DECOMPOSE), \
            pytest.raises(ExportError, match="invalid dimensions"):
        export_onnx.export(_Recurrent(True, False).eval(), (torch.randn(*shapes[0]),),
                           validation_inputs=[(torch.randn(*shapes[1]),)])


def test_a_model_without_an_lstm_does_not_fire_it() -> None:
    result = export_onnx.export(torch.nn.Linear(8, 4).eval(), (torch.randn(2, 8),))
    assert CAPTURE not in result.report["patches"]["fired"]
    assert DECOMPOSE not in result.report["patches"]["fired"]


def test_wavtokenizer_encoder_takes_any_length() -> None:
    """Real model code: WavTokenizer's encoder runs an ``nn.LSTM`` over its frames."""
    g = torch.Generator().manual_seed(0)
    audio = [torch.randn(b, 1, n, generator=g) for b, n in [(2, 3200), (3, 4000), (1, 2210)]]
    result = export_onnx.export(build_tiny_model("wavtokenizer_encoder").model,
                                {"input_values": audio[0]},
                                validation_inputs=[{"input_values": a} for a in audio[1:]])
    assert result.report["validation"]["passed"] is True
    assert len(result.report["validation"]["checks"]) == 3
    assert CAPTURE in result.report["patches"]["fired"]


PROMOTION = "onnx:torch.onnx._internal.exporter._fx_passes.insert_type_promotion_nodes"


def test_lstm_over_an_input_axis_takes_any_length() -> None:
    result = export_onnx.export(PredictionNetwork().eval(), label_ids(2, 5, 0),
                                validation_inputs=[label_ids(3, 9, 1), label_ids(1, 2, 2)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["0"] for c in report["validation"]["checks"]] == [[2, 5], [3, 9], [1, 2]]
    assert {CAPTURE, DECOMPOSE, PROMOTION} <= set(report["patches"]["fired"])


def test_without_the_type_promotion_patch_the_input_axis_is_pinned() -> None:
    """Documents the type-promotion pass's fake run of the kept LSTM: when this stops failing,
    the patch can go. That run without grad (``type_promotion_without_grad``) does not unroll
    the LSTM either, so the axis is pinned only with both withheld."""
    from export_onnx.workarounds.grad_free_type_promotion import TYPE_PROMOTION_RUN_TARGET

    with withheld("onnx", PROMOTION), withheld("onnx", f"onnx:{TYPE_PROMOTION_RUN_TARGET}"), \
            pytest.raises(ExportError, match="invalid dimensions"):
        export_onnx.export(PredictionNetwork().eval(), label_ids(2, 5, 0),
                           validation_inputs=[label_ids(3, 9, 1)])
