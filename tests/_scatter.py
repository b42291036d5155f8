"""A ``scatter_reduce`` model shared by the ONNX and ExecuTorch tests of the op."""

from __future__ import annotations

import torch


class ScatterReduce(torch.nn.Module):
    """``base.scatter_reduce(dim, index, src, reduce, include_self=...)`` with the options fixed
    at construction; inputs ``(base, src, index)``."""

    def __init__(self, reduce: str, include_self: bool, dim: int = 0):
        super().__init__()
        self.reduce, self.include_self, self.dim = reduce, include_self, dim

    def forward(self, base, src, index):
        return base.scatter_reduce(self.dim, index, src, reduce=self.reduce,
                                   include_self=self.include_self)
