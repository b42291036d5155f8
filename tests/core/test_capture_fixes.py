"""Capture-level workarounds shared by both backends: the MoE experts patch and the tensor-check
node fix. Each is exercised through ``export_onnx.export`` and ``export_executorch.export`` (the
artifact runs in its runtime and matches eager at two input shapes), and each fails without it.
"""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import export_executorch
import export_onnx
from export_core.errors import CaptureError, LoweringError, TranslationError
from export_core.registry import withheld
from export_core.workarounds.moe_experts import EXPERTS_TARGET

MOE_PATCH = f"dynamo:{EXPERTS_TARGET}"
ALL_TRUE_FIX = "all_true_as_core_aten"


# ── MoE experts: grouped_mm / eager -> batched_mm ──────────────────────────────────────────────


def _tiny_moe(implementation: str) -> torch.nn.Module:
    """A 2-layer Qwen2-MoE (8 experts, top-2, a shared expert) with a non-zero router."""
    from transformers import Qwen2MoeConfig, Qwen2MoeModel

    config = Qwen2MoeConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
        shared_expert_intermediate_size=32, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_experts=8, num_experts_per_tok=2, max_position_embeddings=64,
        experts_implementation=implementation, use_cache=False,
    )
    torch.manual_seed(0)
    model = Qwen2MoeModel(config).eval()
    assert model.config._experts_implementation == implementation
    return model


def _text(batch: int, seq: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(batch * 100 + seq)
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[0, : seq // 4] = 0  # left padding in the first row
    return {"input_ids": torch.randint(0, 64, (batch, seq), generator=g), "attention_mask": mask}


@pytest.mark.parametrize("implementation", ["grouped_mm", "eager"])
def test_moe_experts_export_to_onnx_and_match_eager(implementation):
    model = _tiny_moe(implementation)
    result = export_onnx.export(model, _text(2, 8), validation_inputs=[_text(1, 13)])
    checks = result.report["validation"]["checks"]
    assert result.report["validation"]["passed"] and len(checks) == 2
    assert [c["shapes"]["input_ids"] for c in checks] == [[2, 8], [1, 13]]
    assert MOE_PATCH in result.report["patches"]["fired"]
    # the patch is restored: the model dispatches as configured again
    assert model.config._experts_implementation == implementation


def test_moe_experts_without_the_patch_fail_on_onnx():
    model = _tiny_moe("grouped_mm")
    with withheld("dynamo", MOE_PATCH), pytest.raises(TranslationError, match="grouped_mm_fallback"):
        export_onnx.export(model, _text(2, 8), validation_inputs=[_text(1, 13)])


def test_moe_eager_experts_without_the_patch_fail_at_capture():
    model = _tiny_moe("eager")
    with withheld("dynamo", MOE_PATCH), pytest.raises(CaptureError):
        export_onnx.export(model, _text(2, 8), validate=False)


def test_moe_experts_export_to_executorch_and_match_eager():
    model = _tiny_moe("grouped_mm")
    result = export_executorch.export(model, _text(2, 8), validation_inputs=[_text(1, 13)])
    assert result.report["validation"]["passed"]
    assert len(result.report["validation"]["checks"]) == 2
    assert MOE_PATCH in result.report["patches"]["fired"]
    with withheld("dynamo", MOE_PATCH), pytest.raises(LoweringError, match="histc"):
        export_executorch.export(model, _text(2, 8), validate=False)


# ── Tensor checks: aten._is_all_true ────────────────────────────────────────────────────────────


class CheckedMerge(torch.nn.Module):
    """A placeholder merge guarded like transformers' ``torch_compilable_check``: the number of
    placeholder tokens must equal the number of feature rows."""

    def forward(self, embeds: torch.Tensor, is_placeholder: torch.Tensor, features: torch.Tensor):
        # embeds (batch, seq, hidden) float32; is_placeholder (batch, seq) bool; features (n, hidden)
        torch._check_tensor_all(is_placeholder.sum() == features.shape[0])
        mask = is_placeholder.unsqueeze(-1).expand_as(embeds)
        return embeds.masked_scatter(mask, features)


class TruthValueUsed(torch.nn.Module):
    """``_is_all_true``'s value used as a tensor (the Core ATen rewrite, not the removal)."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor):
        # x (batch, n) float32; mask (batch, n) bool (eager _is_all_true takes bool only)
        return x * torch.ops.aten._is_all_true(mask).to(x.dtype) + x.sum(-1, keepdim=True)


def _merge(batch: int, seq: int, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seq)
    placeholder = torch.zeros(batch, seq, dtype=torch.bool)
    placeholder[:, 1:3] = True
    return {
        "embeds": torch.randn(batch, seq, 8, generator=g).to(dtype),
        "is_placeholder": placeholder,
        "features": torch.randn(2 * batch, 8, generator=g).to(dtype),
    }


def _merge_dims() -> dict[str, dict[int, Dim]]:
    batch, seq, n = Dim("batch", min=1, max=8), Dim("seq", min=4, max=64), Dim("n", min=2, max=16)
    return {"embeds": {0: batch, 1: seq}, "is_placeholder": {0: batch, 1: seq}, "features": {0: n}}


BACKENDS = {"onnx": export_onnx.export, "executorch": export_executorch.export}


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
def test_tensor_check_is_removed_and_exports(backend, dynamic):
    kwargs = (
        {"dynamic_shapes": _merge_dims(), "validation_inputs": [_merge(1, 7)]}
        if dynamic else {"dynamic": False, "validation_inputs": []}
    )
    result = BACKENDS[backend](CheckedMerge(), _merge(2, 5), **kwargs)
    assert result.report["validation"]["passed"]
    assert ALL_TRUE_FIX in result.report["fixes"]["applied"]
    targets = {n.target for n in result.exported_program.graph.nodes}
    assert torch.ops.aten._is_all_true.default not in targets


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_tensor_check_fails_without_the_fix(backend):
    error = TranslationError if backend == "onnx" else LoweringError
    with withheld("dynamo", ALL_TRUE_FIX), pytest.raises(error, match="_is_all_true"):
        BACKENDS[backend](CheckedMerge(), _merge(2, 5), dynamic_shapes=_merge_dims(), validate=False)


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("dynamic", [True, False], ids=["dynamic", "static"])
def test_truth_value_used_as_tensor_is_rewritten(backend, dynamic):
    def inputs(batch: int, n: int, all_true: bool) -> dict[str, torch.Tensor]:
        mask = torch.ones(batch, n, dtype=torch.bool)
        if not all_true:
            mask[-1, -1] = False
        return {"x": torch.randn(batch, n), "mask": mask}

    others = [inputs(1, 6, False), inputs(3, 5, True)] if dynamic else [inputs(2, 4, False)]
    result = BACKENDS[backend](
        TruthValueUsed(), inputs(2, 4, True), dynamic=dynamic, validation_inputs=others
    )
    assert result.report["validation"]["passed"]
    assert len(result.report["validation"]["checks"]) == 1 + len(others)
    assert ALL_TRUE_FIX in result.report["fixes"]["applied"]
    targets = {n.target for n in result.exported_program.graph.nodes}
    assert torch.ops.aten._is_all_true.default not in targets
    assert torch.ops.aten.any.default in targets
