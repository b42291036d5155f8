"""The XNNPACK partitioner patches of ``export_executorch.workarounds.xnnpack_reshape_dims``."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import export_executorch
from export_core.errors import LoweringError
from export_core.registry import withheld
from export_executorch.workarounds import xnnpack_reshape_dims as w

CONV_PATCH = f"{w._CONFIGS}.gemm_configs.ConvolutionConfig.check_constraints"


class FeatureEncoder(torch.nn.Module):
    """A wav2vec2-style front end: ``input_values`` (batch, samples) float32 ->
    (batch, frames, 8) with two strided 1-d convolutions."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = torch.nn.Conv1d(1, 8, kernel_size=10, stride=5)
        self.conv2 = torch.nn.Conv1d(8, 8, kernel_size=3, stride=2)

    def forward(self, input_values: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.gelu(self.conv1(input_values[:, None]))
        return self.conv2(h).transpose(1, 2)


def _wave(batch: int, samples: int, seed: int) -> dict[str, torch.Tensor]:
    return {"input_values": torch.randn(batch, samples, generator=torch.Generator().manual_seed(seed))}


def test_conv1d_over_dynamic_batch_and_time_lowers_and_matches_eager() -> None:
    torch.manual_seed(0)
    result = export_executorch.export(
        FeatureEncoder().eval(), _wave(2, 400, 0), validation_inputs=[_wave(3, 640, 1)]
    )
    checks = result.report["validation"]["checks"]
    assert [c["shapes"]["input_values"] for c in checks][:2] == [[2, 400], [3, 640]]
    assert f"executorch.xnnpack:{CONV_PATCH}" in result.report["patches"]["fired"]
    assert result.report["delegation"]["portable_ops"].get("aten.convolution.default") == 2


def test_without_the_patch_xnnpack_lowering_fails() -> None:
    """Documents the upstream bug: when this stops failing, the patch can go."""
    with withheld("executorch.xnnpack", CONV_PATCH), pytest.raises(
        LoweringError, match="XNNPACK reshape only supports 1 dynamic dimension"
    ):
        export_executorch.export(FeatureEncoder().eval(), _wave(2, 400, 0), validate=False)


def test_unsqueeze_with_two_dynamic_dims_is_rejected() -> None:
    class Mask(torch.nn.Module):
        def forward(self, mask: torch.Tensor) -> torch.Tensor:
            return mask.unsqueeze(-1) * 2

    ep = torch.export.export(Mask(), (torch.ones(2, 5),), dynamic_shapes=({0: Dim.AUTO, 1: Dim.AUTO},))
    node = next(n for n in ep.graph.nodes if n.target == torch.ops.aten.unsqueeze.default)
    assert w.dynamic_dims(node) == 2
    check = w.unsqueeze_with_one_dynamic_dim(lambda self, node, ep: True)
    assert check(None, node, ep) is False
    static = torch.export.export(Mask(), (torch.ones(2, 5),))
    node = next(n for n in static.graph.nodes if n.target == torch.ops.aten.unsqueeze.default)
    assert w.dynamic_dims(node) == 0 and check(None, node, static) is True
