"""``prelu`` through XNNPACK on inputs that are not 4-D: the layout pass converts every delegated
``prelu``'s input to NHWC and fails on other ranks ("Attempting to convert non-NHWC compatible
node to NHWC"). ``prelu_off_images_as_clamps`` rewrites them as ``clamp`` / ``mul`` / ``add``;
4-D inputs keep XNNPACK's PReLU. Compared with eager at three shapes (batch 1 among them), with
one shared slope and one per channel, at ranks 2 and 3; without the fix lowering fails."""

from __future__ import annotations

import pytest
import torch

import export_executorch
from export_core import LoweringError
from export_core.registry import withheld

FIX = "prelu_off_images_as_clamps"


class Mlp(torch.nn.Module):
    """``x`` ``(batch, channels, *rest)`` float32 -> same shape: a channel mix (a 1x1
    projection on axis 1) and a ``PReLU`` with ``slopes`` parameters (1 or ``channels``)."""

    def __init__(self, channels: int, slopes: int):
        super().__init__()
        torch.manual_seed(0)
        self.mix = torch.nn.Linear(channels, channels)
        self.act = torch.nn.PReLU(slopes)
        with torch.no_grad():
            self.act.weight.uniform_(0.05, 0.6)  # distinct slopes, none at the default 0.25

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mixed = self.mix(x.movedim(1, -1)).movedim(-1, 1)
        return self.act(mixed)


def _inputs(rest: tuple[int, ...], channels: int) -> list[tuple[torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    grown = tuple(size + 2 for size in rest)
    return [(torch.randn(batch, channels, *sizes, generator=g),)
            for batch, sizes in [(2, rest), (3, grown), (1, rest)]]


@pytest.mark.parametrize("rest", [(), (7,)], ids=["rank2", "rank3"])
@pytest.mark.parametrize("slopes", [1, 6], ids=["shared", "per_channel"])
def test_prelu_off_images_matches_eager(rest: tuple[int, ...], slopes: int) -> None:
    first, *validation = _inputs(rest, 6)
    result = export_executorch.export(Mlp(6, slopes).eval(), first, validation_inputs=validation)
    report = result.report
    assert report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) == 3
    assert FIX in report["fixes"]["applied"]
    assert "aten.clamp.default" not in report["delegation"]["portable_ops"]


def test_image_prelu_is_left_to_xnnpack() -> None:
    first, *validation = _inputs((5, 5), 6)
    result = export_executorch.export(Mlp(6, 6).eval(), first, validation_inputs=validation)
    assert result.report["validation"]["passed"] is True
    assert FIX not in result.report["fixes"]["applied"]


def test_portable_runs_prelu_of_any_rank_without_the_fix() -> None:
    first, *validation = _inputs((7,), 6)
    result = export_executorch.export(Mlp(6, 6).eval(), first, backend="portable",
                                      validation_inputs=validation)
    assert result.report["validation"]["passed"] is True
    assert FIX not in result.report["fixes"]["applied"]


def test_without_the_fix_lowering_fails() -> None:
    """Documents the fault: when this stops failing, the fix can go."""
    first, *validation = _inputs((7,), 6)
    with withheld("executorch.xnnpack", FIX), \
            pytest.raises(LoweringError, match="non-NHWC compatible node"):
        export_executorch.export(Mlp(6, 1).eval(), first, validation_inputs=validation)
