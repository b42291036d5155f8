"""An ExecuTorch with-past export generates to its maximum length past 224 positions.

The cache inputs ``(batch, kv_heads, past_sequence, head_dim)`` are 4-d float tensors; the
bounds once took their past axis for an image axis and capped it at 224, so decode failed at
past 225 (``0x12``, a bounded tensor resized beyond its capacity) for any ``max_length`` above.
"""

from __future__ import annotations

import json

import pytest
from _tiny_lm import write_tiny_llama


@pytest.mark.slow
def test_executorch_decode_reaches_a_max_length_beyond_224(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from export_core.generation import export_with_past
    from export_executorch.exporter import ExecutorchExporter

    model_dir = write_tiny_llama(tmp_path / "llama", max_positions=256)
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    out = tmp_path / "out"
    result = export_with_past(ExecutorchExporter(), model, output=out, max_length=256, max_batch=2,
                              tokenizer=AutoTokenizer.from_pretrained(model_dir))
    assert result.check is not None and result.check.passed
    cases = {c["name"]: c for c in result.report["validation"]["cases"]}
    assert cases["to_max_length"]["max_new_tokens"] >= 240
    decode = json.loads((out / "decode" / "export_report.json").read_text())
    past = [d for d in decode["bounds"]["dims"] if d["input"].startswith("past_key_values.") and d["axis"] == 2]
    assert past and {(d["role"], d["max"]) for d in past} == {("sequence", 255)}
