"""The ONNX FX node fix ``squeeze_only_unit_dims``: ``squeeze(x, dims)`` names exactly the
dimensions that are the constant 1 in the captured program (ONNX ``Squeeze`` raises on a
dimension that is not 1, torch's squeeze is a no-op there). Compared with eager in ONNX Runtime
at three shapes, batch 1 among them, for ``squeeze.dim`` and ``squeeze.dims``, with
``squeeze()`` (no dimension, left alone) alongside, on real model code (Parakeet RNN-T's joint
network); one half fails without the fix."""

from __future__ import annotations

import pytest
import torch

import export_onnx
from export_core import ExportError
from export_core.registry import withheld
from export_onnx.workarounds.squeeze_unit_dims import unit_dims
from export_sweep.zoo.build import build_tiny_model

FIX = "squeeze_only_unit_dims"


class _Joint(torch.nn.Module):
    """``forward(enc, dec)``: ``enc`` ``(batch, frames, 8)``, ``dec`` ``(batch, labels, 8)``
    float32 -> ``(batch, frames, labels, 8)``, the joint sum ``squeeze``d the way ``variant``
    says over the labels axis (a no-op unless there is one label) and the unit axis; with
    ``squeeze()`` also over the middle of a ``(batch, 1, frames, 8)`` copy (kept: never 1)."""

    def __init__(self, variant: str) -> None:
        super().__init__()
        self.variant = variant

    def forward(self, enc: torch.Tensor, dec: torch.Tensor) -> torch.Tensor:
        joint = (enc[:, :, None, None, :] + dec[:, None, :, None, :])  # (b, t, u, 1, 8)
        if self.variant == "dim":
            return joint.squeeze(2).squeeze(3)
        if self.variant == "dims":
            return joint.squeeze((2, 3))
        return joint.squeeze(2).squeeze((3,)) + enc[:, None].squeeze().sum()


def _pair(batch: int, frames: int, labels: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, frames, 8, generator=g), torch.randn(batch, labels, 8, generator=g)


VALIDATION = [_pair(3, 7, 4, 1), _pair(1, 2, 3, 2)]


@pytest.mark.parametrize("variant", ["dim", "dims", "with_default"])
def test_squeeze_matches_eager(variant: str) -> None:
    result = export_onnx.export(_Joint(variant), _pair(2, 5, 3, 0), validation_inputs=VALIDATION)
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["0"][0] for c in report["validation"]["checks"]] == [2, 3, 1]
    assert FIX in report["fixes"]["applied"]


def test_without_the_fix_the_model_does_not_load() -> None:
    """Documents torchlib's ``squeeze.dim`` of a non-unit axis (its ``squeeze.dims`` happens to
    load today): when this stops failing, the fix can go."""
    with withheld("onnx", FIX), pytest.raises(ExportError, match="must be 1"):
        export_onnx.export(_Joint("dim"), _pair(2, 5, 3, 0), validation_inputs=VALIDATION)


def test_unit_dims() -> None:
    """A symbolic size (modelled by a string) is never the constant 1."""
    assert unit_dims((2, 1, 5, 1), [0, 1, 2, 3]) == [1, 3]
    assert unit_dims((2, 1, 5, 1), [-1, 2, 3]) == [3]
    assert unit_dims(("s0", 1), [0, 1]) == [1]
    assert unit_dims((), [0]) == []


def test_parakeet_rnnt_matches_eager() -> None:
    """Real model code: the joint network's ``.squeeze(2)`` over the decoder length."""
    built = build_tiny_model("parakeet_rnnt")
    g = torch.Generator().manual_seed(0)
    shapes = [(2, 64, 5), (3, 96, 7), (1, 48, 2)]
    inputs = [{"input_features": torch.randn(b, t, 32, generator=g),
               "decoder_input_ids": torch.randint(1, 50, (b, u), generator=g)}
              for b, t, u in shapes]
    result = export_onnx.export(built.model, inputs[0], validation_inputs=inputs[1:])
    assert result.report["validation"]["passed"] is True
    assert len(result.report["validation"]["checks"]) == 3
    assert FIX in result.report["fixes"]["applied"]
