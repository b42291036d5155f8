"""Tiny random decoder-only models, one per family, for the generation tests.

Every config has 2 layers, hidden size 32-64, a vocabulary of 128 and 128 positions, so an
export of both graphs and the generation check fit in a test. Weights are seeded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["Family", "FAMILIES", "build_model"]

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


def build_model(name: str, seed: int = 0) -> torch.nn.Module:
    """The family's tiny model with seeded random weights, in eval mode."""
    import transformers

    family = FAMILIES[name]
    config = getattr(transformers, family.config)(**family.kwargs)
    torch.manual_seed(seed)
    return getattr(transformers, family.model)(config).eval()
