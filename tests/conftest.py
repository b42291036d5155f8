"""Shared fixtures: tiny random-weight Hugging Face model directories, written once per session."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

TINY_MODELS: dict[str, tuple[str, str]] = {
    # name: (model type of the zoo, model class)
    "bert": ("bert", "BertModel"),
    "roberta": ("roberta", "RobertaModel"),
    "distilbert": ("distilbert", "DistilBertModel"),
    "electra": ("electra", "ElectraForSequenceClassification"),
    "gpt2": ("gpt2", "GPT2LMHeadModel"),
    "llama": ("llama", "LlamaForCausalLM"),
    "qwen2": ("qwen2", "Qwen2ForCausalLM"),
    "phi3": ("phi3", "Phi3ForCausalLM"),
    "gemma2": ("gemma2", "Gemma2ForCausalLM"),
    "opt": ("opt", "OPTForCausalLM"),
    "vit": ("vit", "ViTModel"),
    "convnext": ("convnext", "ConvNextForImageClassification"),
    "resnet": ("resnet", "ResNetModel"),
    "mobilevit": ("mobilevit", "MobileViTForImageClassification"),
    # across modalities, for the CLI coverage test (tests/test_cli_coverage.py)
    "t5": ("t5", "T5Model"),
    "bart": ("bart", "BartModel"),
    "whisper": ("whisper", "WhisperModel"),
    "hubert": ("hubert", "HubertModel"),
    "wav2vec2": ("wav2vec2", "Wav2Vec2Model"),
    "ast": ("audio-spectrogram-transformer", "ASTForAudioClassification"),
    "clip": ("clip", "CLIPModel"),
    "blip": ("blip", "BlipModel"),
    "paligemma": ("paligemma", "PaliGemmaModel"),
    "detr": ("detr", "DetrForObjectDetection"),
    "segformer": ("segformer", "SegformerForSemanticSegmentation"),
    "dpt": ("dpt", "DPTForDepthEstimation"),
}
"""The fixture architectures: the zoo's tiny config of each type, built as this class."""

ENCODERS = ("bert", "roberta", "distilbert", "electra")
DECODERS = ("gpt2", "llama", "qwen2", "phi3", "gemma2", "opt")
VISION = ("vit", "convnext", "resnet", "mobilevit")


def build_tiny_model(name: str) -> Any:
    """A tiny random-weight model of architecture ``name`` (see ``TINY_MODELS``), eval mode.

    Built by the tiny-model zoo (``export_sweep.zoo``), seed 0: the same weights every call.
    """
    from export_sweep.zoo import build_tiny_model as build

    model_type, model_class = TINY_MODELS[name]
    model = build(model_type, model_class=model_class, forward=False).model
    model.config.architectures = [model_class]
    return model


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """``tiny_model_dir(name) -> Path``: a ``save_pretrained`` directory, built once per session."""
    root = tmp_path_factory.mktemp("tiny-models")
    built: dict[str, Path] = {}

    def make(name: str) -> Path:
        if name not in built:
            from transformers.utils import logging as hf_logging

            path = root / name
            bars = hf_logging.is_progress_bar_enabled()
            hf_logging.disable_progress_bar()  # a test's captured stderr is the command's own
            try:
                build_tiny_model(name).save_pretrained(path)
            finally:
                if bars:
                    hf_logging.enable_progress_bar()
            built[name] = path
        return built[name]

    return make


FIRST = ("tests/sweep/test_coverage_committed.py",)
"""Test files started first: the sweep's CI subset is the run's longest test (about ten minutes
of worker subprocesses), so a parallel run (``-n``) starts it at once and fills the other workers
around it instead of waiting for it at the end."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the tests of ``FIRST`` to the front of the run (a stable sort: the rest keep their
    order)."""
    items.sort(key=lambda item: item.nodeid.split("::")[0] not in FIRST)
