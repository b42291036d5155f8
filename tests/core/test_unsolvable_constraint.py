"""A capture whose dynamic image axes end in a guard torch's constraint solver cannot solve (a
divisibility condition: ``NotImplementedError: The inequality, Eq(-x/2 + 4*((x/2)//4), 0),
cannot be solved using solve_univariate_inequality``, pytorch/pytorch#131897) is captured again
with a static height and width, as one that runs over the symbolic budget is.

The pair on EfficientLoFTR (its image sides must be multiples of 8): without the fallback
(``symbolic_budget_s=None``) the capture fails with the solver's error; with it the export keeps
a dynamic batch and matches eager at two batch sizes."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import export_onnx  # noqa: E402
from export_core import CaptureError, DynamoConfig, DynamoExporter  # noqa: E402
from export_core.exporter import unsolvable_constraint  # noqa: E402
from export_sweep.zoo.build import build_tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def tiny_loftr():
    return build_tiny_model("efficientloftr")


def test_the_solver_error_is_found_in_the_cause_chain() -> None:
    solver = NotImplementedError("\nThe inequality, Eq(x, 0), cannot be solved using\nsolve_univariate_inequality.")
    wrapped = CaptureError("torch.export failed")
    wrapped.__cause__ = solver
    assert unsolvable_constraint(wrapped) is solver
    assert unsolvable_constraint(CaptureError("torch.export failed")) is None
    assert unsolvable_constraint(NotImplementedError("some other op")) is None


def test_without_the_fallback_the_capture_fails(tiny_loftr) -> None:
    """Documents torch's solver failure: when this stops failing, the fallback is not needed."""
    exporter = DynamoExporter(DynamoConfig(dynamic=True, symbolic_budget_s=None))
    with pytest.raises(CaptureError) as info:
        exporter.capture(tiny_loftr.model, tiny_loftr.inputs.first)
    assert unsolvable_constraint(info.value) is not None


def test_efficientloftr_exports_with_static_image_axes(tiny_loftr) -> None:
    result = export_onnx.export(tiny_loftr.model, tiny_loftr.inputs.first,
                                validation_inputs=[tiny_loftr.inputs.second])
    report = result.report
    assert report["capture_strategy"].startswith("static-image-axes")
    assert report["validation"]["passed"] is True
    batches = [c["shapes"]["pixel_values"][0] for c in report["validation"]["checks"]]
    assert batches == [2, 3]
