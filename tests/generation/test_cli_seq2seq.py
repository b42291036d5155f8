"""``export-onnx DIR --task text2text-generation-with-past`` (T5) and
``--task automatic-speech-recognition-with-past`` (Whisper) export the encoder, prefill and
decode graphs, and ``export-onnx generate OUT`` prints eager ``generate()``'s text: from a
source prompt, and from ``--input-features FILE.npy``. (ExecuTorch's encoder-decoder graphs run
in ``test_seq2seq.py``'s slow cases.)"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from _tiny_lm import write_tiny_t5, write_tiny_whisper

pytest.importorskip("onnxruntime")


def _export(model_dir, out, task: str, capsys) -> dict:
    from export_onnx.cli import main

    rc = main([str(model_dir), "-o", str(out), "--task", task, "--max-length", "32", "-q"])
    assert rc == 0, capsys.readouterr().err
    report = json.loads((out / "export_report.json").read_text())
    assert report["status"] == "ok" and report["task"] == task
    assert report["validation"]["kind"] == "generation" and report["validation"]["passed"]
    assert set(report["graphs"]) == {"encoder", "prefill", "decode"}
    for role in ("encoder", "prefill", "decode"):
        assert (out / role / "model.onnx").is_file()
    assert (out / "generation.json").is_file() and (out / "tokenizer.json").is_file()
    capsys.readouterr()
    return report


def _generate(out, capsys, *args: str) -> tuple[int, str, str]:
    from export_onnx.cli import main

    rc = main(["generate", str(out), *args])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_t5_text2text_with_past_generates_eager_text(tmp_path, capsys):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    model_dir = write_tiny_t5(tmp_path / "t5")
    out = tmp_path / "out"
    report = _export(model_dir, out, "text2text-generation-with-past", capsys)
    assert "past_key_values.0.encoder.key" in report["inputs"]
    assert "present.1.decoder.value" in report["outputs"]

    prompts = ["the quick brown fox", "hello world"]
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval()
    with torch.no_grad():
        enc = tok(prompts, return_tensors="pt", padding=True)
        ids = model.generate(**enc, max_new_tokens=12, do_sample=False)
    want = tok.batch_decode(ids, skip_special_tokens=True)

    rc, stdout, err = _generate(out, capsys, "--prompt", prompts[0], "--max-new-tokens", "12")
    assert rc == 0, err
    assert stdout == want[0] + "\n"
    rc, stdout, err = _generate(out, capsys, "--prompt", prompts[0], "--prompt", prompts[1],
                                "--max-new-tokens", "12")
    assert rc == 0, err
    assert stdout.splitlines() == [f"[{i}] {json.dumps(t, ensure_ascii=False)}" for i, t in enumerate(want)]
    # beyond the decoder's bound: refused with the numbers
    rc, _, err = _generate(out, capsys, "--prompt", prompts[0], "--max-new-tokens", "40")
    assert rc == 1 and "exceeds the export's maximum length 32" in err


@pytest.mark.slow
def test_whisper_asr_with_past_generates_eager_text_from_input_features(tmp_path, capsys):
    from transformers import AutoTokenizer, WhisperForConditionalGeneration

    model_dir = write_tiny_whisper(tmp_path / "whisper")
    out = tmp_path / "out"
    report = _export(model_dir, out, "automatic-speech-recognition-with-past", capsys)
    assert report["graphs"]["encoder"]["inputs"] == ["input_features"]

    features = np.random.default_rng(3).standard_normal((16, 64)).astype(np.float32)
    np.save(tmp_path / "f.npy", features)
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = WhisperForConditionalGeneration.from_pretrained(model_dir).eval()
    with torch.no_grad():
        ids = model.generate(input_features=torch.from_numpy(features[None]), max_new_tokens=10,
                             do_sample=False)
    want = tok.decode(ids[0], skip_special_tokens=True)
    rc, stdout, err = _generate(out, capsys, "--input-features", str(tmp_path / "f.npy"),
                                "--max-new-tokens", "10")
    assert rc == 0, err
    assert stdout == want + "\n"
    # neither or both sources: an argparse error
    with pytest.raises(SystemExit) as exit_info:
        _generate(out, capsys, "--max-new-tokens", "10")
    assert exit_info.value.code == 2
    np.save(tmp_path / "bad.npy", np.zeros((2, 3, 4, 5), dtype=np.float32))
    rc, _, err = _generate(out, capsys, "--input-features", str(tmp_path / "bad.npy"))
    assert rc == 1 and "expected float (batch, mel_bins, frames)" in err
