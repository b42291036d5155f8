"""The Python symbolic-size functions (``torch.sym_max``, ``sym_min``, ``sym_float``) through
ExecuTorch: admitted by the edge verifier (``admit_python_sym_ops``) and computed at run time, at
every validation shape; without the fix lowering fails with a bare ``AssertionError``."""

from __future__ import annotations

import pytest
import torch

import export_executorch
from export_core import LoweringError
from export_core.registry import withheld

FIX = "admit_python_sym_ops"


class PadToMinimum(torch.nn.Module):
    """``(batch, seq, 4)`` → zero-padded to at least 6 positions: ``torch.sym_max(seq, 6)``."""

    def forward(self, x):
        pad = x.new_zeros(x.shape[0], torch.sym_max(x.shape[1], 6), x.shape[2])
        pad[:, : x.shape[1]] = x
        return pad


class FirstFew(torch.nn.Module):
    """``(batch, seq, 4)`` → its first ``torch.sym_min(seq, 3)`` positions, doubled."""

    def forward(self, x):
        return x[:, : torch.sym_min(x.shape[1], 3)] * 2


class ScaleByLength(torch.nn.Module):
    """``(batch, seq, 4)`` scaled by ``torch.sym_float(seq)``, a run-time float."""

    def forward(self, x):
        return x * torch.sym_float(x.shape[1])


VALIDATION = [(torch.randn(3, 9, 4),), (torch.randn(1, 2, 4),)]
"""Longer and shorter than the example's 5 positions, batch 3 and 1: a value baked in at the
example's size (6 for ``sym_max``, 5 for ``sym_float``) would differ from eager at both."""


@pytest.mark.parametrize("model, called", [
    (PadToMinimum, ["torch.sym_max"]),
    (FirstFew, ["torch.sym_min"]),
    (ScaleByLength, ["torch.sym_float"]),
], ids=["sym_max", "sym_min", "sym_float"])
@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_python_sym_functions_run_at_every_shape(model, called, backend):
    result = export_executorch.export(model().eval(), (torch.randn(2, 5, 4),), backend=backend,
                                      validation_inputs=VALIDATION)
    report = result.report
    assert report["status"] == "ok" and report["validation"]["passed"] is True
    assert len(report["validation"]["checks"]) >= 3
    assert FIX in report["fixes"]["applied"]
    assert report["admitted_sym_functions"] == called


def test_a_program_without_them_is_left_alone():
    report = export_executorch.export(FirstFew().eval(), (torch.randn(2, 5, 4),), dynamic=False).report
    assert FIX not in report["fixes"]["applied"] and "admitted_sym_functions" not in report


def test_without_the_fix_lowering_fails():
    with withheld("executorch", FIX), pytest.raises(LoweringError, match="AssertionError"):
        export_executorch.export(PadToMinimum().eval(), (torch.randn(2, 5, 4),))


def test_mpt_exports_and_matches_eager():
    """MPT (ALiBi) calls ``torch.sym_max`` on its sequence length; it failed to lower."""
    from export_sweep.zoo import build_tiny_model

    tiny = build_tiny_model("mpt")
    result = export_executorch.export(tiny.model.eval(), tiny.inputs.first,
                                      validation_inputs=[tiny.inputs.second])
    report = result.report
    assert report["status"] == "ok" and report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) >= 2
    assert "torch.sym_max" in report["admitted_sym_functions"]
