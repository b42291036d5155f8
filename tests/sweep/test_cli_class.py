"""The sweep's check that a pass means the command-line tools export the same model: the class
:func:`export_core.loading.model_class_for` picks for a saved directory's config, compared with
the class the zoo built, for mapped configs, the ``architectures`` fallback and a mismatch."""

from __future__ import annotations

import copy

import pytest

pytest.importorskip("transformers")

from transformers import (  # noqa: E402
    BertConfig,
    BertForMaskedLM,
    BertModel,
    MusicgenDecoderConfig,
)

from export_core.loading import model_class_for  # noqa: E402
from export_sweep.sweep.job import cli_class_mismatch  # noqa: E402


def _bert() -> BertModel:
    return BertModel(BertConfig(vocab_size=32, hidden_size=8, num_hidden_layers=1,
                                num_attention_heads=2, intermediate_size=16)).eval()


def _saved(config, class_name: str):
    config = copy.deepcopy(config)
    config.architectures = [class_name]
    return config


@pytest.mark.parametrize(("class_name", "task", "want"), [
    ("BertModel", None, "BertModel"),
    ("BertForMaskedLM", None, "BertForMaskedLM"),
    ("BertModel", "fill-mask", "BertForMaskedLM"),
])
def test_the_class_comes_from_the_task_auto_mapping(class_name, task, want) -> None:
    assert model_class_for(_saved(_bert().config, class_name), task) == want


def test_a_sub_config_model_gets_its_architectures_class() -> None:
    """No auto class maps ``MusicgenDecoderConfig``; ``MusicgenModel`` declares it."""
    config = _saved(MusicgenDecoderConfig(), "MusicgenModel")
    assert model_class_for(config) == "MusicgenModel"
    assert model_class_for(_saved(MusicgenDecoderConfig(), "NoSuchClass")) is None


def test_the_sweep_accepts_the_class_the_tools_load() -> None:
    assert cli_class_mismatch(_bert(), "BertModel") is None
    model = BertForMaskedLM(_bert().config).eval()
    assert cli_class_mismatch(model, "BertForMaskedLM") is None


def test_the_sweep_names_both_classes_when_the_tools_load_another() -> None:
    """A class name the loader does not reach (here a subclass the zoo might build) fails the pass."""
    error = cli_class_mismatch(_bert(), "BertPreTrainedSubclass")
    assert error is not None and error.startswith("CliClassMismatch")
    assert "BertModel" in error and "BertPreTrainedSubclass" in error


def test_a_model_without_a_config_is_not_checked() -> None:
    import torch

    assert cli_class_mismatch(torch.nn.Linear(2, 2), "Linear") is None


@pytest.mark.parametrize("cls", [BertModel, BertForMaskedLM])
def test_the_predicted_class_is_the_one_the_loader_loads(cls, tmp_path) -> None:
    from export_core.loading import load_model_dir

    cls(_bert().config).save_pretrained(tmp_path)
    loaded = load_model_dir(tmp_path)
    assert type(loaded.model).__name__ == model_class_for(loaded.config) == cls.__name__
