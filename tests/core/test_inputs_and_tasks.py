"""Tasks inferred from configs; example inputs from tokenizers and configs."""

from __future__ import annotations

import pytest
import torch

from export_core import InputError, LoadError
from export_core.inputs import build_input_sets
from export_core.loading import load_model_dir
from export_core.tasks import infer_task, task_spec


@pytest.mark.parametrize(
    "name, task",
    [("bert", "feature-extraction"), ("electra", "text-classification"), ("llama", "text-generation"),
     ("gpt2", "text-generation"), ("vit", "image-feature-extraction"), ("convnext", "image-classification")],
)
def test_task_inferred_from_config(name, task, tiny_model_dir):
    loaded = load_model_dir(tiny_model_dir(name))
    assert loaded.task.name == task == infer_task(loaded.config)


def test_text_generation_fixes_use_cache_off():
    assert task_spec("text-generation").constant_kwargs == {"use_cache": False}
    with pytest.raises(InputError, match="unknown task"):
        task_spec("nope")


def test_synthesized_text_inputs_have_padding_and_three_shapes(tiny_model_dir):
    loaded = load_model_dir(tiny_model_dir("llama"))
    sets = build_input_sets(loaded.model, loaded.config)
    shapes = [tuple(s["input_ids"].shape) for s in sets.all_sets()]
    assert shapes[0][0] >= 2 and shapes[0][1] >= 2
    assert len(set(shapes)) == 3 and any(s[0] == 1 for s in shapes)
    assert (sets.export["attention_mask"] == 0).any()
    assert sets.export["input_ids"].max() < loaded.config.vocab_size


def test_tokenizer_inputs_for_the_demo_model():
    from export_core.cli import demo_model_dir

    loaded = load_model_dir(demo_model_dir())
    assert loaded.tokenizer is not None
    sets = build_input_sets(loaded.model, loaded.config, loaded.tokenizer)
    assert set(sets.export) == {"input_ids", "token_type_ids", "attention_mask"}
    assert sets.export["input_ids"].shape[0] == 2 and (sets.export["attention_mask"] == 0).any()
    assert sets.validation[-1]["input_ids"].shape[0] == 1


def test_vision_inputs(tiny_model_dir):
    loaded = load_model_dir(tiny_model_dir("vit"))
    sets = build_input_sets(loaded.model, loaded.config)
    assert [tuple(s["pixel_values"].shape) for s in sets.all_sets()] == [(2, 3, 32, 32), (3, 3, 32, 32), (1, 3, 32, 32)]


def test_missing_weights_is_a_load_error(tmp_path, tiny_model_dir):
    import shutil

    d = tmp_path / "m"
    shutil.copytree(tiny_model_dir("bert"), d)
    (d / "model.safetensors").unlink()
    with pytest.raises(LoadError, match="no weights"):
        load_model_dir(d)
    assert isinstance(torch.zeros(1), torch.Tensor)
