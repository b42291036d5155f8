"""The FX node fix ``pin_attention_layout_for_views``: an SDPA output whose views were resolved on
the captured layout is copied into that layout, so ExecuTorch's SDPA decomposition cannot make
them non-viewable. GPT-2's ``contiguous().view`` (the ``contiguous`` vanishes at capture) fails to
lower without the fix; a ``reshape`` chain that an earlier re-trace (``decompose_missing_kernels``,
here through a ``Conv3d``) resolved into views (ViViT) must keep lowering with it (a contiguous
``clone`` before each view, the fix's first form, broke the chain's second view). Each is
compared with eager in the ExecuTorch runtime at two shapes, on the portable kernels: on XNNPACK
``attention_in_delegated_ops`` replaces the SDPA by ops laid out as the captured output was, so
the views stay valid without a pin (checked below too)."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import export_executorch
from export_core import LoweringError
from export_core.registry import withheld

FIX = "pin_attention_layout_for_views"
XNNPACK_ATTENTION = "attention_in_delegated_ops"


class Attention(torch.nn.Module):
    """``hidden`` (batch, seq, 16) float32 -> multi-head SDPA (4 heads of 4) -> (batch, seq, 16).

    ``merge``: ``"contiguous-view"`` merges heads, batch and sequence as GPT-2's ``Conv1D``
    does (``transpose(1, 2).contiguous().view(-1, hidden)``), ``"reshape"`` merges the heads as
    ViViT does (``reshape`` to (batch, heads, seq, dim), ``transpose``, ``reshape``)."""

    def __init__(self, merge: str) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)
        self.out = torch.nn.Linear(16, 16)
        self.merge = merge

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = hidden.shape
        q, k, v = self.qkv(hidden).view(batch, seq, 3, 4, 4).permute(2, 0, 3, 1, 4)
        attn = torch.nn.functional.scaled_dot_product_attention(q, k, v)
        if self.merge == "contiguous-view":
            rows = attn.transpose(1, 2).contiguous().view(-1, 16)
            return self.out(rows).view(batch, seq, 16)
        merged = attn.reshape(batch, 4, seq, 4).transpose(1, 2).reshape(batch, seq, -1)
        return self.out(merged)


class VideoAttention(torch.nn.Module):
    """``pixel_values_videos`` (batch, 3, frames, 8, 8) -> ``Conv3d`` tubelets -> the
    ``reshape`` attention above -> (batch, tokens, 16)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Conv3d(3, 16, (2, 4, 4), stride=(2, 4, 4))
        self.attention = Attention("reshape")

    def forward(self, pixel_values_videos: torch.Tensor) -> torch.Tensor:
        return self.attention(self.embed(pixel_values_videos).flatten(2).transpose(1, 2))


def _hidden(batch: int, seq: int, seed: int) -> tuple[torch.Tensor]:
    return (torch.randn(batch, seq, 16, generator=torch.Generator().manual_seed(seed)),)


def _video(batch: int, frames: int, seed: int) -> tuple[torch.Tensor]:
    return (torch.randn(batch, 3, frames, 8, 8, generator=torch.Generator().manual_seed(seed)),)


# batch and frames dynamic, the frame size fixed: attention over every token of a 224-pixel,
# 224-frame video would plan a memory arena of terabytes
VIDEO_DIMS = ({0: Dim("batch", min=1, max=4), 2: Dim("frames", min=2, max=16)},)

CASES = {
    "gpt2-contiguous-view": (lambda: Attention("contiguous-view"), _hidden(2, 9, 0), _hidden(3, 5, 1), None),
    "vivit-reshape-after-retrace": (VideoAttention, _video(2, 6, 0), _video(3, 10, 1), VIDEO_DIMS),
}


@pytest.mark.parametrize("case", CASES)
def test_view_of_attention_lowers_and_matches_eager(case: str) -> None:
    make, example, other, dims = CASES[case]
    torch.manual_seed(0)
    result = export_executorch.export(make().eval(), example, dynamic_shapes=dims,
                                      backend="portable", validation_inputs=[other])
    report = result.report
    assert report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) >= 2
    assert FIX in report["fixes"]["applied"]


@pytest.mark.parametrize("case", CASES)
def test_xnnpack_attention_keeps_the_captured_layout(case: str) -> None:
    make, example, other, dims = CASES[case]
    torch.manual_seed(0)
    result = export_executorch.export(make().eval(), example, dynamic_shapes=dims,
                                      backend="xnnpack", validation_inputs=[other])
    report = result.report
    assert report["validation"]["passed"] is True
    assert XNNPACK_ATTENTION in report["fixes"]["applied"]
    assert FIX not in report["fixes"]["applied"]


def test_without_the_fix_lowering_cannot_view_the_attention_output() -> None:
    """Documents the upstream bug (GPT-2's view): when this stops failing, the fix can go."""
    make, example, _, dims = CASES["gpt2-contiguous-view"]
    with withheld("executorch", FIX), pytest.raises(LoweringError, match="Cannot view a tensor"):
        export_executorch.export(make().eval(), example, dynamic_shapes=dims, backend="portable",
                                 validate=False)
