"""A static cache (``--cache-implementation static``): the decode graph takes and returns a cache
of ``max_length`` positions and each layer's ``cumulative_length``, and the loop over it gives
eager ``generate()``'s greedy tokens (batch 1, a left-padded batch of 2, a run to ``max_length``).

The ONNX case runs through the CLI by default; ExecuTorch (whose ``to_executorch`` rejects the
in-place cache writes that the ``StaticLayer.update`` patch removes) is ``slow``.
"""

from __future__ import annotations

import json

import pytest
import torch
from _families import build_model, generation_backend
from _tiny_lm import write_tiny_llama

from export_core.errors import InputError, LoweringError
from export_core.registry import withheld

PATCH = "transformers.cache_utils.StaticLayer.update"
MAX_LENGTH = 48


def _eager_text(model_dir, prompt: str, new_tokens: int) -> str:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    enc = tok([prompt], return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    return tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)


def test_static_cache_through_the_cli_generates_eager_text(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    import onnx
    from export_onnx.cli import main

    model_dir = write_tiny_llama(tmp_path / "llama", max_positions=MAX_LENGTH)
    out = tmp_path / "out"
    rc = main([str(model_dir), "-o", str(out), "--task", "text-generation-with-past",
               "--cache-implementation", "static", "-q"])
    assert rc == 0, capsys.readouterr().err
    report = json.loads((out / "export_report.json").read_text())
    assert report["status"] == "ok" and report["cache_implementation"] == "static"
    assert report["validation"]["passed"]
    assert [c["name"] for c in report["validation"]["cases"]] == ["batch1", "batch2_left_padded", "to_max_length"]
    manifest = json.loads((out / "generation.json").read_text())
    assert manifest["cache"]["static_length"] == MAX_LENGTH
    assert manifest["cache"]["feeds"]["past_key_values.1.cumulative_length"] == "present.1.cumulative_length"
    graph = onnx.load(out / "decode" / "model.onnx", load_external_data=False).graph
    dims = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.input}
    # a fixed cache length; only the batch varies
    assert dims["past_key_values.0.key"][1:] == [2, MAX_LENGTH, 8]
    assert dims["attention_mask"][1:] == [1, 1, MAX_LENGTH]
    assert dims["past_key_values.0.cumulative_length"] == []
    decode_report = json.loads((out / "decode" / "export_report.json").read_text())
    assert f"dynamo:{PATCH}" in decode_report["patches"]["fired"]
    capsys.readouterr()

    prompt = "the quick brown fox"
    assert main(["generate", str(out), "--prompt", prompt, "--max-new-tokens", "20"]) == 0
    assert capsys.readouterr().out.strip() == _eager_text(model_dir, prompt, 20).strip()
    # the option belongs to the -with-past tasks
    rc = main([str(model_dir), "-o", str(tmp_path / "plain"), "--task", "text-generation",
               "--cache-implementation", "static", "-q"])
    assert rc != 0 and "--cache-implementation applies to the -with-past tasks only" in capsys.readouterr().err


@pytest.mark.slow
def test_static_cache_on_executorch_generates_eager_tokens(tmp_path):
    from export_core.generation import export_with_past

    exporter, open_session, generator_class = generation_backend("executorch")
    model = build_model("llama")
    result = export_with_past(exporter, model, output=tmp_path / "out", open_session=open_session,
                              max_length=MAX_LENGTH, cache_implementation="static")
    assert result.check.passed, result.check.first_problem()
    assert result.manifest.cache.static_length == MAX_LENGTH
    assert f"dynamo:{PATCH}" in result.graphs["decode"].report["patches"]["fired"]
    prompt = [31, 23, 57, 42, 17, 90]
    with torch.no_grad():
        eager = model.generate(input_ids=torch.tensor([prompt]), max_new_tokens=20, min_new_tokens=20,
                               do_sample=False, pad_token_id=result.manifest.pad_token_id)
    got = generator_class(tmp_path / "out").generate([prompt], max_new_tokens=20, min_new_tokens=20)
    assert got.sequences == [eager[0, len(prompt):].tolist()]


@pytest.mark.slow
def test_static_cache_on_executorch_fails_without_the_update_patch(tmp_path):
    from export_core.generation import export_with_past

    exporter, open_session, _ = generation_backend("executorch")
    with withheld("dynamo", PATCH), pytest.raises(LoweringError, match="in-place operation"):
        export_with_past(exporter, build_model("llama"), output=None, open_session=open_session,
                         max_length=MAX_LENGTH, cache_implementation="static", validate=False)


@pytest.mark.parametrize("family", ["mistral", "gemma3"])
def test_static_cache_is_refused_for_sliding_window_models(family):
    from export_core.generation import export_with_past

    exporter, open_session, _ = generation_backend("onnx")
    with pytest.raises(InputError, match="static cache is exported for decoder-only models without sliding"):
        export_with_past(exporter, build_model(family), output=None, open_session=open_session,
                         max_length=MAX_LENGTH, cache_implementation="static")


def test_static_cache_is_refused_for_encoder_decoders_and_unknown_kinds():
    from export_core.generation import export_with_past

    exporter, open_session, _ = generation_backend("onnx")
    with pytest.raises(InputError, match="static cache"):
        export_with_past(exporter, build_model("t5"), output=None, open_session=open_session,
                         max_length=MAX_LENGTH, cache_implementation="static")
    with pytest.raises(InputError, match="'dynamic' or 'static'"):
        export_with_past(exporter, build_model("llama"), output=None, open_session=open_session,
                         cache_implementation="offloaded")
