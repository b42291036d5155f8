"""The capture's symbolic budget: a capture whose symbolic shape reasoning explodes with dynamic
image axes (windowed attention: Swin) is captured again with a static height and width.

The pair: with ``Dim.AUTO`` on the image axes the tiny Swin's symbolic reasoning is still running
when a few seconds' budget is spent (it ran past the sweep's 180 s before this fallback); with the
fallback the export matches eager at batch 2, 3 and 1 on both backends' shared capture.
"""

from __future__ import annotations

import time

import pytest
import torch
from torch.export import Dim
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from export_core import DynamoConfig, DynamoExporter, InputError
from export_core.dynamic_shapes import auto_dynamic_shapes, static_image_axes
from export_core.symbolic_budget import SymbolicBudgetExceeded, budget_exceeded, symbolic_budget

BUDGET_S = 5.0


@pytest.fixture(scope="module")
def tiny_swin():
    from export_sweep.zoo import build_tiny_model

    tiny = build_tiny_model("swin", model_class="SwinModel", forward=False)
    torch.manual_seed(0)
    inputs = {"pixel_values": torch.randn(2, 3, 32, 32)}
    return tiny.model.eval(), inputs


def test_static_image_axes_specialises_height_and_width_only():
    inputs = {"pixel_values": torch.randn(2, 3, 32, 32), "input_ids": torch.ones(2, 7, dtype=torch.long)}
    spec = static_image_axes(inputs, auto_dynamic_shapes(inputs))
    assert spec["pixel_values"] == {0: Dim.AUTO, 1: Dim.AUTO, 2: Dim.STATIC, 3: Dim.STATIC}
    assert spec["input_ids"] == {0: Dim.AUTO, 1: Dim.AUTO}
    positional = (torch.randn(2, 3, 8, 8),)
    assert static_image_axes(positional, auto_dynamic_shapes(positional))[0][2] is Dim.STATIC
    text = {"input_ids": torch.ones(2, 7, dtype=torch.long)}
    assert static_image_axes(text, auto_dynamic_shapes(text)) is None, "nothing to fall back to"


def test_budget_raises_inside_the_trace_and_restores_the_shape_env():
    originals = {n: ShapeEnv.__dict__[n] for n in ("evaluate_expr", "simplify")}
    env = ShapeEnv()
    with pytest.raises(SymbolicBudgetExceeded) as info, symbolic_budget(1e-9) as clock:
        time.sleep(0.01)
        clock.spent = 1.0  # as if a second had gone into guard evaluation
        env.simplify(1)
    assert info.value.budget == 1e-9 and "symbolic shape reasoning took over" in str(info.value)
    assert {n: ShapeEnv.__dict__[n] for n in originals} == originals
    # while the budget is on, a guard error's "Caused by" line skips the wrappers' frames
    from torch.fx.experimental.symbolic_shapes import uninteresting_files

    import export_core.symbolic_budget as module

    with symbolic_budget(10):
        assert module.__file__ in uninteresting_files()
    assert module.__file__ not in uninteresting_files()
    wrapped = RuntimeError("torch.export failed")
    wrapped.__cause__ = info.value
    assert budget_exceeded(wrapped) is info.value and budget_exceeded(RuntimeError("x")) is None


def test_budget_must_be_positive():
    with pytest.raises(InputError, match="symbolic_budget_s"):
        DynamoConfig(symbolic_budget_s=0)


def test_swin_with_dynamic_image_axes_overruns_the_budget(tiny_swin):
    """Without the fallback: the capture with ``Dim.AUTO`` height and width is still in symbolic
    reasoning after the budget (it ran past 180 s unbounded); with the image axes static it
    captures a program whose batch stays symbolic and whose height and width are 32.

    The static capture runs without a budget: how long it takes depends on the machine (7.5 s of
    guard evaluation was measured on a loaded CI runner), and the capture runs it unbounded too.
    """
    model, inputs = tiny_swin
    dynamic = auto_dynamic_shapes(inputs)
    with pytest.raises(SymbolicBudgetExceeded), symbolic_budget(BUDGET_S):
        torch.export.export(model, (), dict(inputs), dynamic_shapes=dynamic, strict=False)
    program = torch.export.export(model, (), dict(inputs),
                                  dynamic_shapes=static_image_axes(inputs, dynamic), strict=False)
    (pixel_values,) = [n.meta["val"] for n in program.graph.nodes
                       if n.op == "placeholder" and n.name == "pixel_values"]
    batch, channels, height, width = pixel_values.shape
    assert isinstance(batch, torch.SymInt) and (channels, height, width) == (3, 32, 32)


def test_swin_exports_with_static_image_axes_after_the_budget(tiny_swin, tmp_path):
    import export_onnx
    import onnx

    model, inputs = tiny_swin
    capture = DynamoExporter(DynamoConfig(symbolic_budget_s=BUDGET_S)).capture(model, inputs)
    assert capture.strategy == "static-image-axes"
    validation = [{"pixel_values": torch.randn(3, 3, 32, 32)}, {"pixel_values": torch.randn(1, 3, 32, 32)}]
    result = export_onnx.export(model, inputs, capture=capture, output=tmp_path / "onnx",
                                validation_inputs=validation)
    report = result.report
    assert report["status"] == "ok" and report["capture_strategy"] == "static-image-axes"
    assert report["validation"]["passed"] is True
    batches = {c["shapes"]["pixel_values"][0] for c in report["validation"]["checks"]}
    assert {1, 2, 3} <= batches
    dims = onnx.load(result.path).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == ["batch", 3, 32, 32]
