"""Output names and order. A model returning a tensor under an input's name (Qwen2-Audio's
``attention_mask``) gets ``<name>_out`` in the artifact and the report, so ONNX Runtime loads the
graph (it rejected "Duplicate definition of name (attention_mask)"). A ``ModelOutput`` whose
field was assigned late flattens in field order in eager, the capture and the re-traced program
alike, and ``None`` leaves get no name (InternVL / Aya Vision compared outputs out of order)."""

from __future__ import annotations

import pytest
import torch

import export_executorch
import export_onnx
from export_core.naming import distinct_output_names
from export_sweep.zoo.build import build_tiny_model


class _MaskOut(torch.nn.Module):
    """``forward(x, attention_mask)``: ``x`` ``(batch, seq)`` float32, ``attention_mask``
    ``(batch, seq)`` int64 -> ``{"hidden": x * mask, "attention_mask": mask * 2}``."""

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"hidden": x * attention_mask, "attention_mask": attention_mask * 2}


def test_distinct_output_names() -> None:
    assert distinct_output_names(["a", "m"], ["h", "m"]) == ["h", "m_out"]
    assert distinct_output_names(["m"], ["m", "m_out"]) == ["m_out_1", "m_out"]
    assert distinct_output_names(["x"], ["y"]) == ["y"]


def test_an_output_named_like_an_input_is_renamed() -> None:
    inputs = {"x": torch.randn(2, 5), "attention_mask": torch.ones(2, 5, dtype=torch.long)}
    other = {"x": torch.randn(1, 3), "attention_mask": torch.ones(1, 3, dtype=torch.long)}
    result = export_onnx.export(_MaskOut(), inputs, validation_inputs=[other])
    assert result.report["validation"]["passed"] is True
    assert result.report["outputs"] == ["hidden", "attention_mask_out"]
    graph = result.program.model_proto.graph
    assert [o.name for o in graph.output] == ["hidden", "attention_mask_out"]
    assert [i.name for i in graph.input] == ["x", "attention_mask"]


def test_qwen2_audio_loads_and_matches_eager() -> None:
    built = build_tiny_model("qwen2_audio", forward=True)
    result = export_onnx.export(built.model, built.inputs.first,
                                validation_inputs=[built.inputs.second])
    assert result.report["validation"]["passed"] is True
    assert "attention_mask_out" in result.report["outputs"]


class _LateField(torch.nn.Module):
    """``forward(x)``: ``x`` ``(batch, seq, 8)`` float32 -> a ``BaseModelOutputWithPooling``
    filled the way InternVL's vision features are: ``hidden_states`` (one ``None`` entry, the
    last entry the ``last_hidden_state`` itself) first, ``pooler_output`` ``(batch, seq // 2,
    16)`` assigned afterwards."""

    def forward(self, x: torch.Tensor):
        from transformers.modeling_outputs import BaseModelOutputWithPooling

        hidden = x * 2
        out = BaseModelOutputWithPooling(last_hidden_state=hidden, hidden_states=(None, x, hidden))
        out.pooler_output = hidden.reshape(x.shape[0], x.shape[1] // 2, 16)
        return out


def _late_inputs(batch: int, seq: int, seed: int) -> dict[str, torch.Tensor]:
    return {"x": torch.randn(batch, seq, 8, generator=torch.Generator().manual_seed(seed))}


@pytest.mark.parametrize("exporter", [export_onnx, export_executorch], ids=["onnx", "executorch"])
def test_outputs_follow_the_field_order(exporter) -> None:
    """A field assigned late, ``None`` leaves and a tensor returned twice: names and values
    line up with eager at three shapes (the re-traced program flattens in field order)."""
    result = exporter.export(_LateField(), _late_inputs(2, 6, 0),
                             validation_inputs=[_late_inputs(3, 10, 1), _late_inputs(1, 4, 2)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert len(report["validation"]["checks"]) == 3
    assert report["outputs"] == ["last_hidden_state", "pooler_output", "hidden_states.1",
                                 "hidden_states.2"]


def test_internvl_matches_eager() -> None:
    """Real model code: InternVL's ``image_outputs`` (late ``pooler_output``, a ``None``
    hidden state, the vision tower's last state twice), through the integer pixel shuffle."""
    built = build_tiny_model("internvl", forward=True)
    result = export_onnx.export(built.model, built.inputs.first,
                                validation_inputs=[built.inputs.second])
    assert result.report["validation"]["passed"] is True
    assert "image_outputs.pooler_output" in result.report["outputs"]
