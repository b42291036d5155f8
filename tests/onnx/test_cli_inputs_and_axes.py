"""Through ``export-onnx``: the artifact takes what the tokenizer produces, and its dynamic axes
are named ``batch`` / ``sequence``, shared across inputs, with the sequence bound reported."""

from __future__ import annotations

import json
import shutil

import pytest

import onnx
from export_onnx.cli import main


def _dims(model: onnx.ModelProto) -> dict[str, list[str | int]]:
    return {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
            for i in model.graph.input}


def _roberta_tokenizer():
    """A byte-level BPE RoBERTa tokenizer over a tiny alphabet (no hub)."""
    import transformers

    tokens = ["<s>", "<pad>", "</s>", "<unk>", "<mask>", ".", "\u0120",
              *"abcdefghijklmnopqrstuvwxyz", *("\u0120" + c for c in "abcdefghijklmnopqrstuvwxyz")]
    return transformers.RobertaTokenizer(vocab={t: i for i, t in enumerate(tokens)}, merges=[])


@pytest.mark.parametrize("with_tokenizer", [False, True], ids=["no-tokenizer", "tokenizer"])
def test_roberta_artifact_takes_the_tokenizers_inputs(with_tokenizer, tiny_model_dir, tmp_path,
                                                      capsys):
    """RobertaModel.forward accepts token_type_ids, a RoBERTa tokenizer never returns them: the
    artifact takes the tokenizer's model_input_names, with the tokenizer saved beside the model
    and without it (then the tokenizer class of the model type says)."""
    import transformers

    model_dir = tmp_path / "roberta"
    shutil.copytree(tiny_model_dir("roberta"), model_dir)
    if with_tokenizer:
        _roberta_tokenizer().save_pretrained(model_dir)
    out = tmp_path / "out"
    rc = main([str(model_dir), "-o", str(out), "-q"])
    assert rc == 0, capsys.readouterr().err
    report = json.loads((out / "export_report.json").read_text())
    names = transformers.RobertaTokenizer.model_input_names
    assert report["inputs"] == list(names) == ["input_ids", "attention_mask"]
    assert "token_type_ids" not in _dims(onnx.load(out / "model.onnx"))
    assert report["validation"]["passed"] and len(report["validation"]["checks"]) >= 2


def test_bert_axes_are_named_and_shared(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "out"
    rc = main([str(tiny_model_dir("bert")), "-o", str(out), "-q"])
    assert rc == 0, capsys.readouterr().err
    dims = _dims(onnx.load(out / "model.onnx"))
    assert dims["input_ids"] == dims["attention_mask"] == ["batch", "sequence"]
    report = json.loads((out / "export_report.json").read_text())
    bounds = report["bounds"]
    limit = json.loads((tiny_model_dir("bert") / "config.json").read_text())["max_position_embeddings"]
    assert bounds["max_seq"] == limit
    assert bounds["sources"]["max_seq"] == "config.max_position_embeddings"
    seq = [d for d in bounds["dims"] if d["name"] == "sequence"]
    assert {d["input"] for d in seq} >= {"input_ids", "attention_mask"}
    assert all(d["min"] == 1 and d["max"] == limit for d in seq)
    assert any(c["shapes"]["input_ids"][0] == 1 for c in report["validation"]["checks"])


def test_axes_the_model_fixes_are_fixed_dims(tiny_model_dir, tmp_path, capsys):
    """ViT's channels and image size were named ``"3"`` / ``"32"`` (``dim_param``s that ONNX
    Runtime matches against any size); they are ``dim_value``s, and a wrong size is refused at
    the input check."""
    import numpy as np
    import onnxruntime as ort

    out = tmp_path / "out"
    rc = main([str(tiny_model_dir("vit")), "-o", str(out), "-q"])
    assert rc == 0, capsys.readouterr().err
    size = json.loads((tiny_model_dir("vit") / "config.json").read_text())["image_size"]
    assert _dims(onnx.load(out / "model.onnx"))["pixel_values"] == ["batch", 3, size, size]
    session = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match="[Ii]nvalid dimensions"):
        session.run(None, {"pixel_values": np.zeros((1, 3, size + 1, size), np.float32)})
