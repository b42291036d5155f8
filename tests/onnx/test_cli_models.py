"""Every architecture of the issue through the ``export-onnx`` CLI, checked against eager at new shapes."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest
import torch

from conftest import DECODERS, ENCODERS, VISION, build_tiny_model
from export_onnx.cli import main


def _fresh_inputs(name: str, model: torch.nn.Module) -> list[dict[str, torch.Tensor]]:
    """Two input sets at shapes the export never saw: batch 1, and a padded batch of 4."""
    g = torch.Generator().manual_seed(123)
    if name in VISION:
        size = getattr(model.config, "image_size", 64)
        return [{"pixel_values": torch.randn(b, 3, size, size, generator=g)} for b in (1, 4)]
    vocab = model.config.vocab_size
    sets = []
    for b, s, pad in ((1, 7, 0), (4, 11, 5)):
        mask = torch.ones(b, s, dtype=torch.long)
        if pad:
            mask[1, s - pad:] = 0
            mask[3, s - 2:] = 0
        sets.append({"input_ids": torch.randint(4, vocab, (b, s), generator=g), "attention_mask": mask})
    return sets


@pytest.mark.parametrize("name", [*ENCODERS, *DECODERS, *VISION])
def test_architecture_exports_and_matches_eager(name, tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "out"
    rc = main([str(tiny_model_dir(name)), "-o", str(out), "-q"])
    err = capsys.readouterr().err
    assert rc == 0, err
    report = json.loads((out / "export_report.json").read_text())
    assert report["status"] == "ok" and report["error"] is None
    assert report["validation"]["passed"]
    shapes = [c["shapes"] for c in report["validation"]["checks"]]
    assert len({json.dumps(s, sort_keys=True) for s in shapes}) >= 2
    assert any(next(iter(s.values()))[0] == 1 for s in shapes), "batch 1 is validated"
    if name in DECODERS:
        assert report["task"] == "text-generation"
        assert report["outputs"] == ["logits"]

    # independent check at shapes never seen during export
    model = build_tiny_model(name)
    sess = ort.InferenceSession(str(out / "model.onnx"), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    assert names == report["inputs"]
    for inputs in _fresh_inputs(name, model):
        feeds = {k: v.numpy() for k, v in inputs.items() if k in names}
        if "token_type_ids" in names:
            feeds["token_type_ids"] = np.zeros_like(feeds["input_ids"])
            inputs = {**inputs, "token_type_ids": torch.zeros_like(inputs["input_ids"])}
        kwargs = {"use_cache": False} if name in DECODERS else {}
        with torch.no_grad():
            expected = model(**inputs, **kwargs)
        got = sess.run(None, feeds)
        ref = expected[0] if isinstance(expected, tuple) else expected[report["outputs"][0]]
        np.testing.assert_allclose(got[0], ref.numpy(), atol=1e-4, rtol=1e-3)
