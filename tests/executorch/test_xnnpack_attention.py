"""Attention through XNNPACK: ``attention_in_delegated_ops`` decomposes
``scaled_dot_product_attention`` into ops XNNPACK delegates (executorch#4461), instead of torch's
math decomposition, whose fully-masked-row guard (``eq`` / ``logical_not`` / ``any`` / ``where``
over the scores), ``mul.Scalar`` and ``expand_copy`` ran score-sized on portable kernels.

The decomposition is compared with eager PyTorch on every kind of operand it covers (masks of
both kinds with a fully masked row, causal, scale, grouped-query heads, 3-d and float64), then
exported with dynamic shapes and compared with eager at three shapes (batch 1 among them, a
sample whose mask is all zeros in one); without the fix the same program keeps those ops outside
the delegate."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import export_executorch
from export_core.inputs import make_example_inputs
from export_core.registry import withheld
from export_executorch.workarounds.xnnpack_attention import attention_for_xnnpack, covers
from export_sweep.zoo.build import build_tiny_model

FIX = "attention_in_delegated_ops"
SCORE_SIZED = ("aten.eq.Scalar", "aten.logical_not.default", "aten.mul.Scalar")
"""Portable ops torch's decomposition leaves over the (N, H, L, S) scores or the operands (and
``expand_copy``, an operand expanded to its own shape, where the heads are not grouped: with
grouped-query heads an ``expand`` repeats them, as torch's decomposition does too)."""


def _randn(*shape: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _padding_mask(batch: int, length: int, source: int, seed: int) -> torch.Tensor:
    """``(batch, 1, length, source)`` bool, random, query row 1 of sample 0 masked throughout."""
    mask = torch.rand(batch, 1, length, source, generator=torch.Generator().manual_seed(seed)) > 0.4
    mask[0, 0, 1] = False
    return mask


def _operand_cases() -> dict[str, tuple[tuple[torch.Tensor, ...], dict]]:
    q, k, v = _randn(2, 4, 5, 8, seed=0), _randn(2, 4, 7, 8, seed=1), _randn(2, 4, 7, 6, seed=2)
    mask = _padding_mask(2, 5, 7, seed=3)
    additive = torch.where(mask, 0.0, float("-inf"))
    lowest = torch.where(mask, 0.0, torch.finfo(torch.float32).min)
    kv_grouped = _randn(2, 2, 7, 8, seed=4)
    square = _randn(2, 4, 7, 8, seed=5)
    return {
        "no mask": ((q, k, v), {}),
        "bool mask": ((q, k, v), {"attn_mask": mask}),
        "-inf mask": ((q, k, v), {"attn_mask": additive}),
        "finfo.min mask": ((q, k, v), {"attn_mask": lowest}),
        "(L, S) mask": ((q, k, v), {"attn_mask": mask[0, 0]}),
        "scale": ((q, k, v), {"attn_mask": mask, "scale": 0.3}),
        "causal, L == S": ((square, square, square), {"is_causal": True}),
        "causal, L < S": ((q, k, v), {"is_causal": True}),
        "causal, L > S": ((square, q, q), {"is_causal": True}),
        "grouped-query heads": ((q, kv_grouped, kv_grouped), {"attn_mask": mask, "enable_gqa": True}),
        "3-d": ((q[0], k[0], v[0]), {"attn_mask": mask[0]}),
        "float64": ((q.double(), k.double(), v.double()), {"attn_mask": mask}),
    }


CASES = _operand_cases()


@pytest.mark.parametrize("case", list(CASES))
def test_decomposition_equals_eager_attention(case):
    (q, k, v), kwargs = CASES[case]
    assert covers(q, k, v, kwargs.get("attn_mask"), 0.0, kwargs.get("is_causal", False),
                  kwargs.get("enable_gqa", False))
    ours = attention_for_xnnpack(q, k, v, **kwargs)
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, **kwargs))
    assert ours.is_contiguous() and ours.dtype == q.dtype


def test_a_fully_masked_row_is_zero_as_safe_softmax_makes_it():
    (q, k, v), kwargs = CASES["bool mask"]
    for mask in (kwargs["attn_mask"], torch.where(kwargs["attn_mask"], 0.0, float("-inf"))):
        ours = attention_for_xnnpack(q, k, v, attn_mask=mask)
        assert not ours.isnan().any()
        assert ours[0, :, 1].abs().max() == 0


def test_operands_it_does_not_cover_are_refused():
    (q, k, v), kwargs = CASES["bool mask"]
    mask = kwargs["attn_mask"]
    assert not covers(q, k, v, None, 0.1, False, False)  # dropout
    assert not covers(q, k, v, mask, 0.0, True, False)  # causal and a mask
    assert not covers(q[0, 0], k[0, 0], v[0, 0], None, 0.0, False, False)  # 2-d
    assert not covers(q[0], k[0], v[0], mask, 0.0, False, False)  # a mask of higher rank
    assert not covers(q, k[:, :3], v[:, :3], None, 0.0, False, True)  # 4 heads over 3
    assert not covers(q, k[:1], v[:1], None, 0.0, False, False)  # a broadcast batch
    with pytest.raises(ValueError, match="does not cover"):
        attention_for_xnnpack(q, k, v, dropout_p=0.1)


class SelfAttention(torch.nn.Module):
    """``x`` ``(batch, seq, 32)`` float32 and ``attention_mask`` ``(batch, seq)`` int64 (1: a
    token) -> ``(batch, seq, 32)``: 4 query heads of 8 (``kv_heads`` key / value heads) with
    ``mask`` "bool" (padding), "float" (additive ``-inf``), "none" or "causal"; the heads are
    merged back with ``transpose(1, 2).reshape``, a view of the attention output's layout."""

    def __init__(self, mask: str, kv_heads: int = 4):
        super().__init__()
        torch.manual_seed(0)
        self.mask, self.kv_heads = mask, kv_heads
        self.q = torch.nn.Linear(32, 32)
        self.kv = torch.nn.Linear(32, 2 * 8 * kv_heads)
        self.out = torch.nn.Linear(32, 32)

    def forward(self, x, attention_mask):
        b, s, _ = x.shape
        q = self.q(x).view(b, s, 4, 8).transpose(1, 2)
        k, v = self.kv(x).view(b, s, 2, self.kv_heads, 8).permute(2, 0, 3, 1, 4)
        mask = attention_mask[:, None, None, :].bool()
        kwargs = {"enable_gqa": self.kv_heads != 4}
        if self.mask == "bool":
            kwargs["attn_mask"] = mask
        elif self.mask == "float":
            kwargs["attn_mask"] = torch.zeros(mask.shape, dtype=x.dtype).masked_fill(~mask, float("-inf"))
        elif self.mask == "causal":
            kwargs["is_causal"] = True
        y = F.scaled_dot_product_attention(q, k, v, **kwargs)
        return self.out(y.transpose(1, 2).reshape(b, s, 32))


def _inputs(batch: int, seq: int, seed: int, empty_sample: bool = False) -> tuple[torch.Tensor, ...]:
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[0, seq // 2:] = 0
    if empty_sample:
        mask[-1] = 0  # a sample with no token: every row of it masked throughout
    return _randn(batch, seq, 32, seed=seed), mask


VALIDATION = [_inputs(3, 9, 1, empty_sample=True), _inputs(1, 4, 2)]


@pytest.mark.parametrize(("mask", "kv_heads"), [("bool", 4), ("float", 4), ("none", 4),
                                                ("causal", 2), ("bool", 2)])
def test_attention_is_delegated_and_matches_eager(mask, kv_heads):
    result = export_executorch.export(SelfAttention(mask, kv_heads).eval(), _inputs(2, 6, 0),
                                      validation_inputs=VALIDATION)
    report = result.report
    assert report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) == 3
    assert FIX in report["fixes"]["applied"]
    portable = report["delegation"]["portable_ops"]
    assert not [op for op in SCORE_SIZED if op in portable], portable
    assert ("aten.expand_copy.default" in portable) is (kv_heads != 4)


def test_without_the_fix_score_sized_ops_stay_portable():
    with withheld("executorch.xnnpack", FIX):
        result = export_executorch.export(SelfAttention("bool").eval(), _inputs(2, 6, 0),
                                          validation_inputs=VALIDATION)
    report = result.report
    assert report["validation"]["passed"] is True
    assert FIX not in report["fixes"]["applied"]
    portable = report["delegation"]["portable_ops"]
    assert [op for op in SCORE_SIZED if op in portable]
    assert "aten.expand_copy.default" in portable


def test_portable_backend_keeps_torch_decomposition():
    result = export_executorch.export(SelfAttention("bool").eval(), _inputs(2, 6, 0),
                                      backend="portable", validation_inputs=VALIDATION)
    assert result.report["validation"]["passed"] is True
    assert FIX not in result.report["fixes"]["applied"]


def test_tiny_llama_matches_eager():
    model = build_tiny_model("llama").model
    sets = make_example_inputs(model, shapes=((2, 8), (1, 12), (3, 5))).sets
    result = export_executorch.export(model, sets[0], validation_inputs=sets[1:])
    report = result.report
    assert report["validation"]["passed"] is True
    assert FIX in report["fixes"]["applied"]
    assert not [op for op in SCORE_SIZED if op in report["delegation"]["portable_ops"]]
