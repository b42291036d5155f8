"""The output directory contract (README "Output directory", :mod:`export_core.output`): an
export is swapped in whole or not at all, a failure never leaves an earlier artifact beside a
report that says the new export failed, one export at a time holds the directory, and ONNX
external data stays inside it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

import export_onnx
import onnx
from export_core import OutputError, RuntimeLoadError, ValidationError
from export_core.output import FAILED_REPORT_NAME, LOCK_NAME, STAGING_PREFIX, lock_output
from export_onnx import OnnxConfig, OnnxExporter, OrtRunner
from export_onnx.cli import main
from export_onnx.external_data import external_data_files


class Affine(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(64, 32)  # above onnx's 1 KiB external-data size threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x).relu()


class Random(torch.nn.Module):
    """Exports fine, never matches eager: fails at validate, after save."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.rand_like(x)


def _inputs() -> tuple[torch.Tensor]:
    return (torch.randn(3, 64),)


def _snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def _no_leftovers(directory: Path) -> None:
    left = [p.name for p in directory.iterdir()
            if p.name.startswith((STAGING_PREFIX, ".model.", LOCK_NAME)) or ".tmp" in p.name]
    assert left == [], left


def test_failed_export_keeps_the_earlier_export_and_reports_beside_it(tmp_path: Path) -> None:
    first = export_onnx.export(Affine(), _inputs(), output=tmp_path)
    assert first.report["files"] == ["model.onnx"]
    before = _snapshot(tmp_path)
    assert sorted(before) == ["export_report.json", "model.onnx"]

    with pytest.raises(ValidationError):
        export_onnx.export(Random(), _inputs(), output=tmp_path)
    after = _snapshot(tmp_path)
    failed = json.loads(after.pop(FAILED_REPORT_NAME))
    assert after == before  # the earlier artifact and its report, byte for byte
    assert failed["status"] == "failed" and failed["stage"] == "validate"
    assert failed["earlier_export_kept"] is True
    _no_leftovers(tmp_path)

    export_onnx.export(Affine(), _inputs(), output=tmp_path)  # a success clears the failure
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export_report.json", "model.onnx"]


def test_failure_without_an_earlier_success_removes_artifacts_no_report_vouches_for(
    tmp_path: Path,
) -> None:
    (tmp_path / "model.onnx").write_bytes(b"left by an older tool")
    (tmp_path / "export_report.json").write_text(json.dumps({"status": "failed"}))
    (tmp_path / "notes.txt").write_text("the user's own file")
    with pytest.raises(ValidationError):
        export_onnx.export(Random(), _inputs(), output=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export_report.json", "notes.txt"]
    report = json.loads((tmp_path / "export_report.json").read_text())
    assert report["status"] == "failed" and report["stage"] == "validate"


def test_a_success_removes_files_of_the_earlier_export_it_does_not_replace(tmp_path: Path) -> None:
    exporter = OnnxExporter(OnnxConfig(external_data_threshold=0))
    exporter.export(Affine(), _inputs(), output=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "export_report.json", "model.onnx", "model.onnx.data"]
    export_onnx.export(Affine(), _inputs(), output=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export_report.json", "model.onnx"]


def test_external_data_is_a_plain_name_beside_the_model(tmp_path: Path) -> None:
    result = OnnxExporter(OnnxConfig(external_data_threshold=0)).export(
        Affine(), _inputs(), output=tmp_path)
    assert result.report["files"] == ["model.onnx", "model.onnx.data"]
    assert external_data_files(tmp_path / "model.onnx") == ["model.onnx.data"]
    model = onnx.load(str(tmp_path / "model.onnx"), load_external_data=False)
    locations = {e.value for t in model.graph.initializer for e in t.external_data
                 if e.key == "location"}
    assert locations == {"model.onnx.data"}
    _no_leftovers(tmp_path)


@pytest.mark.parametrize("location", ["../outside.data", "/tmp/absolute.data", "sub/dir.data"])
def test_external_data_outside_the_directory_is_refused_at_load(tmp_path: Path, location: str) -> None:
    OnnxExporter(OnnxConfig(external_data_threshold=0)).export(Affine(), _inputs(), output=tmp_path)
    model = onnx.load(str(tmp_path / "model.onnx"), load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location
    hostile = tmp_path / "hostile.onnx"
    onnx.save(model, str(hostile))
    with pytest.raises(ValueError, match="not a plain file name"):
        external_data_files(hostile)
    with pytest.raises(RuntimeLoadError, match=r"^\[runtime\] refusing to load"):
        OrtRunner(hostile, ["x"])


def test_a_second_export_into_a_held_directory_fails_at_once_naming_the_holder(
    tmp_path: Path, tiny_model_dir, capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    model_dir = tiny_model_dir("bert")
    capsys.readouterr()  # building the fixture prints progress
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time\nfrom export_core.output import lock_output\n"
         f"with lock_output({str(out)!r}):\n    print('held', flush=True)\n    time.sleep(120)\n"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        rc = main([str(model_dir), "-o", str(out), "-q"])
        err = capsys.readouterr().err.strip().splitlines()
    finally:
        holder.kill()
        holder.wait()
    assert rc == 1 and len(err) == 1, err
    assert err[0].startswith("export-onnx: error: [output]")
    assert f"pid {holder.pid}" in err[0]
    assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]  # nothing written, lock not ours


def test_another_thread_is_refused_and_the_same_thread_reenters(tmp_path: Path) -> None:
    seen: list[BaseException] = []
    with lock_output(tmp_path) as lock, lock_output(tmp_path) as again:
        assert again is lock and (tmp_path / LOCK_NAME).read_text().strip() == str(os.getpid())

        def other() -> None:
            try:
                with lock_output(tmp_path):
                    pass
            except OutputError as e:
                seen.append(e)

        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert len(seen) == 1 and f"pid {os.getpid()}" in str(seen[0])
    assert not (tmp_path / LOCK_NAME).exists()


def test_a_stale_lock_and_staging_of_a_dead_process_are_taken_over(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / LOCK_NAME).write_text(f"{dead.pid}\n")
    (tmp_path / f"{STAGING_PREFIX}{dead.pid}-x").mkdir()
    (tmp_path / f"{STAGING_PREFIX}{dead.pid}-x" / "model.onnx").write_bytes(b"half written")
    result = export_onnx.export(Affine(), _inputs(), output=tmp_path)
    assert result.report["status"] == "ok"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export_report.json", "model.onnx"]


def test_cli_failure_beside_an_earlier_export_says_where_it_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "model.onnx").write_bytes(b"the earlier artifact")
    (out / "export_report.json").write_text(json.dumps({"status": "ok", "files": ["model.onnx"]}))
    before = _snapshot(out)
    rc = main([str(tmp_path / "no-such-model"), "-o", str(out), "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and len(err) == 1, err
    assert err[0].startswith("export-onnx: error: [load] model directory")
    assert err[0].endswith(f"(the earlier export in {out} is kept; this failure is recorded in "
                           f"{out / FAILED_REPORT_NAME})")
    after = _snapshot(out)
    assert json.loads(after.pop(FAILED_REPORT_NAME))["stage"] == "load"
    assert after == before
