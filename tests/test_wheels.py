"""Built wheels install into a fresh virtual environment and their CLI runs there.

``export-onnx`` must not pull ExecuTorch, and ``export-executorch`` must not pull ONNX or ONNX
Runtime; neither pulls the QA package ``export-sweep`` or Ray. ``export-sweep[onnx]`` installs from
the wheels and sweeps a model type. The environments are created with uv, which reuses its
download cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UV = shutil.which("uv")


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, **kw)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    assert UV, "uv is needed to build and install the wheels"
    dist = tmp_path_factory.mktemp("dist")
    for pkg in ("export-core", "export-onnx", "export-executorch", "export-sweep"):
        _run([UV, "build", "--wheel", "--package", pkg, "--out-dir", str(dist)], cwd=ROOT)
    return dist


def _core_files(wheels: Path) -> list[str]:
    (core,) = wheels.glob("export_core-0.1.0-*.whl")
    with zipfile.ZipFile(core) as z:
        return z.namelist()


def _venv_with(wheels: Path, tmp_path: Path, spec: str) -> tuple[Path, set[str]]:
    venv = tmp_path / "venv"
    _run([UV, "venv", "--python", "3.11", str(venv)])
    py = venv / "bin" / "python"
    _run([UV, "pip", "install", "--python", str(py), "--find-links", str(wheels), spec])
    listed = json.loads(_run([UV, "pip", "list", "--python", str(py), "--format", "json"]).stdout)
    return venv, {row["name"].lower() for row in listed}


@pytest.mark.parametrize(
    "package, spec, command, forbidden",
    [
        ("export-onnx", "export-onnx[demo]", "export-onnx",
         ("executorch", "export-executorch", "export-sweep", "ray")),
        ("export-executorch", "export-executorch[demo]", "export-executorch",
         ("onnx", "onnxruntime", "onnxscript", "export-onnx", "export-sweep", "ray")),
    ],
)
def test_wheel_installs_alone_and_cli_runs(wheels, tmp_path, package, spec, command, forbidden):
    assert len(list(wheels.glob(f"{package.replace('-', '_')}-0.1.0-*.whl"))) == 1
    venv, names = _venv_with(wheels, tmp_path, spec)
    assert {package, "export-core", "torch"} <= names
    for name in forbidden:
        assert name not in names, f"{spec} pulled {name}"
    out = tmp_path / "out"
    proc = subprocess.run([str(venv / "bin" / command), "-o", str(out)], capture_output=True,
                          text=True, timeout=1500, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "export_report.json").read_text())
    assert report["status"] == "ok" and report["validation"]["passed"]


def test_sweep_wheel_with_the_onnx_extra_sweeps_a_model_type(wheels, tmp_path):
    assert len(list(wheels.glob("export_sweep-0.1.0-*.whl"))) == 1
    core = _core_files(wheels)
    assert not [f for f in core if f.startswith(("export_core/zoo/", "export_core/sweep/"))]
    assert not [f for f in core if f.endswith("entry_points.txt")], "export-core has no script"
    venv, names = _venv_with(wheels, tmp_path, "export-sweep[onnx]")
    assert {"export-sweep", "export-onnx", "export-core", "transformers", "torch"} <= names
    for name in ("executorch", "export-executorch", "ray"):
        assert name not in names, f"export-sweep[onnx] pulled {name}"
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [str(venv / "bin" / "export-sweep"), "--families", "bert", "--backend", "onnx",
         "--out", str(out), "--quiet"],
        capture_output=True, text=True, timeout=1500, cwd=tmp_path,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "EXPORT_SWEEP_ZOO_CACHE": str(tmp_path / "zoo")},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rec = json.loads(out.read_text())["results"]["bert"]
    assert rec["class_name"] == "BertModel" and rec["build"]["status"] == "ok"
    assert rec["backends"] == {"onnx": rec["backends"]["onnx"]}
    assert rec["backends"]["onnx"]["status"] == "pass", rec
