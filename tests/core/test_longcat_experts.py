"""The capture patch ``batched_longcat_experts``: LongCat-Flash's experts loop over the experts
the routing hit (``nonzero()``), identity ("zero-computation") experts included, becomes per-pair
weight gathers and ``bmm``. Equal to the loop in eager (with and without identity experts),
exported with dynamic batch and sequence and compared with eager in ONNX Runtime and the
ExecuTorch runtime at three shapes; without it the capture fails on the data-dependent loop."""

from __future__ import annotations

import pytest
import torch

import export_executorch
import export_onnx
from export_core import CaptureError
from export_core.registry import withheld
from export_core.workarounds import longcat_experts

PATCH = "dynamo:transformers.models.longcat_flash.modeling_longcat_flash.LongcatFlashExperts.forward"


def _model(zero_experts: int = 4) -> torch.nn.Module:
    from transformers import LongcatFlashConfig, LongcatFlashModel

    config = LongcatFlashConfig(
        vocab_size=64, hidden_size=32, num_layers=1, num_attention_heads=2, ffn_hidden_size=48,
        q_lora_rank=16, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, head_dim=8,
        v_head_dim=8, moe_topk=3, n_routed_experts=4, zero_expert_num=zero_experts,
        expert_ffn_hidden_size=24, max_position_embeddings=64)
    torch.manual_seed(0)
    model = LongcatFlashModel(config).eval()
    with torch.no_grad():  # random router bias so that both expert kinds are picked
        for module in model.modules():
            if hasattr(module, "e_score_correction_bias"):
                module.e_score_correction_bias.normal_()
    return model


def _inputs(batch: int, seq: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(0, 64, (batch, seq), generator=g),
            "attention_mask": torch.ones(batch, seq, dtype=torch.int64)}


@pytest.mark.parametrize("zero_experts", [0, 4])
def test_batched_experts_equal_the_loop(zero_experts: int) -> None:
    experts = _model(zero_experts).layers[0].mlp.experts
    g = torch.Generator().manual_seed(1)
    hidden = torch.randn(15, 32, generator=g)
    # Distinct experts per token, as top-k routing picks them; ids >= 4 are identity experts.
    index = torch.stack([torch.randperm(4 + zero_experts, generator=g)[:3] for _ in range(15)])
    weights = torch.rand(15, 3, generator=g)
    with torch.no_grad():
        want = experts(hidden, index, weights)
        got = longcat_experts.batched_longcat_experts(None)(experts, hidden, index, weights)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


# The capture patch is backend-neutral: CI runs ONNX; ExecuTorch runs with -m slow and in the sweep.
@pytest.mark.parametrize("backend", ["onnx", pytest.param("executorch", marks=pytest.mark.slow)])
def test_longcat_flash_exports_and_matches_eager(backend: str) -> None:
    export = export_onnx.export if backend == "onnx" else export_executorch.export
    result = export(_model(), _inputs(2, 8, 0),
                    validation_inputs=[_inputs(3, 13, 1), _inputs(1, 5, 2)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) >= 3
    assert PATCH in report["patches"]["fired"]


def test_without_the_patch_longcat_flash_does_not_capture() -> None:
    """Documents the model code's loop: when this stops failing, the patch can go."""
    with withheld("dynamo", PATCH), pytest.raises(CaptureError, match="data-dependent"):
        export_onnx.export(_model(), _inputs(2, 8, 0), validate=False)
