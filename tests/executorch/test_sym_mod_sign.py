"""The remainder of symbolic sizes through ExecuTorch (``python_sign_sym_mod``): Python's sign at
every shape, for negative dividends (padding to a multiple) and negative divisors, on both
backends; without the fix the runtime computes C++'s remainder and the program fails. LongT5,
whose local attention divided by a padded length of 0 (SIGFPE), matches eager."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import export_executorch
from export_core import RuntimeLoadError
from export_core.registry import withheld
from export_executorch.workarounds import sym_mod_sign

FIX = sym_mod_sign.python_sign_sym_mod.__name__


class PadToBlock(torch.nn.Module):
    """``(batch, seq, 3)`` -> ``(batch, ceil(seq / 4) * 4, 3)``: zero-padded to a multiple of 4
    with ``(-seq) % 4`` (a negative dividend), plus one."""

    def forward(self, x):
        return F.pad(x, (0, 0, 0, (-x.shape[1]) % 4)) + 1


class TrimByNegativeDivisor(torch.nn.Module):
    """``(batch, seq, 3)`` -> its first ``seq + seq % -3`` positions (``seq % -3`` is in
    ``(-3, 0]`` in Python; C++ gives ``[0, 3)``), doubled."""

    def forward(self, x):
        n = x.shape[1]
        return x[:, : n + n % -3] * 2


class KeepRemainder(torch.nn.Module):
    """``(batch, seq, 3)`` -> its first ``seq % 4 + 1`` positions: both operands positive, where
    the two sign rules agree."""

    def forward(self, x):
        return x[:, : x.shape[1] % 4 + 1] - 1


EXAMPLE = (torch.randn(2, 6, 3),)
VALIDATION = [(torch.randn(1, 9, 3),), (torch.randn(3, 4, 3),), (torch.randn(2, 7, 3),)]
"""Remainders 3, 0 and 1 of ``-seq % 4``, batch 1 among them."""


@pytest.mark.parametrize("model", [PadToBlock, TrimByNegativeDivisor, KeepRemainder],
                         ids=["negative_dividend", "negative_divisor", "positive"])
@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_remainders_of_sizes_match_eager_at_every_shape(model, backend) -> None:
    result = export_executorch.export(model().eval(), EXAMPLE, backend=backend,
                                      validation_inputs=VALIDATION)
    report = result.report
    assert report["status"] == "ok" and report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) == 4
    assert FIX in report["fixes"]["applied"]


def test_a_static_export_has_no_remainder_to_fix() -> None:
    report = export_executorch.export(PadToBlock().eval(), EXAMPLE, dynamic=False).report
    assert report["validation"]["passed"] is True
    assert FIX not in report["fixes"]["applied"]


def test_without_the_fix_the_runtime_pads_by_a_negative_amount() -> None:
    with withheld("executorch", FIX), pytest.raises(RuntimeLoadError,
                                                    match="Padding values must be non-negative"):
        export_executorch.export(PadToBlock().eval(), EXAMPLE, backend="portable",
                                 validation_inputs=VALIDATION)


@pytest.mark.slow
def test_longt5_local_attention_matches_eager() -> None:
    """LongT5 pads its sequence to a multiple of the block length with ``(-seq) % block``; the
    runtime's negative remainder made the padded length 0 and the next division by it raised
    SIGFPE, killing the process. (130 s: ``-m slow``; the sweep's full run measures LongT5 too.)"""
    from export_sweep.zoo import build_tiny_model

    tiny = build_tiny_model("longt5")
    result = export_executorch.export(tiny.model.eval(), tiny.inputs.first,
                                      validation_inputs=[tiny.inputs.second])
    report = result.report
    assert report["status"] == "ok" and report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) >= 2
    assert FIX in report["fixes"]["applied"]
