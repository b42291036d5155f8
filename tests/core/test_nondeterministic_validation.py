"""Validation of a model whose forward draws random numbers: when the artifact differs, eager is
run again on the same inputs; when eager disagrees with itself the error says so (and names the
random ops) instead of blaming the artifact. A deterministic mismatch keeps the plain message."""

from __future__ import annotations

import pytest
import torch

import export_onnx
from export_core import ValidationError
from export_core.validation import NONDETERMINISTIC, random_ops, validate


class Noisy(torch.nn.Module):
    """``x * 2`` plus Gaussian and uniform noise: (batch, features) float32 in and out."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2 + 0.5 * torch.randn_like(x) + torch.rand_like(x)


def test_a_sampling_model_fails_validation_with_the_reason() -> None:
    with pytest.raises(ValidationError) as info:
        export_onnx.export(Noisy().eval(), {"x": torch.randn(2, 5)},
                           validation_inputs=[{"x": torch.randn(3, 7)}])
    message = str(info.value)
    assert "eager itself differs between two runs" in message
    assert NONDETERMINISTIC in message
    assert "aten::rand_like, aten::randn_like" in message


def test_a_deterministic_mismatch_keeps_the_plain_message() -> None:
    model = torch.nn.Linear(3, 2).eval()
    result = validate(lambda inputs: [model(**inputs).detach() + 1.0], model,
                      [{"input": torch.randn(2, 3)}, {"input": torch.randn(4, 3)}], ["out"])
    assert not result.passed
    assert not result.eager_nondeterministic
    assert "eager itself" not in result.first_problem()
    assert all("eager_nondeterministic_max_abs" not in c for c in result.as_dict()["checks"])


def test_the_report_records_the_eager_disagreement() -> None:
    model = Noisy().eval()
    result = validate(lambda inputs: [model(**inputs)], model, [{"x": torch.randn(4, 6)}], ["out"])
    assert result.eager_nondeterministic
    assert result.as_dict()["checks"][0]["eager_nondeterministic_max_abs"] > 0


def test_random_ops_leave_dropout_out() -> None:
    class DropoutAndNoise(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.dropout(x, 0.1, training=False) + torch.randn_like(x)

    program = torch.export.export(DropoutAndNoise().eval(), (torch.randn(2, 3),))
    assert random_ops(program.graph_module) == ["aten::randn_like"]


def test_random_ops_are_found_inside_subgraphs() -> None:
    class NoGradNoise(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with torch.no_grad():
                noise = torch.rand_like(x)
            return x + noise

    program = torch.export.export(NoGradNoise().eval(), (torch.randn(2, 3),))
    assert random_ops(program.graph_module) == ["aten::rand_like"]
