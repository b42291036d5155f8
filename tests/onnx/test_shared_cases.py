"""The shared failing cases of ONNX (../shared/cases), as written, through ``export_onnx.export``.

Each export is validated by the exporter itself against eager at the export shapes and at the
case's other shapes; the variants of each kind are in ``test_workarounds.py`` and
``tests/core/test_capture_patches.py``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.export import Dim

import export_onnx


def _ok(result, fired: str | None = None, where: str = "fixes"):
    report = result.report
    assert report["status"] == "ok", report["error"]
    assert report["validation"]["passed"] and len(report["validation"]["checks"]) >= 2
    if fired is not None:
        names = {
            "fixes": report["fixes"]["applied"],
            "translations": report.get("translations", {}).get("used", []),
            "patches": report["patches"]["fired"],
        }[where]
        assert any(fired in n for n in names), (fired, names)


def test_case02_rsub_int_attention_mask():
    class MaskedScores(torch.nn.Module):
        def forward(self, scores, mask):
            return scores + (1.0 - mask[:, None, :]) * -10000.0

    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    mask2 = torch.tensor([[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    r = export_onnx.export(MaskedScores(), (torch.randn(2, 3, 5), mask),
                           validation_inputs=[(torch.randn(3, 3, 3), mask2)])
    _ok(r, "mixed_dtype")


def test_case04_split_and_chunk_along_a_dynamic_axis():
    class HalfSplit(torch.nn.Module):
        def forward(self, x):
            a, b = torch.split(x, x.shape[1] // 2, dim=1)
            return a * 2 + b

    class HalfChunk(torch.nn.Module):
        def forward(self, x):
            a, b = x.chunk(2, dim=1)
            return a - b

    half = Dim("half", min=1, max=64)
    for model in (HalfSplit(), HalfChunk()):
        r = export_onnx.export(model, (torch.randn(2, 8, 4),), dynamic_shapes=({1: 2 * half},),
                               validation_inputs=[(torch.randn(2, 12, 4),), (torch.randn(2, 2, 4),)])
        _ok(r, "split")


def test_case05_sdpa_fully_masked_row_is_zero():
    class Attn(torch.nn.Module):
        def forward(self, q, k, v, bias):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)

    torch.manual_seed(0)
    q, k, v = torch.randn(3, 1, 2, 4, 8).unbind(0)
    bias = torch.zeros(1, 1, 4, 4)
    bias[..., 0, :] = float("-inf")
    bias[..., 2, 3] = float("-inf")
    # batch 1 in the case's example specialises; the sequence axes stay dynamic
    q2, k2, v2 = torch.randn(3, 1, 2, 6, 8).unbind(0)
    bias2 = torch.zeros(1, 1, 6, 6)
    bias2[0, :, 5, :] = float("-inf")
    bias2[0, :, 1, 4:] = float("-inf")
    r = export_onnx.export(Attn(), (q, k, v, bias), validation_inputs=[(q2, k2, v2, bias2)])
    _ok(r, "scaled_dot_product", "translations")


def test_case07_argsort_stable():
    class StableOrder(torch.nn.Module):
        def forward(self, scores):
            return torch.argsort(scores, dim=-1, stable=True)

    scores = torch.tensor([[3.0, 1.0, 2.0, 1.0, 0.0], [0.5, 0.5, -1.0, 2.0, 0.5]])
    ties = torch.tensor([[1.0, 1.0, 1.0, 0.0, 0.0, 2.0, 1.0]] * 3)
    r = export_onnx.export(StableOrder(), (scores,), validation_inputs=[(ties,)])
    _ok(r, "sort", "translations")


def test_case08_masked_fill_on_bool():
    class MergeMasks(torch.nn.Module):
        def forward(self, keep, force):
            return keep.masked_fill(force, True)

    keep = torch.tensor([[True, False, False], [False, False, True]])
    force = torch.tensor([[False, True, False], [False, False, False]])
    r = export_onnx.export(MergeMasks(), (keep, force),
                           validation_inputs=[(torch.rand(4, 5) > 0.5, torch.rand(4, 5) > 0.5)])
    _ok(r, "where")


def test_case10_ceil_div_symint():
    class Windows(torch.nn.Module):
        def forward(self, x):
            return torch.zeros(-(-x.shape[1] // 4)) + x.sum()

    r = export_onnx.export(Windows(), (torch.randn(1, 10),),
                           dynamic_shapes=({1: Dim("seq", min=1, max=64)},),
                           validation_inputs=[(torch.randn(1, 7),), (torch.randn(1, 8),)])
    _ok(r, "floordiv", "translations")
    import onnxruntime as ort

    sess = ort.InferenceSession(r.program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    lengths = [sess.run(None, {sess.get_inputs()[0].name: torch.randn(1, n).numpy()})[0].shape[0]
               for n in (10, 7, 8)]
    assert lengths == [3, 2, 2]


def test_case13_qwen2vl_vision_tower():
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VisionTransformerPretrainedModel

    torch.manual_seed(0)
    cfg = Qwen2VLVisionConfig(depth=2, embed_dim=32, hidden_size=32, num_heads=4, mlp_ratio=2,
                              in_channels=3, patch_size=2, spatial_merge_size=2, temporal_patch_size=2)
    tower = Qwen2VisionTransformerPretrainedModel(cfg).eval()

    class Vision(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, pixel_values, grid_thw):
            out = self.m(pixel_values, grid_thw=grid_thw)
            return out.last_hidden_state if hasattr(out, "last_hidden_state") else out

    grid = torch.tensor([[1, 4, 4], [1, 4, 4]])
    grid2 = torch.tensor([[1, 2, 4], [1, 4, 6]])
    pixels = torch.randn(32, 24)
    r = export_onnx.export(Vision(tower), (pixels, grid), dynamic=False,
                           validation_inputs=[(torch.randn(32, 24), grid2)])
    _ok(r, "VisionAttention.forward", "patches")


def test_case26_scatter_reduce_mean():
    class MeanAggregate(torch.nn.Module):
        def forward(self, base, messages, dst):
            idx = dst[:, None].expand(-1, messages.shape[1])
            return base.scatter_reduce(0, idx, messages, reduce="mean", include_self=True)

    torch.manual_seed(0)
    base = torch.ones(4, 3)
    messages = torch.randn(6, 3)
    dst = torch.tensor([0, 2, 0, 1, 2, 2])
    r = export_onnx.export(MeanAggregate().eval(), (base, messages, dst),
                           validation_inputs=[(base, torch.randn(6, 3), torch.tensor([3, 3, 1, 1, 0, 2]))])
    _ok(r, "scatter_reduce", "translations")


def test_case27_rfft_complex_unsqueeze_matmul_irfft():
    class SpectralMixer(torch.nn.Module):
        def __init__(self, n_fft=16):
            super().__init__()
            self.n_fft = n_fft
            self.register_buffer("window", torch.hann_window(n_fft))

        def forward(self, frame, w_real, w_imag):  # frame (ch, n_fft); w_* (bins, ch, ch)
            spec = torch.fft.rfft(frame * self.window, dim=-1).transpose(0, 1)  # (bins, ch)
            mix = torch.complex(w_real, w_imag)
            out = (mix @ spec.unsqueeze(-1)).squeeze(-1)  # (bins, ch)
            return torch.fft.irfft(out.transpose(0, 1), n=self.n_fft, dim=-1)

    torch.manual_seed(0)
    bins = 16 // 2 + 1
    wr, wi = torch.randn(bins, 2, 2), torch.randn(bins, 2, 2)
    f1, f2 = torch.randn(2, 16), torch.randn(2, 16)
    r = export_onnx.export(SpectralMixer().eval(), (f1, wr, wi), validation_inputs=[(f2, wr, wi)])
    _ok(r, "_dispatching.dispatch", "patches")


def test_case29_t5_encoder_with_grad_and_a_training_mode_wrapper():
    from transformers import T5Config, T5EncoderModel

    torch.manual_seed(0)
    cfg = T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                   relative_attention_num_buckets=8, relative_attention_max_distance=16)
    encoder = T5EncoderModel(cfg).eval()

    class Encode(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask):
            return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state

    ids = torch.randint(0, 64, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.int64)
    mask[1, 4:] = 0
    ids3 = torch.randint(0, 64, (3, 11))
    mask3 = torch.ones(3, 11, dtype=torch.int64)
    mask3[0, 7:] = 0
    batch, seq = Dim("batch", min=1, max=8), Dim("seq", min=2, max=64)
    r = export_onnx.export(Encode(encoder), (ids, mask), dynamic_shapes=({0: batch, 1: seq}, {0: batch, 1: seq}),
                           validation_inputs=[(ids3, mask3)])
    _ok(r, "keep_contiguous_as_clone")


def test_case31_whisper_decoder_step_with_its_encoder_decoder_cache():
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    torch.manual_seed(0)
    cfg = WhisperConfig(vocab_size=64, num_mel_bins=8, d_model=32, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                        decoder_ffn_dim=64, max_source_positions=16, max_target_positions=32,
                        pad_token_id=0, decoder_start_token_id=1, bos_token_id=1, eos_token_id=2)
    asr = WhisperForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        enc = asr.model.encoder(torch.randn(1, 8, 32)).last_hidden_state

    def cache_after(n_past):
        ids = torch.randint(3, 64, (1, n_past), generator=torch.Generator().manual_seed(n_past))
        with torch.no_grad():
            return asr(encoder_outputs=(enc,), decoder_input_ids=ids, use_cache=True).past_key_values

    class DecoderStep(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, decoder_input_ids, encoder_hidden_states, past_key_values):
            return self.m(encoder_outputs=(encoder_hidden_states,), decoder_input_ids=decoder_input_ids,
                          past_key_values=past_key_values, use_cache=True).logits

    step = torch.tensor([[5]])
    r = export_onnx.export(DecoderStep(asr), (step, enc, cache_after(3)),
                           validation_inputs=[(step, enc, cache_after(7))])
    _ok(r)
    past = {c["shapes"]["2.self_attention_cache.layers[0].keys"][2] for c in r.report["validation"]["checks"]}
    assert past == {3, 7}
