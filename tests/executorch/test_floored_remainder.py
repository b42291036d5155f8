"""The FX node fix ``floored_integer_remainder``: ExecuTorch's portable integer ``remainder``
kernels return C's truncated remainder (``-20 % 7 == -6``), torch the sign of the divisor
(``1``). Integer ``%`` by a scalar and by a tensor, negative dividends and divisors, int64 and
int32, match eager on both backends at three shapes; without the fix the program runs and
returns wrong values."""

from __future__ import annotations

import pytest
import torch

import export_executorch
from export_core import ValidationError
from export_core.registry import withheld


class Remainders(torch.nn.Module):
    """``x (batch, n)`` and ``y (batch, n)`` integers (``y`` nonzero), ``f (batch, n)`` float:
    Python-style remainders, as float32 ``(5, batch, n)``."""

    def forward(self, x: torch.Tensor, y: torch.Tensor, f: torch.Tensor) -> torch.Tensor:
        parts = [x % 7, x % y, torch.remainder(x, -5), (x * 7919) % 30000, f % 3.0]
        return torch.stack([p.float() for p in parts])


def _inputs(batch: int, n: int, seed: int, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(1, 9, (batch, n), generator=g) * (torch.randint(0, 2, (batch, n), generator=g) * 2 - 1)
    return {"x": torch.randint(-100, 100, (batch, n), generator=g).to(dtype), "y": y.to(dtype),
            "f": torch.randn(batch, n, generator=g) * 10}


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_integer_remainders_match_eager(backend: str, dtype: torch.dtype) -> None:
    result = export_executorch.export(
        Remainders().eval(), _inputs(2, 8, 0, dtype), backend=backend,
        validation_inputs=[_inputs(3, 13, 1, dtype), _inputs(1, 5, 2, dtype)])
    assert result.report["validation"]["passed"] is True
    assert len(result.report["validation"]["checks"]) >= 3
    assert "floored_integer_remainder" in result.report["fixes"]["applied"]


def test_without_the_fix_negative_dividends_come_out_wrong() -> None:
    with withheld("executorch", "floored_integer_remainder"), \
            pytest.raises(ValidationError, match="differs from eager"):
        export_executorch.export(Remainders().eval(), _inputs(2, 8, 0, torch.int64),
                                 backend="portable", validation_inputs=[_inputs(3, 13, 1, torch.int64)])
