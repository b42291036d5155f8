"""Export sweep: the job, the resumable CLI run, COVERAGE.md and its check."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from export_sweep.cli import main  # noqa: E402
from export_sweep.sweep import (  # noqa: E402
    SUBSETS,
    SkipEntry,
    compare,
    coverage_markdown,
    export_backend,
    export_job,
    get_backend,
    parse_coverage,
    totals,
)
from export_sweep.zoo.inputs import ExampleInputs  # noqa: E402


class TinyLinear(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).relu()


def _linear_inputs() -> ExampleInputs:
    g = torch.Generator().manual_seed(0)
    return ExampleInputs(
        sets=({"x": torch.randn(2, 5, 4, generator=g)}, {"x": torch.randn(3, 7, 4, generator=g)}),
        recipe="test",
    )


def _synthetic(status_onnx: str = "pass") -> dict:
    return {
        "versions": {"torch": "2.13", "transformers": "5.0"},
        "results": {
            "bert": {
                "model_type": "bert",
                "class_name": "BertModel",
                "modality": "text",
                "build": {"status": "ok"},
                "backends": {
                    "onnx": {"status": status_onnx, "stage": None, "error": None, "seconds": 1.0},
                    "executorch": {
                        "status": "fail",
                        "stage": "lowering",
                        "error": "LoweringError: op | not supported",
                        "seconds": 2.0,
                    },
                },
            },
            "nope": {
                "model_type": "nope",
                "class_name": "",
                "modality": "vision",
                "build": {"status": "fail", "error": "ZooBuildError: [config] nope"},
                "backends": {
                    "onnx": {"status": "skip", "stage": "build", "error": "build failed"},
                    "executorch": {"status": "skip", "stage": "build", "error": "build failed"},
                },
            },
        },
    }


def test_ci_subset_covers_every_modality() -> None:
    ci = SUBSETS["ci"]
    assert len(ci) >= 40 and len(set(ci)) == len(ci)
    for must in ("bert", "vit", "wav2vec2", "clip", "t5", "videomae"):
        assert must in ci


def test_coverage_roundtrip_and_compare() -> None:
    data = _synthetic()
    md = coverage_markdown(data)
    assert "| torch | 2.13 |" in md and "## Totals per modality" in md
    table = parse_coverage(md)
    assert table["bert"] == {"onnx": "pass", "executorch": "fail"}
    assert table["nope"] == {"onnx": "skip", "executorch": "skip"}
    assert compare(table, data) == []
    diffs = compare(table, _synthetic("fail"))
    assert diffs == ["bert onnx: committed pass, now fail"]
    tot = totals(data)
    assert tot["text"] == {"types": 1, "built": 1, "onnx": {"pass": 1}, "executorch": {"fail": 1}}
    assert tot["vision"]["built"] == 0


def _export_validated_once(model, inputs, **kwargs):  # noqa: ANN001, ANN202
    """An ONNX export whose validation keeps only its own input set (as an ExecuTorch program
    bounded below the second set's sizes does)."""
    import export_onnx

    kwargs.pop("validation_inputs", None)
    return export_onnx.export(model, inputs, **kwargs, validation_inputs=[])


def test_an_export_validated_at_one_shape_is_a_failure() -> None:
    once = replace(get_backend("onnx"), module=__name__, function="_export_validated_once")
    r = export_backend(TinyLinear(), _linear_inputs(), once)
    assert r["status"] == "fail" and r["stage"] == "validate", r
    assert r["validated_shapes"] == 1 and "OneShapeValidation" in r["error"]
    r = export_backend(TinyLinear(), _linear_inputs(), "onnx")
    assert r["status"] == "pass" and r["validated_shapes"] == 2


def test_a_pass_on_outputs_of_about_zero_is_a_failure() -> None:
    near_zero = TinyLinear()
    with torch.no_grad():
        for p in near_zero.parameters():
            p.mul_(1e-10)
    r = export_backend(near_zero, _linear_inputs(), "onnx")
    assert r["status"] == "fail" and r["stage"] == "validate", r
    assert r["error"].startswith("VacuousValidation:") and r["validated_shapes"] == 2


def test_fired_workarounds_are_recorded_and_totalled() -> None:
    class CheckedLinear(TinyLinear):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            torch._check_tensor_all(x.isfinite())
            return super().forward(x)

    r = export_backend(CheckedLinear(), _linear_inputs(), "onnx")
    assert r["status"] == "pass", r
    assert "all_true_as_core_aten" in r["workarounds"]
    data = _synthetic()
    data["results"]["bert"]["backends"]["onnx"].update(workarounds=r["workarounds"])
    md = coverage_markdown(data)
    section = md.split("## Workarounds", 1)[1].split("\n## ", 1)[0]
    assert "Counted over the 1 exports recorded" in section
    assert "| ONNX | `all_true_as_core_aten` | 1 |" in section
    # registered but seen acting on no export: listed as removal candidates, the fired one not
    assert "- `aten_sort_stable` (onnx translation)" in section
    assert "- `all_true_as_core_aten`" not in section


def test_missing_backend_is_skipped() -> None:
    missing = replace(get_backend("onnx"), module="no_such_module_xyz")
    r = export_backend(TinyLinear(), _linear_inputs(), missing)
    assert r["status"] == "skip" and "export-onnx not installed" in r["error"]


def test_build_failure_skips_every_backend() -> None:
    rec = export_job("no_such_model_type_xyz")
    assert rec["build"]["status"] == "fail"
    for b in ("onnx", "executorch"):
        assert rec["backends"][b]["status"] == "skip"
        assert rec["backends"][b]["error"].startswith("build failed:")


def test_skip_list_entry_that_passes_is_xpass() -> None:
    entry = SkipEntry("x", "TinyLinear", "onnx", "synthetic entry for this test", "none needed")
    r = export_backend(
        TinyLinear(),
        _linear_inputs(),
        "onnx",
        class_name="TinyLinear",
        skips=[entry],
        optimize_off=[entry],
    )
    assert r["status"] == "xpass", r
    assert r["optimize"] is False and r["skip_reason"] == entry.reason


def test_cli_sweep_resume_coverage_and_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results.json"
    args = ["--families", "bert", "vit", "--backend", "onnx", "-j", "2", "--out", str(out)]
    assert main([*args, "--timeout", "240"]) == 0
    data = json.loads(out.read_text())
    assert set(data["results"]) == {"bert", "vit"}
    assert set(data["versions"]) >= {"torch", "transformers", "onnxscript", "onnxruntime"}
    for t, cls in (("bert", "BertModel"), ("vit", "ViTModel")):
        rec = data["results"][t]
        assert rec["class_name"] == cls and rec["build"]["status"] == "ok"
        assert set(rec["backends"]) == {"onnx"}
        assert rec["backends"]["onnx"]["status"] == "pass", rec
        assert rec["backends"]["onnx"]["seconds"] > 0
    capsys.readouterr()

    # Resume: everything is recorded, nothing runs.
    assert main(args) == 0
    assert "0 exports to run (2 types already recorded)" in capsys.readouterr().err
    assert json.loads(out.read_text())["results"] == data["results"]

    # --redo re-measures only the pairs that stopped at the given stages.
    stale = json.loads(out.read_text())
    stale["results"]["vit"]["backends"]["onnx"] = {
        "status": "fail", "stage": "bounds", "error": "InputError: stale", "seconds": 1.0}
    out.write_text(json.dumps(stale))
    assert main([*args, "--redo", "bounds", "timeout"]) == 0
    assert "1 exports to run (2 types already recorded)" in capsys.readouterr().err
    redone = json.loads(out.read_text())["results"]
    assert redone["vit"]["backends"]["onnx"]["status"] == "pass"
    assert redone["bert"] == data["results"]["bert"]

    md = tmp_path / "COVERAGE.md"
    assert main(["coverage", str(out), "-o", str(md)]) == 0
    text = md.read_text()
    assert "| bert | BertModel | text | pass |" in text
    assert main(["check", str(md), "--results", str(out)]) == 0

    altered = tmp_path / "ALTERED.md"
    altered.write_text(
        text.replace("| vit | ViTModel | vision | pass |", "| vit | ViTModel | vision | fail |")
    )
    capsys.readouterr()
    assert main(["check", str(altered), "--results", str(out)]) == 1
    assert "vit onnx: committed fail, now pass" in capsys.readouterr().out


def test_cli_sweeps_the_portable_backend_when_named(tmp_path: Path) -> None:
    out, md = tmp_path / "results.json", tmp_path / "COVERAGE.md"
    args = ["--families", "bert", "--backend", "executorch-portable", "-j", "1", "--out", str(out)]
    assert main([*args, "--timeout", "300"]) == 0
    rec = json.loads(out.read_text())["results"]["bert"]
    assert set(rec["backends"]) == {"executorch-portable"}
    assert rec["backends"]["executorch-portable"]["status"] == "pass", rec
    assert rec["backends"]["executorch-portable"]["validated_shapes"] == 2
    assert main(["coverage", str(out), "-o", str(md)]) == 0
    assert "| bert | BertModel | text | pass |" in md.read_text()
    assert "ExecuTorch portable pass" in md.read_text()


def _synthetic_portable() -> dict:
    """A portable-kernels sweep of :func:`_synthetic`'s types, with the same versions."""
    data = _synthetic()
    for rec in data["results"].values():
        rec["backends"] = {"executorch-portable": rec["backends"]["executorch"]}
    data["results"]["bert"]["backends"]["executorch-portable"] = {
        "status": "pass", "stage": None, "error": None, "seconds": 3.0}
    data["results"]["bert"]["worker_seconds"] = 4.0
    data.update(wall_seconds=600.0, workers=2)
    return data


def test_coverage_merges_a_portable_sweep_and_check_names_its_backends(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    main_file, portable, md = tmp_path / "a.json", tmp_path / "p.json", tmp_path / "COVERAGE.md"
    main_file.write_text(json.dumps({**_synthetic(), "wall_seconds": 1200.0, "workers": 2}))
    portable.write_text(json.dumps(_synthetic_portable()))
    assert main(["coverage", str(main_file), str(portable), "-o", str(md)]) == 0
    text = md.read_text()
    assert parse_coverage(text) == {
        "bert": {"onnx": "pass", "executorch": "fail", "executorch-portable": "pass"},
        "nope": {"onnx": "skip", "executorch": "skip", "executorch-portable": "skip"},
    }
    assert "ExecuTorch portable pass" in text
    assert "20.0 min for ONNX and ExecuTorch (up to 2 workers); 10.0 min for ExecuTorch portable " in text
    # check compares the default backends unless another is named; each file its own.
    assert main(["check", str(md), "--results", str(main_file)]) == 0
    assert "2 model types x 2 backend(s) agree" in capsys.readouterr().out
    assert main(["check", str(md), "--results", str(portable),
                 "--backend", "executorch-portable"]) == 0
    capsys.readouterr()
    assert main(["check", str(md), "--results", str(main_file),
                 "--backend", "executorch-portable"]) == 1
    assert "bert executorch-portable: committed pass, now absent" in capsys.readouterr().out

    # Files of other versions, or one backend recorded twice, are refused; nothing is written.
    md.unlink()
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**_synthetic_portable(), "versions": {"torch": "9.9"}}))
    assert main(["coverage", str(main_file), str(other), "-o", str(md)]) != 0
    assert "different versions" in capsys.readouterr().err
    assert main(["coverage", str(main_file), str(main_file), "-o", str(md)]) != 0
    assert "recorded in two files" in capsys.readouterr().err
    assert not md.exists()


@pytest.mark.slow
def test_check_runs_a_fresh_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    md = tmp_path / "COVERAGE.md"
    md.write_text(coverage_markdown(_synthetic("fail")))
    # bert's ONNX export passes: the committed "fail" disagrees with the fresh sweep.
    code = main(["check", str(md), "--families", "bert", "--backend", "onnx", "-j", "1"])
    assert code == 1
    assert "bert onnx: committed fail, now pass" in capsys.readouterr().out


def test_an_unknown_model_type_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A typo in --families is an error naming the closest types, and nothing is recorded."""
    out = tmp_path / "results.json"
    code = main(["--families", "blip_2", "bert", "--backend", "onnx", "--out", str(out)])
    assert code != 0
    err = capsys.readouterr().err
    assert "unknown model type(s): blip_2" in err and "blip-2" in err
    assert not out.exists()


def test_check_refuses_an_unknown_model_type(capsys: pytest.CaptureFixture[str]) -> None:
    """``check --families`` with a typo names the closest types before any sweep runs."""
    md = Path(__file__).resolve().parents[2] / "COVERAGE.md"
    assert main(["check", str(md), "--families", "bert_x", "--backend", "onnx"]) != 0
    assert "unknown model type(s): bert_x (did you mean bert" in capsys.readouterr().err
