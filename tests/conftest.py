"""Shared fixtures: tiny random-weight Hugging Face model directories, written once per session."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

_TEXT = dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=64, max_position_embeddings=128)

TINY_CONFIGS: dict[str, tuple[str, str, dict[str, Any]]] = {
    # name: (config class, model class, config kwargs)
    "bert": ("BertConfig", "BertModel", dict(_TEXT, type_vocab_size=2)),
    "roberta": ("RobertaConfig", "RobertaModel", dict(_TEXT, pad_token_id=1)),
    "distilbert": ("DistilBertConfig", "DistilBertModel",
                   dict(vocab_size=128, dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=128)),
    "electra": ("ElectraConfig", "ElectraForSequenceClassification",
                dict(_TEXT, embedding_size=32, num_labels=3)),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_positions=128)),
    "llama": ("LlamaConfig", "LlamaForCausalLM", dict(_TEXT, num_key_value_heads=2)),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", dict(_TEXT, num_key_value_heads=2)),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(_TEXT, num_key_value_heads=2, pad_token_id=0)),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(_TEXT, num_key_value_heads=2, head_dim=8,
                                                         sliding_window=16)),
    "opt": ("OPTConfig", "OPTForCausalLM", dict(vocab_size=128, hidden_size=32, num_hidden_layers=2,
                                                num_attention_heads=4, ffn_dim=64, word_embed_proj_dim=32,
                                                max_position_embeddings=128)),
    "vit": ("ViTConfig", "ViTModel", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                          intermediate_size=64, image_size=32, patch_size=8)),
    "convnext": ("ConvNextConfig", "ConvNextForImageClassification",
                 dict(hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], image_size=64, num_labels=5)),
    "resnet": ("ResNetConfig", "ResNetModel", dict(embedding_size=8, hidden_sizes=[8, 16, 32, 64],
                                                    depths=[1, 1, 1, 1])),
    "mobilevit": ("MobileViTConfig", "MobileViTForImageClassification",
                  dict(image_size=64, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64],
                       num_labels=4)),
}

ENCODERS = ("bert", "roberta", "distilbert", "electra")
DECODERS = ("gpt2", "llama", "qwen2", "phi3", "gemma2", "opt")
VISION = ("vit", "convnext", "resnet", "mobilevit")


def build_tiny_model(name: str) -> Any:
    """A tiny random-weight model of architecture ``name`` (see ``TINY_CONFIGS``), eval mode."""
    import torch
    import transformers

    cfg_cls, model_cls, kwargs = TINY_CONFIGS[name]
    torch.manual_seed(0)
    config = getattr(transformers, cfg_cls)(**kwargs)
    model = getattr(transformers, model_cls)(config).eval()
    model.config.architectures = [model_cls]
    return model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``tiny_model_dir(name) -> Path``: a ``save_pretrained`` directory, built once per session."""
    root = tmp_path_factory.mktemp("tiny-models")
    built: dict[str, Path] = {}

    def make(name: str) -> Path:
        if name not in built:
            path = root / name
            build_tiny_model(name).save_pretrained(path)
            built[name] = path
        return built[name]

    return make
