"""The capture patches ``paddings_from_ints`` (the audio codecs' ``Conv1d`` paddings from the
``nn.Conv1d``'s ints, not ``.item()`` of size buffers) and ``range_with_static_trip_count``
(``range`` over a symbolic length with a fixed trip count).

The codecs are exported through the public API and compared with eager at three audio lengths,
batch 1 among them, on both backends; each patch has a half that fails without it."""

from __future__ import annotations

import importlib

import pytest
import torch

import export_executorch
import export_onnx
from export_core import ExportError
from export_core.registry import withheld
from export_core.workarounds.conv_padding_ints import CONV_PADDING_TARGETS, conv_paddings
from export_sweep.zoo.build import build_tiny_model

MIMI = "dynamo:transformers.models.mimi.modeling_mimi.MimiConv1d.forward"
RANGE = "dynamo:transformers.models.encodec.modeling_encodec.range"


def _audio(batch: int, length: int, seed: int) -> dict[str, torch.Tensor]:
    """``input_values`` ``(batch, 1, length)`` float32, a mono waveform."""
    g = torch.Generator().manual_seed(seed)
    return {"input_values": torch.randn(batch, 1, length, generator=g)}


# lengths that are not multiples of the codecs' hop (the extra padding is not 0)
VALIDATION = [_audio(3, 4000, 1), _audio(1, 2210, 2)]


@pytest.mark.parametrize("model_type", ["mimi_encoder", "pocket_tts_audio_tokenizer_encoder"])
@pytest.mark.parametrize("exporter", [export_onnx, export_executorch], ids=["onnx", "executorch"])
def test_codec_encoder_takes_any_length(model_type: str, exporter) -> None:
    result = exporter.export(build_tiny_model(model_type).model, _audio(2, 3200, 0),
                             validation_inputs=VALIDATION)
    report = result.report
    assert report["validation"]["passed"] is True
    shapes = [c["shapes"]["input_values"] for c in report["validation"]["checks"]]
    assert shapes == [[2, 1, 3200], [3, 1, 4000], [1, 1, 2210]]
    assert any(p.startswith("dynamo:transformers.models.") and p.endswith("Conv1d.forward")
               for p in report["patches"]["fired"])


def test_without_the_patch_the_capture_fails() -> None:
    """Documents the model code's size buffers: when this stops failing, the patch can go."""
    with withheld("dynamo", MIMI), pytest.raises(ExportError, match="data-dependent"):
        export_onnx.export(build_tiny_model("mimi_encoder").model, _audio(2, 3200, 0),
                           validation_inputs=VALIDATION)


@pytest.mark.parametrize("target", CONV_PADDING_TARGETS)
def test_paddings_match_the_models_tensor_arithmetic(target: str) -> None:
    """``conv_paddings`` equals each codec's own ``_get_extra_padding_for_conv1d`` and padding
    split, for causal and symmetric layers, strides 1-5, dilations 1-3, many lengths."""
    module_path, cls_name, _ = target.rsplit(".", 2)
    cls = getattr(importlib.import_module(module_path), cls_name)
    config = type("Config", (), {"use_causal_conv": False, "pad_mode": "reflect",
                                 "norm_type": "weight_norm"})()
    for kernel, stride, dilation in [(7, 1, 1), (8, 4, 1), (10, 5, 1), (3, 1, 3), (4, 2, 1)]:
        layer = cls(config, 2, 2, kernel, stride, dilation=dilation)
        total = int(layer.padding_total)
        for length in (1, 2, 9, 64, 100, 321, 3200):
            extra = int(layer._get_extra_padding_for_conv1d(torch.zeros(1, 2, length)))
            assert conv_paddings(length, kernel, stride, dilation, causal=True) == (total, extra)
            right = total // 2
            assert conv_paddings(length, kernel, stride, dilation, causal=False) == (
                total - right, right + extra)


class _Chunks(torch.nn.Module):
    """``forward(x)``: ``x`` ``(batch, time)`` cut with EnCodec's ``range(0, length, length)``
    (one chunk for every length), each chunk doubled, concatenated again."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        module = importlib.import_module("transformers.models.encodec.modeling_encodec")
        loop = getattr(module, "range", range)  # the patched range while an export runs
        length = x.shape[-1]
        return torch.cat([x[:, o:o + length] * 2 for o in loop(0, length, length)], dim=-1)


def test_range_with_a_fixed_trip_count_keeps_the_length() -> None:
    inputs = (torch.randn(2, 12),)
    result = export_onnx.export(_Chunks(), inputs,
                                validation_inputs=[(torch.randn(3, 20),), (torch.randn(1, 5),)])
    assert result.report["validation"]["passed"] is True
    assert RANGE in result.report["patches"]["fired"]
    with withheld("dynamo", RANGE), pytest.raises(ExportError, match="invalid dimensions"):
        export_onnx.export(_Chunks(), inputs, validation_inputs=[(torch.randn(3, 20),)])
