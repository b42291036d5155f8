"""Tiny random generative models, one per family, for the generation tests.

Every config has 2 layers, hidden size 32-64, a vocabulary of 128 and 128 positions (Whisper: 64
decoder positions, 16 mel bins x 64 frames), so an export of the graphs and the generation check
fit in a test. Weights are seeded. :data:`FAMILIES` are decoder-only; :data:`SEQ2SEQ_FAMILIES`
are encoder-decoders.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["Family", "FAMILIES", "SEQ2SEQ_FAMILIES", "build_model", "generation_backend"]

_COMMON = dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)


@dataclass(frozen=True)
class Family:
    """One model family: the ``transformers`` config and model class names and the config kwargs."""

    name: str
    config: str
    model: str
    kwargs: dict[str, Any] = field(default_factory=dict)


FAMILIES: dict[str, Family] = {f.name: f for f in [
    Family("gpt2", "GPT2Config", "GPT2LMHeadModel",
           dict(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=128, bos_token_id=1,
                eos_token_id=2)),
    Family("llama", "LlamaConfig", "LlamaForCausalLM", _COMMON),
    Family("mistral", "MistralConfig", "MistralForCausalLM", dict(_COMMON, sliding_window=8)),
    Family("qwen2", "Qwen2Config", "Qwen2ForCausalLM", _COMMON),
    Family("qwen3", "Qwen3Config", "Qwen3ForCausalLM", dict(_COMMON, head_dim=8)),
    Family("phi3", "Phi3Config", "Phi3ForCausalLM", dict(_COMMON, pad_token_id=0, bos_token_id=1, eos_token_id=2)),
    Family("gemma2", "Gemma2Config", "Gemma2ForCausalLM",
           dict(_COMMON, head_dim=8, sliding_window=8)),
    Family("gemma3", "Gemma3TextConfig", "Gemma3ForCausalLM",
           dict(_COMMON, head_dim=8, sliding_window=8, layer_types=["sliding_attention", "full_attention"])),
    Family("opt", "OPTConfig", "OPTForCausalLM",
           dict(vocab_size=128, hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=128, word_embed_proj_dim=32)),
    Family("falcon", "FalconConfig", "FalconForCausalLM",
           dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                max_position_embeddings=128, new_decoder_architecture=False, multi_query=True)),
    Family("gpt_neox", "GPTNeoXConfig", "GPTNeoXForCausalLM",
           dict(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, max_position_embeddings=128)),
    Family("mixtral", "MixtralConfig", "MixtralForCausalLM",
           dict(_COMMON, num_local_experts=4, num_experts_per_tok=2)),
    Family("qwen2_moe", "Qwen2MoeConfig", "Qwen2MoeForCausalLM",
           dict(_COMMON, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                shared_expert_intermediate_size=64)),
]}


SEQ2SEQ_FAMILIES: dict[str, Family] = {f.name: f for f in [
    Family("t5", "T5Config", "T5ForConditionalGeneration",
           dict(vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)),
    # BART's generation config forces EOS at the last step of the budget (forced_eos_token_id=2)
    Family("bart", "BartConfig", "BartForConditionalGeneration",
           dict(vocab_size=128, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                max_position_embeddings=128)),
    # token rules within the vocabulary: 5 and 6 never generated, 7 not as the first token
    Family("whisper", "WhisperConfig", "WhisperForConditionalGeneration",
           dict(vocab_size=128, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=16,
                max_source_positions=32, max_target_positions=64, decoder_start_token_id=1,
                pad_token_id=0, eos_token_id=2, bos_token_id=1, suppress_tokens=[5, 6],
                begin_suppress_tokens=[7])),
]}


def build_model(name: str, seed: int = 0) -> torch.nn.Module:
    """The family's tiny model with seeded random weights, in eval mode."""
    import transformers

    family = FAMILIES.get(name) or SEQ2SEQ_FAMILIES[name]
    config = getattr(transformers, family.config)(**family.kwargs)
    torch.manual_seed(seed)
    return getattr(transformers, family.model)(config).eval()


def generation_backend(backend: str):
    """``(exporter, open_session, Generator class)`` of ``"onnx"`` or ``"executorch"``; the test
    is skipped when the backend's runtime is not installed."""
    import pytest

    if backend == "onnx":
        pytest.importorskip("onnxruntime")
        from export_onnx.exporter import OnnxExporter
        from export_onnx.generation import OnnxGenerator, open_session

        return OnnxExporter(), open_session, OnnxGenerator
    pytest.importorskip("executorch")
    from export_executorch.exporter import ExecutorchExporter
    from export_executorch.generation import ExecutorchGenerator, open_session

    return ExecutorchExporter(), open_session, ExecutorchGenerator
