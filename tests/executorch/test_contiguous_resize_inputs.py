"""The FX node fix ``contiguous_resize_inputs``: a resize of a channels-last strided tensor
(position embeddings stored ``(1, h, w, dim)`` and permuted to ``(1, dim, h, w)``, as DINOv2-style
``interpolate_pos_encoding`` does: Pixio) keeps that layout in eager PyTorch, and the lowering's
decomposition ends in a ``_clone_dim_order`` to channels-last; the next op's portable kernel
refuses inputs and outputs of different dim orders. With the fix the program matches eager at
three shapes (batch 1 among them) for each resize mode, on portable kernels and on XNNPACK;
without it, the portable program fails at run time."""

from __future__ import annotations

import pytest
import torch

import export_executorch
from export_core import RuntimeLoadError
from export_core.registry import withheld

FIX = "contiguous_resize_inputs"


class ResizedPositions(torch.nn.Module):
    """``pixels`` ``(batch, 3, height, width)`` float32 -> ``(batch, (height // 4) * (width //
    4), 16)``: 4 x 4 patches plus position embeddings of a 6 x 6 grid, stored ``(1, 6, 6, 16)``
    and resized to the patch grid."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.mode = mode
        self.patches = torch.nn.Conv2d(3, 16, 4, stride=4)
        self.positions = torch.nn.Parameter(torch.randn(1, 6, 6, 16))

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        tokens = self.patches(pixels).flatten(2).transpose(1, 2)
        grid = self.positions.permute(0, 3, 1, 2)  # channels-last strided
        size = (pixels.shape[2] // 4, pixels.shape[3] // 4)
        extra = {} if self.mode == "nearest" else {"align_corners": False}
        resized = torch.nn.functional.interpolate(grid, size=size, mode=self.mode, **extra)
        return tokens + resized.permute(0, 2, 3, 1).reshape(1, -1, 16)


def _pixels(batch: int, height: int, width: int, seed: int) -> tuple[torch.Tensor]:
    return (torch.randn(batch, 3, height, width, generator=torch.Generator().manual_seed(seed)),)


EXAMPLE = _pixels(2, 32, 32, 0)
VALIDATION = [_pixels(3, 40, 24, 1), _pixels(1, 48, 48, 2)]


@pytest.mark.parametrize("backend", ["portable", "xnnpack"])
@pytest.mark.parametrize("mode", ["bicubic", "bilinear", "nearest"])
def test_resized_positions_match_eager(mode: str, backend: str) -> None:
    result = export_executorch.export(ResizedPositions(mode).eval(), EXAMPLE, backend=backend,
                                      validation_inputs=VALIDATION, max_image_size=64)
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["0"] for c in report["validation"]["checks"]] == [
        [2, 3, 32, 32], [3, 3, 40, 24], [1, 3, 48, 48]]
    assert FIX in report["fixes"]["applied"]


def test_without_the_fix_the_portable_kernels_refuse_the_layout() -> None:
    """Documents the portable kernels' dim-order check: when this stops failing, the fix can go."""
    with withheld("executorch", FIX), pytest.raises(RuntimeLoadError, match="dim order"):
        export_executorch.export(ResizedPositions("bicubic").eval(), EXAMPLE, backend="portable",
                                 max_image_size=64)


def test_a_contiguous_input_is_left_alone() -> None:
    class Contiguous(ResizedPositions):
        def forward(self, pixels: torch.Tensor) -> torch.Tensor:
            size = (pixels.shape[2] // 4, pixels.shape[3] // 4)
            return torch.nn.functional.interpolate(pixels, size=size, mode="nearest")

    result = export_executorch.export(Contiguous("nearest").eval(), EXAMPLE, backend="portable",
                                      validation_inputs=VALIDATION, max_image_size=64)
    assert result.report["validation"]["passed"] is True
    assert FIX not in result.report["fixes"]["applied"]
