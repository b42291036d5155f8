"""The sweep's generate mode: generative heads, the job through the CLI, COVERAGE.md's section."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from export_sweep.cli import main  # noqa: E402
from export_sweep.sweep.coverage import (  # noqa: E402
    coverage_markdown,
    parse_coverage,
    parse_generation,
)
from export_sweep.sweep.generate import (  # noqa: E402
    generate_backend,
    generative_class,
    generative_types,
    load_generative,
)


def test_generative_heads_come_from_the_auto_mappings() -> None:
    assert generative_class("llama") == "LlamaForCausalLM"
    assert generative_class("gpt2") == "GPT2LMHeadModel"
    assert generative_class("t5") == "T5ForConditionalGeneration"
    assert generative_class("whisper") == "WhisperForConditionalGeneration"
    assert generative_class("bert") == "BertLMHeadModel"
    assert generative_class("vit") is None
    assert generative_types(["vit", "llama", "resnet", "t5", "llama"]) == ["llama", "t5"]


def test_generation_ready_models() -> None:
    # a causal-LM head of an encoder family caches only as a decoder
    bert = load_generative("bert").model
    assert bert.config.is_decoder and bert.config.use_cache
    # the default T5 config has no decoder start token; generate() needs one
    t5 = load_generative("t5").model
    assert t5.config.decoder_start_token_id == t5.config.pad_token_id
    assert t5.generation_config.decoder_start_token_id == t5.config.pad_token_id
    assert t5.generation_config.use_cache


def test_a_tiny_model_that_cannot_generate_in_eager_is_not_built() -> None:
    from export_sweep.zoo.build import ZooBuildError

    # the shrunk Bamba keeps only Mamba layers: eager generate() has no attention layer to ask
    # for the cache length; nothing to compare an export with
    with pytest.raises(ZooBuildError, match=r"\[generate\] bamba: eager generate\(\) fails"):
        load_generative("bamba")


def test_a_model_that_cannot_generate_is_a_failure_with_its_stage() -> None:
    import torch

    class NoGenerate(torch.nn.Module):  # no generation config, no generate(): capture fails
        def __init__(self) -> None:
            super().__init__()
            import transformers

            self.config = transformers.LlamaConfig(vocab_size=16, hidden_size=8,
                                                   num_hidden_layers=1, num_attention_heads=2)

    r = generate_backend(NoGenerate(), "onnx")
    assert r["status"] == "fail" and r["stage"] == "capture", r
    assert r["error"] and r["max_length"] == 256


def test_generate_mode_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "generate-results.json"
    rc = main(["--families", "gpt2", "vit", "--mode", "generate", "--backend", "onnx",
               "-j", "1", "--quiet", "--out", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert set(data["results"]) == {"gpt2"}  # vit has no generative head
    r = data["results"]["gpt2"]["backends"]["onnx"]
    assert r["status"] == "pass", r
    assert r["graphs"] == ["decode", "prefill"] and r["max_length"] == 256
    # batch 1, a left-padded batch of 2, and batch 1 to the maximum length
    assert r["cases"] == 3 and r["tokens"] >= 64 + 2 * 64 + 200
    assert len(r["cache"]["layer_kinds"]) == r["cache"]["num_layers"] >= 1
    # resumable: a second run has nothing to do
    assert main(["--families", "gpt2", "--mode", "generate", "--backend", "onnx", "--quiet",
                 "--out", str(out)]) == 0
    assert json.loads(out.read_text())["results"]["gpt2"]["backends"]["onnx"] == r

    sweep = tmp_path / "sweep-results.json"
    sweep.write_text(json.dumps({"versions": {}, "results": {"gpt2": {
        "model_type": "gpt2", "class_name": "GPT2Model", "modality": "text",
        "build": {"status": "ok"},
        "backends": {"onnx": {"status": "pass", "stage": None, "error": None}}}}}))
    md = tmp_path / "COVERAGE.md"
    assert main(["coverage", str(sweep), "--generate", str(out), "-o", str(md)]) == 0
    text = md.read_text()
    assert parse_generation(text) == {"gpt2": {"onnx": "pass"}}
    assert parse_coverage(text) == {"gpt2": {"onnx": "pass"}}
    capsys.readouterr()
    assert main(["coverage", str(sweep), "--generate", str(tmp_path / "absent.json"),
                 "-o", str(md)]) == 2
    assert "no results file" in capsys.readouterr().err


def test_generate_mode_refuses_types_without_a_generative_head(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["--families", "vit", "resnet", "--mode", "generate", "--quiet",
               "--out", str(tmp_path / "r.json")])
    assert rc == 2
    assert "has a generative head" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()


def _record(status: str, stage: str | None = None, error: str | None = None) -> dict:
    return {"status": status, "stage": stage, "error": error, "seconds": 1.0, "max_length": 128}


def test_generation_section_renders_totals_stages_and_unmeasured_cells() -> None:
    generation = {"versions": {}, "wall_seconds": 600.0, "workers": 2, "results": {
        "llama": {"class_name": "LlamaForCausalLM", "build": {"status": "ok"},
                  "backends": {"onnx": _record("pass"), "executorch": _record("pass")}},
        "mamba": {"class_name": "MambaForCausalLM", "build": {"status": "ok"},
                  "backends": {"onnx": _record("fail", "translate", "TranslationError: x | y")}},
        "nope": {"class_name": "", "build": {"status": "fail"},
                 "backends": {"onnx": _record("skip", "build", "build failed")}},
    }}
    sweep = {"versions": {}, "results": {"llama": {
        "class_name": "LlamaModel", "modality": "text", "build": {"status": "ok"},
        "backends": {"onnx": {"status": "fail", "stage": "capture", "error": "e"}}}}}
    md = coverage_markdown(sweep, generation=generation)
    section = md.split("## Generation", 1)[1].split("\n## ", 1)[0]
    assert "over the 3 model types with a generative head" in section and "2 of them built" in section
    assert "| ONNX | 2 | 1 (50%) | 1 | 0 |" in section
    assert "| ExecuTorch | 1 | 1 (100%) | 0 | 1 |" in section
    assert "| ONNX | translate | 1 |" in section
    assert "Generation sweep wall time: 10.0 min (2 workers)." in section
    assert parse_generation(md) == {
        "llama": {"onnx": "pass", "executorch": "pass"},
        "mamba": {"onnx": "fail"},
        "nope": {"onnx": "skip"},
    }
    assert "translate: TranslationError: x \\| y" in section
    # the export table is read apart from the generation one
    assert parse_coverage(md) == {"llama": {"onnx": "fail"}}
