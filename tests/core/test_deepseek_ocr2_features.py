"""The capture patch ``global_views_in_one_chunk``: DeepSeek-OCR 2's ``get_image_features``
loops over the batch to append the view separator to each image's tokens; without local views
the patch builds the same features with one ``cat``, so the batch stays dynamic. Compared with
the unpatched eager model (its per-image features repacked as one chunk) in ONNX Runtime and
ExecuTorch at batch 2, 3 and 1; without the patch the artifact takes the example's batch only."""

from __future__ import annotations

import pytest
import torch

import export_executorch
import export_onnx
from export_core import ExportError
from export_core.registry import withheld
from export_sweep.zoo.build import build_tiny_model

PATCH = ("dynamo:transformers.models.deepseek_ocr2.modeling_deepseek_ocr2.DeepseekOcr2Model"
         ".get_image_features")


def _tiny() -> tuple[torch.nn.Module, list[dict]]:
    tiny = build_tiny_model("deepseek_ocr2", forward=True)
    first, second = tiny.inputs.first, tiny.inputs.second
    assert "pixel_values_local" not in first
    return tiny.model, [first, second, {k: v[:1] for k, v in first.items()}]


@pytest.mark.parametrize("exporter", [
    export_onnx,
    pytest.param(export_executorch, marks=pytest.mark.slow),  # about 100 s; -m slow
], ids=["onnx", "executorch"])
def test_deepseek_ocr2_takes_any_batch(exporter) -> None:
    model, sets = _tiny()
    result = exporter.export(model, sets[0], validation_inputs=sets[1:])
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["pixel_values"][0] for c in report["validation"]["checks"]] == [2, 3, 1]
    assert PATCH in report["patches"]["fired"]
    assert report["validation"]["eager_repacked_by"] == [PATCH]


def test_without_the_patch_the_batch_is_pinned() -> None:
    model, sets = _tiny()
    with withheld("dynamo", PATCH), pytest.raises(ExportError):
        export_onnx.export(model, sets[0], validation_inputs=sets[1:])
