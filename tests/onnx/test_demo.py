"""The README's main job: ``export-onnx`` with no MODEL exports the real all-MiniLM-L6-v2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch
import transformers

from export_core.cli import demo_model_dir

UNSEEN = [
    "Tiny sentences test padding.",
    "The exporter checks every artifact against eager PyTorch before writing it to disk.",
    "Caf\u00e9 menus rarely mention ONNX.",
    "Four.",
]


def test_embedded_default_via_console_script(tmp_path):
    exe = Path(sys.executable).with_name("export-onnx")
    out = tmp_path / "minilm"
    proc = subprocess.run([str(exe), "-o", str(out)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr
    assert "validate" in proc.stderr and proc.stdout == ""
    report = json.loads((out / "export_report.json").read_text())
    assert report["status"] == "ok" and report["validation"]["passed"]
    assert report["inputs"] == ["input_ids", "token_type_ids", "attention_mask"] or \
        set(report["inputs"]) == {"input_ids", "token_type_ids", "attention_mask"}
    assert report["outputs"] == ["last_hidden_state", "pooler_output"]
    assert len(report["validation"]["checks"]) >= 2

    tok = transformers.AutoTokenizer.from_pretrained(demo_model_dir())
    model = transformers.AutoModel.from_pretrained(demo_model_dir()).eval()
    sess = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    for batch in (UNSEEN, UNSEEN[1:2]):
        enc = tok(batch, padding=True, return_tensors="pt")
        with torch.no_grad():
            ref = model(**enc).last_hidden_state.numpy()
        got = sess.run(["last_hidden_state"], {k: v.numpy() for k, v in enc.items()})[0]
        np.testing.assert_allclose(got, ref, atol=1e-4, rtol=1e-3)
