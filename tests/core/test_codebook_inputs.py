"""MusicGen's inputs: ``input_ids`` folds the codebooks into its rows, ``(batch * num_codebooks,
seq)``, and ``attention_mask`` has one row per example, ``(batch, seq)``. Eager accepts a mask
with one row per ``input_ids`` row (the mask functions read its first ``batch`` rows), so the
layout comes from the forward's documented shape; with the wrong one, the exported program ties
the mask's rows to the ids' rows and fails at the second input shape. Exported through both CLIs
and compared with eager at every validation shape, batch 1 among them."""

from __future__ import annotations

import json

import pytest

from export_core.inputs import build_input_sets
from export_sweep.zoo.build import build_tiny_model


@pytest.fixture(scope="module")
def musicgen_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("musicgen") / "model"
    build_tiny_model("musicgen").model.save_pretrained(path)  # config and weights only
    return path


@pytest.mark.parametrize("model_type", ["musicgen", "musicgen_melody"])
def test_ids_carry_a_row_per_codebook_and_the_mask_a_row_per_example(model_type) -> None:
    tiny = build_tiny_model(model_type)
    k = tiny.model.config.num_codebooks
    assert k > 1
    sets = build_input_sets(tiny.model, tiny.model.config)
    for s in sets.all_sets():
        batch, seq = s["attention_mask"].shape
        assert s["input_ids"].shape == (batch * k, seq)
    assert 1 in {s["attention_mask"].shape[0] for s in sets.validation}


def test_other_text_models_keep_one_row_per_example() -> None:
    tiny = build_tiny_model("bert")
    sets = build_input_sets(tiny.model, tiny.model.config)
    for s in sets.all_sets():
        assert s["input_ids"].shape == s["attention_mask"].shape


@pytest.mark.parametrize("tool", ["export_onnx", "export_executorch"])
def test_musicgen_exports_and_matches_eager_at_every_shape(tool, musicgen_dir, tmp_path) -> None:
    main = __import__(f"{tool}.cli", fromlist=["main"]).main
    out = tmp_path / "out"
    assert main([str(musicgen_dir), "-o", str(out), "-q"]) == 0
    report = json.loads((out / "export_report.json").read_text())
    checks = report["validation"]["checks"]
    assert report["validation"]["passed"] is True
    assert len(checks) >= 2
    rows = [(c["shapes"]["input_ids"][0], c["shapes"]["attention_mask"][0]) for c in checks]
    assert all(ids == 2 * mask for ids, mask in rows), rows
    assert len({mask for _, mask in rows}) >= 2, rows
    if tool == "export_onnx":  # ExecuTorch's bounds start at the captured minimum, batch 2
        assert (2, 1) in rows


def test_a_sub_config_model_loads_by_its_architecture(musicgen_dir) -> None:
    """``MusicgenModel`` takes ``MusicgenDecoderConfig``, which no auto class maps: the loader
    falls back to the class ``config.architectures`` names."""
    from export_core.loading import load_model_dir

    loaded = load_model_dir(musicgen_dir)
    assert type(loaded.model).__name__ == "MusicgenModel"
    assert loaded.task.name == "feature-extraction"
