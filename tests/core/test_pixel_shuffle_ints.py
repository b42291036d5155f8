"""The capture patch ``integer_pixel_shuffle``: InternVL's / Qianfan-OCR's pixel shuffle sized
with integer division, not a float modulus of a symbolic size (``ValueRangeError`` at capture).
The integer form equals the model's own for several maps and ratios; InternVL exports through
the public API and matches eager at two shapes (tests/onnx/test_output_names.py); one half fails
without the patch."""

from __future__ import annotations

import pytest
import torch
from transformers.models.internvl.modeling_internvl import InternVLModel

import export_onnx
from export_core import ExportError
from export_core.registry import withheld
from export_core.workarounds.pixel_shuffle_ints import shuffle_with_ints
from export_sweep.zoo.build import build_tiny_model

PATCH = "dynamo:transformers.models.internvl.modeling_internvl.InternVLModel.pixel_shuffle"


@pytest.mark.parametrize(("shape", "scale"), [((2, 8, 8, 4), 0.5), ((1, 4, 6, 3), 0.5),
                                              ((3, 8, 4, 2), 0.25)])
def test_integer_shuffle_equals_the_models(shape: tuple[int, ...], scale: float) -> None:
    x = torch.randn(*shape)
    expected = InternVLModel.pixel_shuffle(None, x, scale_factor=scale)
    assert torch.equal(shuffle_with_ints(x, round(1 / scale)), expected)


def test_a_map_that_does_not_divide_is_refused() -> None:
    with pytest.raises(ValueError, match="divisible"):
        shuffle_with_ints(torch.randn(1, 5, 4, 2), 2)


def test_without_the_patch_the_capture_fails() -> None:
    """Documents the float modulus: when this stops failing, the patch can go."""
    built = build_tiny_model("internvl", forward=True)
    with withheld("dynamo", PATCH), pytest.raises(ExportError, match="ValueRangeError"):
        export_onnx.export(built.model, built.inputs.first)
