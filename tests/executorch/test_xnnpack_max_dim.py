"""``max.dim`` over every axis of a 4-d tensor, with and without ``keepdim``, through XNNPACK: the
reductions its serializer takes (dim 2 or 3, ``keepdim=True``) stay delegated, the others run on
portable kernels (``max_dim_as_xnnpack_serializes_it``); all equal eager at two batch sizes.
Without the patch lowering fails."""

from __future__ import annotations

import pytest
import torch

import export_executorch
from export_core import LoweringError
from export_core.registry import withheld

PATCH = "executorch.backends.xnnpack.partition.config.node_configs.MaxDimConfig.check_constraints"


class MaxOver(torch.nn.Module):
    def __init__(self, dim: int, keepdim: bool):
        super().__init__()
        self.dim, self.keepdim = dim, keepdim

    def forward(self, x):  # (batch, channels, height, width)
        return torch.max(x, self.dim, keepdim=self.keepdim)[0] * 2


@pytest.mark.parametrize("keepdim", [True, False], ids=["keepdim", "dropdim"])
@pytest.mark.parametrize("dim", [1, 2, 3, -1])
def test_max_dim_lowers_and_matches_eager(dim, keepdim):
    result = export_executorch.export(MaxOver(dim, keepdim).eval(), (torch.randn(2, 3, 4, 5),),
                                      validation_inputs=[(torch.randn(3, 3, 4, 5),), (torch.randn(1, 3, 4, 5),)])
    report = result.report
    assert report["status"] == "ok" and report["validation"]["passed"] is True
    rejected = not (keepdim and dim in (2, 3))
    assert (f"executorch.xnnpack:{PATCH}" in report["patches"]["fired"]) is rejected


def test_without_the_patch_lowering_fails():
    with withheld("executorch.xnnpack", PATCH), pytest.raises(LoweringError, match="only supports"):
        export_executorch.export(MaxOver(1, True).eval(), (torch.randn(2, 3, 4, 5),))
