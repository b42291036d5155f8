"""``export-executorch`` options say what they do: ``--static`` validates at the program's own
shape on two sets of input values and reports no bounds; ``--max-seq`` above the model's
position limit is reported on stderr and the report gives the bound the program accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from export_executorch.cli import main


@pytest.fixture(scope="module")
def bert64(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny BERT with a 64-position limit."""
    import torch
    import transformers

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=99, hidden_size=16, num_hidden_layers=1,
                                     num_attention_heads=2, intermediate_size=32,
                                     max_position_embeddings=64)
    model = transformers.BertModel(config)
    model.config.architectures = ["BertModel"]
    path = tmp_path_factory.mktemp("bert64")
    model.save_pretrained(path)
    return path


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], dict]:
    capsys.readouterr()
    rc = main(argv)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    out = Path(argv[argv.index("-o") + 1])
    return rc, err, json.loads((out / "export_report.json").read_text())


def test_static_is_validated_at_its_shape_and_reports_no_bounds(
    bert64: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    rc, err, report = _cli([str(bert64), "-o", str(tmp_path), "--static", "--backend", "portable"],
                           capsys)
    assert rc == 0, err
    assert report["bounds"] is None
    v = report["validation"]
    assert v["passed"] and v["static"] is True
    assert len(v["checks"]) == 2 and v["checks"][0]["shapes"] == v["checks"][1]["shapes"]
    assert "validation_sets_skipped" not in report


def test_max_seq_above_the_position_limit_is_reported_and_lowered(
    bert64: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    rc, err, report = _cli([str(bert64), "-o", str(tmp_path), "--max-seq", "100000",
                            "--backend", "portable", "-q"], capsys)
    assert rc == 0, err
    assert err == ["warning: max_seq=100000 is above what the model accepts; its sequence axes "
                   "are bounded at 64"]
    bounds = report["bounds"]
    assert bounds["max_seq"] == 64
    assert bounds["sources"]["max_seq"] == "the model's limit (below 100000 from option)"
    assert {d["max"] for d in bounds["dims"] if d["role"] == "sequence"} == {64}
