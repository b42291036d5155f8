"""``export-onnx DIR --task text-generation-with-past`` (and ``export-executorch``) export the
prefill and decode graphs, and ``<prog> generate OUT --prompt`` prints eager's greedy text."""

from __future__ import annotations

import json

import pytest
import torch
from _tiny_lm import write_tiny_llama


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return write_tiny_llama(tmp_path_factory.mktemp("tiny-llama") / "llama")


def _eager_text(model_dir, prompt: str, new_tokens: int, *, ignore_eos: bool = False) -> str:
    """Eager greedy text; with ``ignore_eos`` the full budget by a plain argmax loop, as
    ``generate --ignore-eos`` does (``model.generate`` has no switch for it: an ``eos_token_id``
    of None falls back to the model's)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    enc = tok([prompt], return_tensors="pt")
    with torch.no_grad():
        if ignore_eos:
            ids = enc["input_ids"]
            for _ in range(new_tokens):
                next_id = model(input_ids=ids).logits[:, -1].argmax(-1, keepdim=True)
                ids = torch.cat([ids, next_id], dim=-1)
            out = ids
        else:
            out = model.generate(**enc, max_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    return tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)


def _cli(backend: str):
    if backend == "onnx":
        from export_onnx.cli import main
    else:
        from export_executorch.cli import main
    return main


@pytest.mark.parametrize("backend", ["onnx", "executorch"])
def test_with_past_exports_graphs_and_generate_prints_eager_text(backend, llama_dir, tmp_path, capsys):
    main = _cli(backend)
    out = tmp_path / "out"
    # ExecuTorch at the smallest batch bound: a range ending at the capture's batch of 2 would
    # pin the batch axis (batch 1 failed with 0x12), so the graphs admit 3 and the loop refuses 3
    extra = ["--max-batch", "2"] if backend == "executorch" else []
    rc = main([str(llama_dir), "-o", str(out), "--task", "text-generation-with-past", "-q", *extra])
    assert rc == 0, capsys.readouterr().err
    report = json.loads((out / "export_report.json").read_text())
    assert report["status"] == "ok" and report["task"] == "text-generation-with-past"
    assert report["validation"]["kind"] == "generation" and report["validation"]["passed"]
    cases = {c["name"]: c for c in report["validation"]["cases"]}
    assert cases["batch1"]["compared"] == [64]
    assert cases["batch2_left_padded"]["prompt_lengths"] == [7, 3]
    assert cases["to_max_length"]["max_new_tokens"] == 96 - 4
    manifest = json.loads((out / "generation.json").read_text())
    assert manifest["max_length"] == 96 and manifest["backend"] == backend
    assert manifest["max_batch"] == (2 if backend == "executorch" else 4)
    assert set(manifest["graphs"]) == {"prefill", "decode"}
    assert manifest["cache"]["feeds"]["past_key_values.1.value"] == "present.1.value"
    for name in ("tokenizer.json", "generation_config.json"):
        assert (out / name).is_file()
    assert not any(p.name.startswith(".staging") for p in out.iterdir())
    if backend == "onnx":
        import onnx

        graph = onnx.load(out / "decode" / "model.onnx", load_external_data=False).graph
        dims = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.input}
        assert dims["past_key_values.0.key"][0] == dims["input_ids"][0] == "batch"
        assert dims["past_key_values.0.key"][2] == "past_sequence"
    capsys.readouterr()

    prompt = "the quick brown fox"
    assert main(["generate", str(out), "--prompt", prompt, "--max-new-tokens", "12", "--ignore-eos"]) == 0
    printed = capsys.readouterr().out.strip()
    assert printed == _eager_text(llama_dir, prompt, 12, ignore_eos=True).strip()

    # sampling with a seed: the same text twice, another seed another text
    sampled = []
    for seed in ("7", "7", "8"):
        assert main(["generate", str(out), "--prompt", prompt, "--max-new-tokens", "12", "--ignore-eos",
                     "--do-sample", "--temperature", "1.5", "--seed", seed]) == 0
        sampled.append(capsys.readouterr().out)
    assert sampled[0] == sampled[1] != sampled[2]

    # a batch of two prompts, one line each
    assert main(["generate", str(out), "--prompt", prompt, "--prompt", "hello", "--max-new-tokens", "5"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [ln[:4] for ln in lines] == ["[0] ", "[1] "]
    assert json.loads(lines[0][4:]) == _eager_text(llama_dir, prompt, 5)

    if backend == "executorch":
        capsys.readouterr()
        assert main(["generate", str(out), "--prompt", "a", "--prompt", "b", "--prompt", "c"]) == 1
        assert "batch 3 exceeds the export's maximum batch 2" in capsys.readouterr().err

    # beyond the maximum length: refused with the numbers, exit 1
    capsys.readouterr()  # (the eager reference's own loading bars)
    assert main(["generate", str(out), "--prompt", prompt, "--max-new-tokens", "200"]) == 1
    err = capsys.readouterr().err
    assert "exceeds the export's maximum length 96" in err and len(err.strip().splitlines()) == 1


def test_generate_on_a_plain_export_says_what_to_do(tmp_path, capsys):
    from export_onnx.cli import main

    (tmp_path / "export_report.json").write_text("{}")
    assert main(["generate", str(tmp_path), "--prompt", "hi"]) == 1
    err = capsys.readouterr().err
    assert "has no generation.json" in err and "text-generation-with-past" in err


def test_generation_options_on_other_tasks_are_refused(llama_dir, tmp_path, capsys):
    from export_onnx.cli import main

    rc = main([str(llama_dir), "-o", str(tmp_path / "o"), "--task", "text-generation", "--max-length", "64", "-q"])
    assert rc == 1
    assert "--max-length applies to the -with-past tasks only" in capsys.readouterr().err
    rc = main([str(llama_dir), "-o", str(tmp_path / "o"), "--task", "text-generation", "--max-batch", "3", "-q"])
    assert rc == 1 and "--max-batch applies to the -with-past tasks only" in capsys.readouterr().err
