"""The capture patch ``batched_dbrx_experts``: DBRX's experts loop over the experts the routing
hit (``nonzero()``) becomes per-pair weight gathers and ``bmm``. Equal to the loop in eager,
exported with dynamic batch and sequence and compared with eager in ONNX Runtime at three
shapes; without it the capture fails on the data-dependent loop."""

from __future__ import annotations

import pytest
import torch

import export_onnx
from export_core import CaptureError
from export_core.registry import withheld
from export_core.workarounds import dbrx_experts

PATCH = "dynamo:transformers.models.dbrx.modeling_dbrx.DbrxExperts.forward"


def _model() -> torch.nn.Module:
    from transformers import DbrxConfig, DbrxModel

    config = DbrxConfig(d_model=32, n_heads=2, n_layers=1, max_seq_len=64, vocab_size=64,
                        attn_config={"kv_n_heads": 1, "clip_qkv": 8.0, "rope_theta": 10000.0},
                        ffn_config={"ffn_hidden_size": 48, "moe_num_experts": 4, "moe_top_k": 2})
    torch.manual_seed(0)
    return DbrxModel(config).eval()


def _inputs(batch: int, seq: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(0, 64, (batch, seq), generator=g),
            "attention_mask": torch.ones(batch, seq, dtype=torch.int64)}


def test_batched_experts_equal_the_loop() -> None:
    model = _model()
    experts = model.blocks[0].ffn.experts
    g = torch.Generator().manual_seed(1)
    hidden = torch.randn(3, 5, 32, generator=g)
    index = torch.randint(0, 4, (15, 2), generator=g)
    weights = torch.rand(15, 2, generator=g)
    with torch.no_grad():
        want = experts(hidden, index, weights)
        got = dbrx_experts.batched_dbrx_experts(None)(experts, hidden, index, weights)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_dbrx_exports_and_matches_eager() -> None:
    result = export_onnx.export(_model(), _inputs(2, 8, 0),
                                validation_inputs=[_inputs(3, 13, 1), _inputs(1, 5, 2)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) >= 3
    assert PATCH in report["patches"]["fired"]


def test_without_the_patch_dbrx_does_not_capture() -> None:
    """Documents the model code's loop: when this stops failing, the patch can go."""
    with withheld("dynamo", PATCH), pytest.raises(CaptureError, match="data-dependent"):
        export_onnx.export(_model(), _inputs(2, 8, 0), validate=False)
