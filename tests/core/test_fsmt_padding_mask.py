"""The capture patch ``padding_mask_always_a_tensor``: FSMT's decoder padding mask stays a tensor
when a batch has no padding, so FSMT captures with dynamic batch and lengths (without it,
``make_padding_mask``'s ``if not padding_mask.any()`` fails the capture). Compared with eager in
ONNX Runtime on a batch without padding and on one with padded decoder rows."""

from __future__ import annotations

import pytest
import torch

import export_onnx
from export_core import CaptureError
from export_core.registry import withheld

PATCH = "dynamo:transformers.models.fsmt.modeling_fsmt.make_padding_mask"
PAD = 1


def _model() -> torch.nn.Module:
    from transformers import FSMTConfig, FSMTModel

    config = FSMTConfig(langs=["en", "de"], src_vocab_size=64, tgt_vocab_size=64, d_model=32,
                        encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                        decoder_attention_heads=2, encoder_ffn_dim=48, decoder_ffn_dim=48,
                        max_position_embeddings=64, pad_token_id=PAD,
                        use_cache=False)  # the cache-less graph the exporters capture
    torch.manual_seed(0)
    return FSMTModel(config).eval()


def _inputs(batch: int, source: int, target: int, padded_rows: int, seed: int) -> dict[str, torch.Tensor]:
    """``input_ids`` / ``attention_mask`` (batch, source) and ``decoder_input_ids`` (batch,
    target), int64; ``padded_rows`` decoder rows end in two pad tokens, the rest have none."""
    g = torch.Generator().manual_seed(seed)
    decoder = torch.randint(4, 64, (batch, target), generator=g)
    decoder[:padded_rows, -2:] = PAD
    return {"input_ids": torch.randint(4, 64, (batch, source), generator=g),
            "attention_mask": torch.ones(batch, source, dtype=torch.int64),
            "decoder_input_ids": decoder}


def test_fsmt_exports_and_matches_eager_with_and_without_padding() -> None:
    result = export_onnx.export(_model(), _inputs(2, 8, 5, padded_rows=0, seed=0),
                                validation_inputs=[_inputs(3, 11, 7, padded_rows=2, seed=1),
                                                   _inputs(1, 6, 4, padded_rows=0, seed=2)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) >= 3
    assert PATCH in report["patches"]["fired"]


def test_without_the_patch_fsmt_does_not_capture() -> None:
    """Documents the model code's branch: when this stops failing, the patch can go."""
    with withheld("dynamo", PATCH), pytest.raises(CaptureError, match="data-dependent"):
        export_onnx.export(_model(), _inputs(2, 8, 5, padded_rows=0, seed=0), validate=False)
