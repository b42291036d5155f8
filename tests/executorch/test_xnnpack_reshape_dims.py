"""The XNNPACK partitioner patches of ``export_executorch.workarounds.xnnpack_reshape_dims``."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import export_executorch
from export_core.errors import LoweringError
from export_core.patching import PatchSession
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
    static_session, session = PatchSession(), PatchSession()
    static = torch.export.export(Mask(), (torch.ones(2, 5),))
    static_node = next(n for n in static.graph.nodes if n.target == torch.ops.aten.unsqueeze.default)
    check = w.unsqueeze_with_one_dynamic_dim(lambda self, node, ep: True, static_session)
    assert w.dynamic_dims(static_node) == 0 and check(None, static_node, static) is True
    assert static_session.fired == []  # fired only when it turns a node away
    check = w.unsqueeze_with_one_dynamic_dim(lambda self, node, ep: True, session)
    assert check(None, node, ep) is False
    assert session.fired == [f"executorch.xnnpack:{w._CONFIGS}.generic_node_configs.UnsqueezeCopyConfig"
                             ".check_constraints"]


BATCH_NORM_PATCH = f"{w._CONFIGS}.node_configs.BatchNormConfig.check_constraints"


class ConformerConvTail(torch.nn.Module):
    """A conformer convolution module's tail: ``hidden`` (batch, time, 8) float32 -> a
    depthwise 1-d convolution over time, then ``BatchNorm1d`` -> (batch, time, 8)."""

    def __init__(self, depthwise: bool) -> None:
        super().__init__()
        self.depthwise = torch.nn.Conv1d(8, 8, kernel_size=3, padding=1, groups=8) if depthwise else None
        self.norm = torch.nn.BatchNorm1d(8)
        with torch.no_grad():  # running statistics other than the identity ones
            self.norm.running_mean.uniform_(-1.0, 1.0)
            self.norm.running_var.uniform_(0.5, 2.0)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        h = hidden.transpose(1, 2)
        if self.depthwise is not None:
            h = self.depthwise(h)
        return torch.nn.functional.silu(self.norm(h)).transpose(1, 2)


class ImageNorm(torch.nn.Module):
    """``pixel_values`` (batch, 3, height, width) -> ``BatchNorm2d`` -> ReLU."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.BatchNorm2d(3)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm(pixel_values))


def _hidden(batch: int, time: int, seed: int) -> dict[str, torch.Tensor]:
    return {"hidden": torch.randn(batch, time, 8, generator=torch.Generator().manual_seed(seed))}


@pytest.mark.parametrize("depthwise", [False, True], ids=["batch-norm", "depthwise-conv-batch-norm"])
def test_batch_norm_1d_over_dynamic_batch_and_time_lowers_and_matches_eager(depthwise: bool) -> None:
    torch.manual_seed(0)
    result = export_executorch.export(
        ConformerConvTail(depthwise).eval(), _hidden(2, 12, 0), validation_inputs=[_hidden(3, 20, 1)]
    )
    checks = result.report["validation"]["checks"]
    assert [c["shapes"]["hidden"] for c in checks][:2] == [[2, 12, 8], [3, 20, 8]]
    assert all(c["passed"] for c in checks)
    assert f"executorch.xnnpack:{BATCH_NORM_PATCH}" in result.report["patches"]["fired"]
    portable = result.report["delegation"]["portable_ops"]
    assert portable.get("aten._native_batch_norm_legit_no_training.default") == 1, portable


def test_without_the_batch_norm_patch_xnnpack_lowering_fails() -> None:
    """Documents the upstream bug: when this stops failing, the patch can go."""
    with withheld("executorch.xnnpack", BATCH_NORM_PATCH), pytest.raises(
        LoweringError, match="XNNPACK reshape only supports 1 dynamic dimension"
    ):
        export_executorch.export(ConformerConvTail(False).eval(), _hidden(2, 12, 0), validate=False)


def test_batch_norm_with_one_dynamic_dim_or_on_images_stays_delegated() -> None:
    check = w.batch_norm_1d_with_one_dynamic_dim(lambda self, node, ep: True, PatchSession())

    def batch_norm_node(ep: torch.export.ExportedProgram) -> torch.fx.Node:
        return next(n for n in ep.graph.nodes if "batch_norm" in str(n.target))

    time_only = torch.export.export(ConformerConvTail(False).eval(), (torch.randn(1, 12, 8),),
                                    dynamic_shapes=({1: Dim("time", min=2, max=64)},))
    assert check(None, batch_norm_node(time_only), time_only) is True
    images = torch.export.export(ImageNorm().eval(), (torch.randn(2, 3, 16, 16),),
                                 dynamic_shapes=({0: Dim.AUTO, 2: Dim.AUTO, 3: Dim.AUTO},))
    assert check(None, batch_norm_node(images), images) is True
    both = torch.export.export(ConformerConvTail(False).eval(), (torch.randn(2, 12, 8),),
                               dynamic_shapes=({0: Dim.AUTO, 1: Dim.AUTO},))
    assert check(None, batch_norm_node(both), both) is False
