"""Output names that an input already has: a model returning a tensor under an input's name
(Qwen2-Audio's ``attention_mask``) gets ``<name>_out`` in the artifact and the report, so ONNX
Runtime loads the graph (it rejected "Duplicate definition of name (attention_mask)")."""

from __future__ import annotations

import torch

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
