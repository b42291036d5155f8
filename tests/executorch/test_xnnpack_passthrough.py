"""The XNNPACK partitioner patches of ``export_executorch.workarounds.xnnpack_passthrough``: a
no-op clone whose removal inside the delegate would output a value twice or pass an input
through stays on portable kernels. Compared with eager in the ExecuTorch runtime at two shapes;
without the patches, lowering fails ("is already in the inputs")."""

from __future__ import annotations

import pytest
import torch

import export_executorch
from export_core.errors import LoweringError
from export_core.registry import withheld
from export_executorch.workarounds import xnnpack_passthrough as w

PATCHES = [f"{w._CONFIGS}.CloneDimOrderConfig.check_constraints",
           f"{w._CONFIGS}.CloneConfig.check_constraints"]


class PermuteTwoReaders(torch.nn.Module):
    """``x`` (batch, channels, time) float32 -> its (batch, time, channels) permutation, read by a
    ``reshape`` (a copy: the permutation is not viewable) and by a sum (executorch#19152) ->
    ``((batch, time * channels), (batch, channels))``."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x.permute(0, 2, 1)
        return y.reshape(x.shape[0], -1), y.sum(dim=1)


class CopyOfInput(torch.nn.Module):
    """``x`` (batch, time, 4) -> (``x.clone()``, ``x + 1``): a clone of a graph input that the
    graph returns."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.clone(), x + 1


def _x(*shape: int, seed: int) -> tuple[torch.Tensor]:
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)),)


CASES = {
    "permute-read-twice": (PermuteTwoReaders, _x(2, 3, 5, seed=0), _x(3, 4, 7, seed=1)),
    "clone-of-input": (CopyOfInput, _x(2, 6, 4, seed=0), _x(1, 9, 4, seed=1)),
}


@pytest.mark.parametrize("case", CASES)
def test_passthrough_clone_lowers_and_matches_eager(case: str) -> None:
    make, example, other = CASES[case]
    result = export_executorch.export(make().eval(), example, validation_inputs=[other])
    report = result.report
    assert report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) >= 2
    fired = set(report["patches"]["fired"])
    assert {f"executorch.xnnpack:{p}" for p in PATCHES} & fired, fired


def test_without_the_patches_xnnpack_lowering_fails() -> None:
    """Documents the upstream bug: when this stops failing, the patches can go."""
    make, example, _ = CASES["permute-read-twice"]
    with withheld("executorch.xnnpack", PATCHES[0]), withheld("executorch.xnnpack", PATCHES[1]):
        with pytest.raises(LoweringError, match="is already in the inputs"):
            export_executorch.export(make().eval(), example, validate=False)


def test_a_clone_with_one_reader_stays_delegated() -> None:
    class Chain(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x * 2).clone() + 1

    ep = torch.export.export(Chain(), (torch.randn(2, 3),))
    clone = next(n for n in ep.graph.nodes if n.target == torch.ops.aten.clone.default)
    assert w.may_pass_through(clone) is False
    ep = torch.export.export(CopyOfInput(), (torch.randn(2, 3, 4),))
    clone = next(n for n in ep.graph.nodes if n.target == torch.ops.aten.clone.default)
    assert w.may_pass_through(clone) is True
