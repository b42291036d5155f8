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


@pytest.mark.parametrize(
    "config_class, arch, task",
    [("T5Config", "T5ForConditionalGeneration", "text2text-generation"),
     ("BartConfig", "BartForConditionalGeneration", "text2text-generation"),
     ("WhisperConfig", "WhisperForConditionalGeneration", "automatic-speech-recognition"),
     ("Wav2Vec2Config", "Wav2Vec2ForCTC", "automatic-speech-recognition"),
     ("CLIPConfig", "CLIPModel", "zero-shot-image-classification"),
     ("LlavaConfig", "LlavaForConditionalGeneration", "image-text-to-text"),
     ("DetrConfig", "DetrForObjectDetection", "object-detection"),
     ("SegformerConfig", "SegformerForSemanticSegmentation", "image-segmentation"),
     ("DPTConfig", "DPTForDepthEstimation", "depth-estimation"),
     ("T5Config", "T5Model", "feature-extraction"),
     ("WhisperConfig", "WhisperModel", "audio-feature-extraction")],
)
def test_new_tasks_inferred_from_the_architecture(config_class, arch, task):
    import transformers

    config = getattr(transformers, config_class)(architectures=[arch])
    assert infer_task(config) == task
    spec = task_spec(task)
    assert all(hasattr(transformers, name) for name in spec.auto_classes)


@pytest.mark.parametrize("task", ["text2text-generation", "automatic-speech-recognition",
                                  "image-text-to-text"])
def test_generation_tasks_export_without_cache(task):
    assert task_spec(task).constant_kwargs == {"use_cache": False}


@pytest.mark.parametrize("cli", ["export_onnx.cli", "export_executorch.cli"])
def test_unknown_task_fails_before_torch_is_imported(cli, tmp_path):
    import subprocess
    import sys

    code = (
        "import sys\n"
        f"from {cli} import main\n"
        "try:\n"
        f"    rc = main([{str(tmp_path)!r}, '--task', 'nope'])\n"
        "except SystemExit as e:\n"
        "    rc = e.code\n"
        "print('torch imported' if 'torch' in sys.modules else 'no torch')\n"
        "sys.exit(rc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "unknown task 'nope'" in proc.stderr and "text2text-generation" in proc.stderr
    assert "zero-shot-image-classification" in proc.stderr
    assert proc.stdout.strip() == "no torch"


def test_feature_extraction_of_a_multimodal_model_gets_image_and_text(tiny_model_dir):
    loaded = load_model_dir(tiny_model_dir("clip"), "feature-extraction")
    assert type(loaded.model).__name__ == "CLIPModel"
    sets = build_input_sets(loaded.model, loaded.config, loaded.tokenizer)
    assert {"input_ids", "pixel_values"} <= set(sets.export)
    assert len(sets.validation) >= 1


def test_inputs_follow_the_tokenizer_class_without_a_tokenizer(tiny_model_dir):
    """No tokenizer in the directory: RoBERTa's tokenizer class never returns token_type_ids,
    so the inputs have none, though RobertaModel.forward accepts them; BERT's does."""
    roberta = load_model_dir(tiny_model_dir("roberta"))
    assert roberta.tokenizer is None
    sets = build_input_sets(roberta.model, roberta.config)
    assert set(sets.export) == {"input_ids", "attention_mask"}
    bert = load_model_dir(tiny_model_dir("bert"))
    assert set(build_input_sets(bert.model, bert.config).export) == {
        "input_ids", "attention_mask", "token_type_ids"}


@pytest.mark.parametrize("name", ["whisper", "t5"])
def test_cli_and_sweep_build_the_same_inputs(name, tiny_model_dir):
    """The CLI's export and first validation set are the sweep's two sets, key for key."""
    from conftest import TINY_MODELS
    from export_sweep.zoo import build_tiny_model

    model_type, model_class = TINY_MODELS[name]
    tiny = build_tiny_model(model_type, model_class=model_class)
    loaded = load_model_dir(tiny_model_dir(name))
    sets = build_input_sets(loaded.model, loaded.config, loaded.tokenizer)
    assert sets.recipe == tiny.inputs.recipe
    for cli_set, sweep_set in zip(sets.all_sets(), tiny.inputs.sets, strict=False):
        assert {k: tuple(v.shape) for k, v in cli_set.items()} == {
            k: tuple(v.shape) for k, v in sweep_set.items()}
    assert any(next(iter(s.values())).shape[0] == 1 for s in sets.validation)


def test_qwen_vl_inputs_carry_the_multimodal_rotary_positions():
    """Qwen2-VL computes its 3-axis rotary positions with a Python loop over the runs of text
    and image tokens, which torch.export cannot trace: the inputs carry them, computed by the
    model's own get_rope_index, and the capture then succeeds."""
    from export_core import DynamoExporter
    from export_sweep.zoo import build_tiny_model

    tiny = build_tiny_model("qwen2_vl")
    sets = build_input_sets(tiny.model, tiny.model.config)
    inputs = sets.export
    assert inputs["position_ids"].shape == (3, *inputs["input_ids"].shape)
    want, _ = tiny.model.get_rope_index(
        inputs["input_ids"], image_grid_thw=inputs["image_grid_thw"],
        attention_mask=inputs["attention_mask"], mm_token_type_ids=inputs["mm_token_type_ids"])
    assert torch.equal(inputs["position_ids"], want)
    assert bool((inputs["mm_token_type_ids"] == 1).any())  # an image run to place
    capture = DynamoExporter().capture(tiny.model, inputs)
    with torch.no_grad():
        got = capture.program.module()(**inputs)
        eager = tiny.model(**inputs)
    torch.testing.assert_close(got.last_hidden_state, eager.last_hidden_state)
