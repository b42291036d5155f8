"""The capture patch ``unvalidated_distributions``: a ``torch.distributions`` object built in
``forward`` (BLT's ``Categorical(logits=...).entropy()``) validates its arguments by branching on
``torch._is_all_true``, which fails the capture. With the patch the entropy and log-density
export with dynamic batch and sequence and match eager at three shapes; eager validation is back
after the export."""

from __future__ import annotations

import pytest
import torch

import export_onnx
from export_core import CaptureError
from export_core.registry import withheld

PATCH = "dynamo:torch.distributions.distribution.Distribution.__init__"


class Densities(torch.nn.Module):
    """``logits (batch, seq, vocab)`` and ``x (batch, seq)`` float32 -> the categorical entropy
    and a normal log-density, each ``(batch, seq)``."""

    def forward(self, logits: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # validate_args=True: independent of the process-wide default (another library may turn
        # it off)
        entropy = torch.distributions.Categorical(logits=logits, validate_args=True).entropy()
        scale = torch.nn.functional.softplus(logits[..., 0]) + 0.1
        normal = torch.distributions.Normal(logits[..., 1], scale, validate_args=True)
        return entropy, normal.log_prob(x)


def _inputs(batch: int, seq: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"logits": torch.randn(batch, seq, 11, generator=g), "x": torch.randn(batch, seq, generator=g)}


def test_distributions_export_and_match_eager() -> None:
    result = export_onnx.export(Densities().eval(), _inputs(2, 8, 0),
                                validation_inputs=[_inputs(3, 13, 1), _inputs(1, 5, 2)])
    assert result.report["validation"]["passed"] is True
    assert len(result.report["validation"]["checks"]) >= 3
    assert PATCH in result.report["patches"]["fired"]
    # restored: eager distributions validate again
    with pytest.raises(ValueError, match="constraint"):
        torch.distributions.Normal(torch.zeros(2), -torch.ones(2), validate_args=True)


def test_without_the_patch_the_capture_fails() -> None:
    with withheld("dynamo", PATCH), pytest.raises(CaptureError, match="data-dependent"):
        export_onnx.export(Densities().eval(), _inputs(2, 8, 0), validate=False)
