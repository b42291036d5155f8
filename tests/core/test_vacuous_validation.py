"""A validation whose eager outputs are all about zero is reported as vacuous: an artifact
returning zeros would pass it too, so it proves nothing (a tiny model initialised near zero)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import export_onnx
from export_core.validation import VACUOUS, compare_leaves


class ScaledLinear(torch.nn.Module):
    """``(batch, seq, 4) -> (batch, seq, 3)``: a linear layer whose weights are scaled by
    ``scale`` (1e-10 gives outputs of about 1e-10, as SAM's default ``initializer_range``)."""

    def __init__(self, scale: float) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 3)
        with torch.no_grad():
            self.proj.weight.mul_(scale)
            self.proj.bias.mul_(scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x)


def _sets() -> list[dict[str, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    return [{"x": torch.randn(2, 5, 4, generator=g)}, {"x": torch.randn(1, 9, 4, generator=g)}]


@pytest.mark.parametrize("scale", [1e-10, 1.0])
def test_the_report_says_whether_zeros_would_pass(scale: float, caplog: pytest.LogCaptureFixture) -> None:
    first, second = _sets()
    result = export_onnx.export(ScaledLinear(scale).eval(), first, validation_inputs=[second])
    validation = result.report["validation"]
    assert validation["passed"] is True and len(validation["checks"]) == 2
    vacuous = scale < 1e-4
    assert validation["vacuous"] is vacuous
    assert ("vacuous_note" in validation) is vacuous
    for check in validation["checks"]:
        assert (check["eager_max_abs"] < 1e-8) is vacuous
    assert any("passed vacuously" in r.getMessage() for r in caplog.records) is vacuous


def test_a_single_leaf_of_order_one_makes_the_check_meaningful() -> None:
    tiny = torch.full((2, 3), 1e-9)
    large = torch.tensor([[0.5, -2.0]])
    checks = compare_leaves(["a", "b"], [torch.zeros(2, 3), torch.zeros(1, 2)], [tiny, large],
                            atol=1e-4, rtol=1e-3)
    assert checks[0].passed and checks[0].zeros_pass
    assert not checks[1].passed and not checks[1].zeros_pass
    assert checks[1].eager_max_abs == 2.0


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, torch.float16, torch.float32])
def test_integer_and_boolean_leaves_count_unless_all_zero(dtype: torch.dtype) -> None:
    for values, zeros_pass in (([0, 0, 0], True), ([0, 1, 0], False)):
        eager = torch.tensor(values).to(dtype)
        (check,) = compare_leaves(["y"], [eager.clone()], [eager], atol=1e-4, rtol=1e-3)
        assert check.passed and check.zeros_pass is zeros_pass


def test_non_finite_eager_values_are_never_vacuous() -> None:
    eager = torch.tensor([0.0, float("inf"), float("nan")])
    (check,) = compare_leaves(["y"], [eager.clone()], [eager], atol=1e-4, rtol=1e-3)
    assert check.passed and not check.zeros_pass and check.eager_max_abs == 0.0
    assert np.isnan(compare_leaves(["y"], [torch.tensor([float("nan")])], [torch.tensor([float("nan")])],
                                   atol=1e-4, rtol=1e-3)[0].eager_max_abs)


def test_the_note_says_what_to_do() -> None:
    assert "zeros would pass" in VACUOUS and "atol" in VACUOUS
