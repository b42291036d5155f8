"""The capture fix ``exact_integer_pow``: integer ``pow`` wraps in torch (BLT's rolling hash
raises 10-digit primes to powers in int64), but ONNX Runtime and ExecuTorch compute it in
floating point. Square-and-multiply in integer ops matches torch bit for bit, eagerly for every
overload and dtype, and through both backends at two shapes; without it the artifacts differ."""

from __future__ import annotations

import pytest
import torch

import export_executorch
import export_onnx
from export_core import ValidationError
from export_core.registry import withheld
from export_core.workarounds.integer_pow import integer_pow_by_squaring

PRIME = 9576890767


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_square_and_multiply_equals_torch_pow(dtype: torch.dtype) -> None:
    g = torch.Generator().manual_seed(0)
    info = torch.iinfo(dtype)
    base = torch.randint(max(info.min, -10**9), min(info.max, 10**9), (64,), generator=g).to(dtype)
    exponent = torch.randint(0, 40, (64,), generator=g).to(dtype)
    assert torch.equal(integer_pow_by_squaring(base, exponent, dtype), base ** exponent)
    for e in (0, 1, 2, 7, 31):  # Tensor_Scalar
        assert torch.equal(integer_pow_by_squaring(base, e, dtype), base ** e)
    for b in (0, 1, -3, 31, 127):  # Scalar, a base that fits the dtype
        if info.min <= b <= info.max:
            assert torch.equal(integer_pow_by_squaring(b, exponent, dtype), b ** exponent)


def test_large_powers_wrap_as_torch() -> None:
    exponent = torch.arange(8)
    want = torch.tensor(PRIME) ** exponent  # past 2**63 from the third power on
    assert torch.equal(integer_pow_by_squaring(torch.tensor(PRIME), exponent, torch.int64), want)
    assert torch.equal(integer_pow_by_squaring(PRIME, exponent, torch.int64), want)
    # an exponent known to stay below 8 (arange(8)) needs 3 bits only
    assert torch.equal(integer_pow_by_squaring(PRIME, exponent, torch.int64, max_exponent=7), want)
    assert torch.equal(integer_pow_by_squaring(torch.tensor(PRIME), exponent, torch.int64,
                                               max_exponent=7), want)


class Hash(torch.nn.Module):
    """Polynomial weights ``PRIME ** position`` (int64, wrapped), as float for comparison:
    ``ids (batch, seq)`` int64 -> ``(batch, seq)`` float32 (the low 24 bits, exactly)."""

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        powers = torch.tensor(PRIME) ** torch.arange(ids.shape[-1])
        weighted = ids * powers + ids ** 3 + 7 ** (ids % 13)  # ids >= 0
        return (weighted & ((1 << 24) - 1)).float()  # the low bits: no remainder of negatives


def _ids(batch: int, seq: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"ids": torch.randint(0, 260, (batch, seq), generator=g)}


@pytest.mark.parametrize("export", [export_onnx.export, export_executorch.export],
                         ids=["onnx", "executorch"])
def test_integer_powers_export_and_match_eager(export) -> None:
    result = export(Hash().eval(), _ids(2, 8, 0), validation_inputs=[_ids(3, 12, 1), _ids(1, 5, 2)])
    assert result.report["validation"]["passed"] is True
    assert len(result.report["validation"]["checks"]) >= 3
    assert "exact_integer_pow" in result.report["fixes"]["applied"]


def test_float_pow_is_left_alone() -> None:
    class Square(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x ** 2 + 2.0 ** x

    result = export_onnx.export(Square().eval(), {"x": torch.randn(2, 3)},
                                validation_inputs=[{"x": torch.randn(4, 5)}])
    assert "exact_integer_pow" not in result.report["fixes"]["applied"]


def test_without_the_fix_the_artifact_differs() -> None:
    with withheld("dynamo", "exact_integer_pow"), pytest.raises(ValidationError, match="differs"):
        export_onnx.export(Hash().eval(), _ids(2, 8, 0), validation_inputs=[_ids(3, 12, 1)])
