"""The embedded default model and its input sets, loaded the way the CLIs load them."""

from __future__ import annotations

from typing import Any

from export_core.cli import demo_model_dir
from export_core.inputs import InputSets, build_input_sets
from export_core.loading import load_model_dir

__all__ = ["load_demo"]


def load_demo() -> tuple[Any, InputSets]:
    """all-MiniLM-L6-v2 (eval, float32) and its tokenized export and validation sets."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    loaded = load_model_dir(demo_model_dir())
    sets = build_input_sets(loaded.model, loaded.config, loaded.tokenizer)
    return loaded.model, sets
