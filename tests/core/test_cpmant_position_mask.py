"""The capture patch ``position_mask_from_arange``: CPM-Ant's left-padding positions come from
``torch.arange``, so the sequence axis stays dynamic (without it, ``range`` over the symbolic
length pins the axis to the example's and the artifact rejects every other length). Compared
with eager in ONNX Runtime and in ExecuTorch at three shapes, batch 1 among them, with
left-padded rows."""

from __future__ import annotations

import pytest
import torch

import export_executorch
import export_onnx
from export_core import ExportError
from export_core.registry import withheld
from export_sweep.zoo.build import build_tiny_model

PATCH = "dynamo:transformers.models.cpmant.modeling_cpmant.CpmAntModel._prepare_attention_mask"


def _model() -> torch.nn.Module:
    return build_tiny_model("cpmant").model  # 2 layers, 32 prompt tokens, vocabulary 1024


def _inputs(batch: int, seq: int, seed: int) -> tuple[torch.Tensor]:
    """``input_ids`` ``(batch, seq)`` int64; row 0 starts with two padding tokens (id 0)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(100, 900, (batch, seq), generator=g)
    ids[0, :2] = 0
    return (ids,)


VALIDATION = [_inputs(3, 12, 1), _inputs(1, 5, 2)]


@pytest.mark.parametrize("exporter", [export_onnx, export_executorch], ids=["onnx", "executorch"])
def test_cpmant_takes_any_length(exporter) -> None:
    result = exporter.export(_model(), _inputs(2, 8, 0), validation_inputs=VALIDATION)
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["0"] for c in report["validation"]["checks"]] == [[2, 8], [3, 12], [1, 5]]
    assert PATCH in report["patches"]["fired"]


def test_without_the_patch_the_length_is_pinned() -> None:
    """Documents the model code's ``range``: when this stops failing, the patch can go."""
    with withheld("dynamo", PATCH), pytest.raises(ExportError, match="invalid dimensions"):
        export_onnx.export(_model(), _inputs(2, 8, 0), validation_inputs=VALIDATION)
