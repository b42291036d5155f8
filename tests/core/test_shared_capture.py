"""One capture exported to ONNX and then to ExecuTorch (what the sweep and a two-backend script
do): ONNX's decompositions re-trace its copy and leave fresh unbacked symbols pending in the
shape environment the copies share; ExecuTorch's re-trace then failed at its first node
(``PendingUnbackedSymbolNotFound ... not in returned outputs [Parameter(...)]``). Each copy now
starts with none pending. Cohere Compass's vision tower (tiny, random weights) is the real case."""

from __future__ import annotations

import pytest

import export_executorch
import export_onnx
from export_core import DynamoConfig, DynamoExporter, FixError
from export_core import exporter as core_exporter
from export_sweep.zoo.build import build_tiny_model


def _onnx_then_executorch() -> dict:
    tiny = build_tiny_model("cohere_compass_vision")
    capture = DynamoExporter(DynamoConfig(dynamic=True)).capture(tiny.model, tiny.inputs.first)
    onnx = export_onnx.export(tiny.model, tiny.inputs.first, capture=capture,
                              validation_inputs=[tiny.inputs.second])
    assert onnx.report["validation"]["passed"] is True
    return export_executorch.export(tiny.model, tiny.inputs.first, capture=capture,
                                    validation_inputs=[tiny.inputs.second]).report


def test_executorch_after_onnx_on_one_capture() -> None:
    report = _onnx_then_executorch()
    assert report["validation"]["passed"] is True
    assert len(report["validation"]["checks"]) == 2


def test_without_dropping_the_pending_symbols_executorch_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(core_exporter, "_drop_pending_unbacked_symbols", lambda program: None)
    with pytest.raises(FixError, match="PendingUnbackedSymbolNotFound"):
        _onnx_then_executorch()
