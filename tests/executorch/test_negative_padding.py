"""Constant pads with negative entries (crops) through ExecuTorch (``crop_negative_padding``):
RWKV's token shift ``nn.ZeroPad2d((0, 0, 1, -1))`` and crops on both sides of two dims with a
fill value, on both backends at four shapes; without the fix the runtime's ``constant_pad_nd``
refuses the program at the first shape."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import export_executorch
from export_core import RuntimeLoadError
from export_core.registry import withheld
from export_executorch.workarounds import negative_padding

FIX = negative_padding.crop_negative_padding.__name__


class TokenShift(torch.nn.Module):
    """``(batch, seq, 4)`` -> the same shape: every position gets its predecessor's features
    (zeros at position 0), RWKV's ``time_shift``."""

    def __init__(self):
        super().__init__()
        self.shift = torch.nn.ZeroPad2d((0, 0, 1, -1))

    def forward(self, x):
        return self.shift(x) * 2 + x


class CropAndFill(torch.nn.Module):
    """``(batch, seq, 4)`` -> ``(batch, seq - 1, 5)``: the last dim cropped by 1 at the front
    and padded by 2 at the back, the sequence padded by 1 at the front and cropped by 2 at the
    back, with 0.5."""

    def forward(self, x):
        return F.pad(x, (-1, 2, 1, -2), value=0.5) + 1


class PadOnly(torch.nn.Module):
    """``(batch, seq, 4)`` -> ``(batch, seq + 3, 4)``: non-negative padding, left alone."""

    def forward(self, x):
        return F.pad(x, (0, 0, 1, 2)) - 1


EXAMPLE = (torch.randn(2, 8, 4),)
VALIDATION = [(torch.randn(1, 5, 4),), (torch.randn(3, 11, 4),), (torch.randn(2, 3, 4),)]


@pytest.mark.parametrize("model", [TokenShift, CropAndFill], ids=["token_shift", "crop_and_fill"])
@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_negative_padding_matches_eager_at_every_shape(model, backend) -> None:
    report = export_executorch.export(model().eval(), EXAMPLE, backend=backend,
                                      validation_inputs=VALIDATION).report
    assert report["status"] == "ok" and report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) == 4
    assert FIX in report["fixes"]["applied"]


def test_non_negative_padding_is_left_alone() -> None:
    report = export_executorch.export(PadOnly().eval(), EXAMPLE, backend="portable",
                                      validation_inputs=VALIDATION).report
    assert report["validation"]["passed"] is True
    assert FIX not in report["fixes"]["applied"]


def test_split_padding_crops_then_pads() -> None:
    crops, padding = negative_padding.split_padding([-1, 2, 1, -2], ndim=3)
    assert crops == [(2, 1, 2**63 - 1), (1, 0, -2)]
    assert padding == [0, 2, 1, 0]
    x = torch.randn(2, 6, 4)
    y = x
    for dim, start, end in crops:
        y = torch.ops.aten.slice.Tensor(y, dim, start, end)
    torch.testing.assert_close(F.pad(y, padding, value=0.5), F.pad(x, (-1, 2, 1, -2), value=0.5))


def test_without_the_fix_the_runtime_refuses_negative_padding() -> None:
    with withheld("executorch", FIX), pytest.raises(RuntimeLoadError,
                                                    match="Padding values must be non-negative"):
        export_executorch.export(TokenShift().eval(), EXAMPLE, backend="portable",
                                 validation_inputs=VALIDATION)
