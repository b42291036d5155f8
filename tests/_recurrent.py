"""Shared by the LSTM tests of both backends: an RNN-T-style prediction network whose LSTM runs
over an input axis."""

from __future__ import annotations

import torch

__all__ = ["PredictionNetwork", "label_ids"]


class PredictionNetwork(torch.nn.Module):
    """``forward(ids)``: token ids ``(batch, labels)`` int64 -> embedded, run through an LSTM
    (batch first) and projected: ``(batch, labels, 12)`` float32. The LSTM's time axis is the
    input's own dimension (an RNN-T prediction network's shape)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(20, 8)
        self.lstm = torch.nn.LSTM(8, 16, batch_first=True)
        self.proj = torch.nn.Linear(16, 12)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.proj(self.lstm(self.embed(ids))[0])


def label_ids(batch: int, labels: int, seed: int) -> tuple[torch.Tensor]:
    return (torch.randint(0, 20, (batch, labels), generator=torch.Generator().manual_seed(seed)),)
