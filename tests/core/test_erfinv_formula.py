"""The capture fix ``erfinv_as_polynomial``: ``aten.erfinv`` (``Normal.icdf``) becomes Giles'
rational approximation, so models calling it translate to ONNX and lower to ExecuTorch (without
it: no ONNX function; not Core ATen). The approximation against a float64 ``erfinv`` over
``[-1, 1]``, and exports compared with eager at three shapes, batch 1 among them: the quantile of
a tensor and of a constant (Gemma 3n's activation sparsity)."""

from __future__ import annotations

import pytest
import torch

import export_executorch
import export_onnx
from export_core import ExportError
from export_core.registry import withheld
from export_core.workarounds.erfinv_formula import erfinv_approximation

FIX = "erfinv_as_polynomial"


class Quantiles(torch.nn.Module):
    """``x`` ``(batch, seq, 8)`` float32 -> same shape: the standard normal quantile of
    ``sigmoid(x)`` (in (0, 1)) plus ``x`` times the 0.95 quantile of a constant (Gemma 3n's
    ``_gaussian_topk`` form)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normal = torch.distributions.normal.Normal(0, 1)
        cutoff = normal.icdf(torch.tensor(0.95, dtype=torch.float32))
        return normal.icdf(torch.sigmoid(x) * 0.98 + 0.01) + x * cutoff


def _x(batch: int, seq: int, seed: int) -> tuple[torch.Tensor]:
    return (torch.randn(batch, seq, 8, generator=torch.Generator().manual_seed(seed)) * 3,)


def test_approximation_matches_erfinv() -> None:
    x = torch.linspace(-1, 1, 200_001, dtype=torch.float32)
    want = torch.erfinv(x.double())
    got = erfinv_approximation(x)
    assert got.dtype == torch.float32
    finite = torch.isfinite(want)
    relative = (got.double() - want).abs()[finite] / want.abs()[finite].clamp_min(1e-30)
    assert relative.max() < 3e-7
    assert got[0] == -float("inf") and got[-1] == float("inf")
    assert torch.isnan(erfinv_approximation(torch.tensor([1.5, -2.0]))).all()


@pytest.mark.parametrize("exporter", [export_onnx, export_executorch], ids=["onnx", "executorch"])
def test_quantiles_export_and_match_eager(exporter) -> None:
    result = exporter.export(Quantiles().eval(), _x(2, 5, 0), validation_inputs=[_x(3, 7, 1), _x(1, 4, 2)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) == 3
    assert FIX in report["fixes"]["applied"]


@pytest.mark.parametrize("exporter", [export_onnx, export_executorch], ids=["onnx", "executorch"])
def test_without_the_fix_erfinv_does_not_export(exporter) -> None:
    with withheld("dynamo", FIX), pytest.raises(ExportError, match="erf_inv|erfinv"):
        exporter.export(Quantiles().eval(), _x(2, 5, 0), validate=False)
