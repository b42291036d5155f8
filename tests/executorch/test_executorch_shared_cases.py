"""The shared failing cases of ExecuTorch (../shared/cases 21, 22, 24), as written, through
``export_executorch.export``; the variants of each kind are in ``test_missing_kernels.py`` and
``test_declared_dims.py``."""

from __future__ import annotations

import torch
from torch.export import Dim

import export_executorch


def _ok(result, fix: str):
    report = result.report
    assert report["status"] == "ok", report["error"]
    assert report["validation"]["passed"] and len(report["validation"]["checks"]) >= 2
    assert fix in report["fixes"]["applied"]


def test_case21_scatter_reduce_amax_without_self():
    class MaxAggregate(torch.nn.Module):
        def forward(self, messages, dst):
            out = torch.zeros(4, messages.shape[1])
            idx = dst[:, None].expand(-1, messages.shape[1])
            return out.scatter_reduce(0, idx, messages, reduce="amax", include_self=False)

    torch.manual_seed(0)
    messages = torch.randn(6, 3)
    dst = torch.tensor([0, 2, 0, 1, 2, 2])  # node 3 receives nothing and stays 0
    r = export_executorch.export(MaxAggregate().eval(), (messages, dst),
                                 validation_inputs=[(torch.randn(6, 3), torch.tensor([3, 3, 1, 1, 0, 2]))])
    _ok(r, "decompose_missing_kernels")


def test_case22_bucketize():
    class Bucketizer(torch.nn.Module):
        def forward(self, x, boundaries):
            return torch.bucketize(x, boundaries)

    x = torch.tensor([[1.5, 2.5, -3.0, 0.0], [7.0, 4.5, 3.5, 6.0]])
    boundaries = torch.tensor([0.0, 1.0, 2.5, 4.0, 6.5])  # ties on 0.0 and 2.5: right=False
    x2 = torch.tensor([[9.0, -1.0, 1.0, 4.0], [2.0, 6.5, 0.5, 3.0]])
    r = export_executorch.export(Bucketizer().eval(), (x, boundaries), dynamic=False,
                                 validation_inputs=[(x2, boundaries)])
    report = r.report
    assert report["status"] == "ok" and report["validation"]["passed"]
    assert "decompose_missing_kernels" in report["fixes"]["applied"]


def test_case24_unbounded_dim_gets_a_real_bound():
    class Frontend(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, x):  # x: (batch, n, 8) with a variable length n
            y = self.proj(x)
            return torch.cat([y, y.cumsum(1)], dim=-1)

    torch.manual_seed(0)
    x4, x9 = torch.randn(1, 4, 8), torch.randn(1, 9, 8)
    r = export_executorch.export(Frontend().eval(), (x4,), dynamic_shapes=({1: Dim("n")},),
                                 validation_inputs=[(x9,)])
    _ok(r, "bound_dynamic_dims")
    assert {next(iter(c["shapes"].values()))[1] for c in r.report["validation"]["checks"]} >= {4, 9}
