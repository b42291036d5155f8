"""``gelu(approximate="tanh")`` through XNNPACK: the delegate's GELU ignores ``approximate`` and
computes the exact GELU, a silent error of ~5e-4 (executorch#22851). ``gelu_tanh_as_formula``
decomposes the tanh form into ops XNNPACK delegates; exact GELU stays ``XNNGelu``. Compared with
eager at three shapes (batch 1 among them), on a small module with both modes and on a tiny SigLIP
vision tower (``gelu_pytorch_tanh``); without the fix validation fails."""

from __future__ import annotations

import pytest
import torch

import export_executorch
from export_core import ValidationError
from export_core.inputs import make_example_inputs
from export_core.registry import withheld
from export_executorch.workarounds.xnnpack_gelu_tanh import gelu_tanh
from export_sweep.zoo.build import build_tiny_model

FIX = "gelu_tanh_as_formula"


class TwoGelus(torch.nn.Module):
    """``x`` ``(batch, seq, 16)`` float32 -> ``(batch, seq, 16)``: a linear layer, the GELU of
    ``approximate`` (scaled so the inputs reach |x| ~ 3, where the two modes differ most), then
    the other GELU mode when ``both``."""

    def __init__(self, approximate: str, both: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(16, 16)
        self.first = torch.nn.GELU(approximate=approximate)
        self.second = torch.nn.GELU(approximate="none" if approximate == "tanh" else "tanh") if both else None

    def forward(self, x):
        y = self.first(self.linear(x) * 3)
        return self.second(y * 2) if self.second is not None else y


def _x(batch: int, seq: int, seed: int) -> tuple[torch.Tensor]:
    return (torch.randn(batch, seq, 16, generator=torch.Generator().manual_seed(seed)),)


VALIDATION = [_x(3, 7, 1), _x(1, 4, 2)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_decomposition_equals_torch_tanh_gelu(dtype):
    x = torch.linspace(-8, 8, 1001, dtype=dtype)
    torch.testing.assert_close(gelu_tanh(x, "tanh"), torch.nn.functional.gelu(x, approximate="tanh"))
    assert gelu_tanh(x, "none") is NotImplemented


@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_tanh_gelu_matches_eager(backend):
    result = export_executorch.export(TwoGelus("tanh").eval(), _x(2, 5, 0), backend=backend,
                                      validation_inputs=VALIDATION)
    report = result.report
    assert report["status"] == "ok" and report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) == 3
    # Registered for XNNPACK only: the portable kernel computes the tanh form itself.
    assert (FIX in report["fixes"]["applied"]) is (backend == "xnnpack")
    if backend == "xnnpack":
        assert "aten.gelu.default" not in report["delegation"]["portable_ops"]
        assert "aten.tanh.default" not in report["delegation"]["portable_ops"]


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_both_modes_in_one_program(approximate):
    result = export_executorch.export(TwoGelus(approximate, both=True).eval(), _x(2, 5, 0),
                                      validation_inputs=VALIDATION)
    report = result.report
    assert report["validation"]["passed"] is True
    assert FIX in report["fixes"]["applied"]


def test_exact_gelu_only_is_left_alone():
    result = export_executorch.export(TwoGelus("none").eval(), _x(2, 5, 0), validation_inputs=VALIDATION)
    assert result.report["validation"]["passed"] is True
    assert FIX not in result.report["fixes"]["applied"]


def test_without_the_fix_the_artifact_is_silently_wrong():
    with withheld("executorch.xnnpack", FIX), pytest.raises(ValidationError, match="differs from eager"):
        export_executorch.export(TwoGelus("tanh").eval(), _x(2, 5, 0), validation_inputs=VALIDATION)


def test_tiny_siglip_vision_tower_matches_eager():
    model = build_tiny_model("siglip_vision_model").model
    assert model.config.hidden_act == "gelu_pytorch_tanh"
    sets = make_example_inputs(model, shapes=((2, 8), (1, 12), (3, 12))).sets
    result = export_executorch.export(model, sets[0], validation_inputs=sets[1:])
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["pixel_values"][0] for c in report["validation"]["checks"]] == [2, 1, 3]
    assert FIX in report["fixes"]["applied"]
