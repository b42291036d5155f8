"""Bad input fails cleanly: non-zero exit, one line naming the stage, no model.onnx, patches restored."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

import export_onnx
from export_core import CaptureError, ExportError, TranslationError, ValidationError, describe
from export_core.registry import register_patch, resolve_target, unregister
from export_onnx.cli import main


def _patched_attributes() -> dict[str, object]:
    out = {}
    for row in describe():
        if row.kind == "patch" and row.resolvable:
            t = resolve_target(row.target)
            out[row.target] = t.stored()
    return out


def _run(capsys, argv):
    rc = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    return rc, err


def _assert_clean_failure(rc, err, stage, out):
    assert rc != 0
    assert len(err) == 1, err
    assert err[0].startswith(f"export-onnx: error: [{stage}]"), err
    assert not (out / "model.onnx").exists()
    assert not list(out.glob(".*.tmp*")) if out.exists() else True


def test_missing_model_dir(tmp_path, capsys):
    rc, err = _run(capsys, [str(tmp_path / "nope"), "-o", str(tmp_path / "out"), "-q"])
    _assert_clean_failure(rc, err, "load", tmp_path / "out")
    assert "does not exist" in err[0]


def test_dir_without_config(tmp_path, capsys):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "model.safetensors").write_bytes(b"x")
    rc, err = _run(capsys, [str(tmp_path / "m"), "-o", str(tmp_path / "out"), "-q"])
    _assert_clean_failure(rc, err, "load", tmp_path / "out")
    assert "config.json" in err[0]


def test_corrupt_weights(tiny_model_dir, tmp_path, capsys):
    bad = tmp_path / "bad"
    shutil.copytree(tiny_model_dir("bert"), bad)
    data = (bad / "model.safetensors").read_bytes()
    (bad / "model.safetensors").write_bytes(data[: len(data) // 3])
    rc, err = _run(capsys, [str(bad), "-o", str(tmp_path / "out"), "-q"])
    _assert_clean_failure(rc, err, "load", tmp_path / "out")
    report = json.loads((tmp_path / "out" / "export_report.json").read_text())
    assert report["status"] == "failed" and report["stage"] == "load"


def test_unreadable_config(tiny_model_dir, tmp_path, capsys):
    bad = tmp_path / "bad"
    shutil.copytree(tiny_model_dir("bert"), bad)
    (bad / "config.json").write_text("{not json")
    rc, err = _run(capsys, [str(bad), "-o", str(tmp_path / "out"), "-q"])
    _assert_clean_failure(rc, err, "load", tmp_path / "out")


def test_unknown_task(tiny_model_dir, tmp_path, capsys):
    """A usage error (exit 2), decided by the option parser before anything is loaded or written."""
    with pytest.raises(SystemExit) as exc:
        main([str(tiny_model_dir("bert")), "--task", "teleportation", "-o", str(tmp_path / "o"), "-q"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown task 'teleportation'" in err and "text-generation" in err
    assert not (tmp_path / "o").exists()


def test_unwritable_output(tiny_model_dir, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("a file, not a directory")
    rc, err = _run(capsys, [str(tiny_model_dir("bert")), "-o", str(blocker / "out"), "-q"])
    assert rc != 0 and len(err) == 1 and err[0].startswith("export-onnx: error: [output]"), err


def test_failing_stage_restores_patches(tiny_model_dir, tmp_path, capsys):
    """A patch that breaks capture: clean failure, and every patched attribute is restored."""
    before = _patched_attributes()
    original_sdpa = torch.nn.functional.scaled_dot_product_attention

    @register_patch("dynamo", "torch.nn.functional.scaled_dot_product_attention",
                    reason="test: break capture",
                    upstream="https://github.com/pytorch/pytorch/issues/1")
    def _broken(original):
        def sdpa(*args, **kwargs):
            raise RuntimeError("deliberately broken attention")
        return sdpa

    try:
        rc, err = _run(capsys, [str(tiny_model_dir("llama")), "-o", str(tmp_path / "out"), "-q"])
    finally:
        unregister("dynamo", "torch.nn.functional.scaled_dot_product_attention")
    _assert_clean_failure(rc, err, "capture", tmp_path / "out")
    assert "deliberately broken attention" in err[0]
    assert torch.nn.functional.scaled_dot_product_attention is original_sdpa
    assert _patched_attributes() == before
    report = json.loads((tmp_path / "out" / "export_report.json").read_text())
    assert report["status"] == "failed" and report["stage"] == "capture"


class DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # data-dependent control flow: torch.export cannot trace it
            return x + 1
        return x - 1


class NoTranslation(torch.nn.Module):
    def forward(self, x):
        return torch.linalg.eigh(x @ x.transpose(-1, -2)).eigenvalues


class Random(torch.nn.Module):
    def forward(self, x):
        return x + torch.rand_like(x)


@pytest.mark.parametrize(
    "module, error, stage",
    [
        (DataDependent(), CaptureError, "capture"),
        (NoTranslation(), TranslationError, "translate"),
        (Random(), ValidationError, "validate"),
    ],
)
def test_api_failure_stages(module, error, stage, tmp_path):
    before = _patched_attributes()
    with pytest.raises(error) as info:
        export_onnx.export(module, (torch.randn(3, 4, 4),), output=tmp_path)
    assert info.value.stage == stage and str(info.value).startswith(f"[{stage}]")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "model.onnx").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["export_report.json"]
    report = json.loads((tmp_path / "export_report.json").read_text())
    assert report["status"] == "failed" and report["stage"] == stage and report["error"]
    assert _patched_attributes() == before
    assert isinstance(info.value, ExportError)
