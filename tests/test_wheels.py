"""Built wheels install into a fresh virtual environment and their CLI runs there.

``export-onnx`` must not pull ExecuTorch, and ``export-executorch`` must not pull ONNX or ONNX
Runtime. The environments are created with uv, which reuses its download cache.
"""

from __future__ import annotations

import json
import shutil
import subprocess
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
    for pkg in ("export-core", "export-onnx", "export-executorch"):
        _run([UV, "build", "--wheel", "--package", pkg, "--out-dir", str(dist)], cwd=ROOT)
    return dist


@pytest.mark.parametrize(
    "package, spec, command, forbidden",
    [
        ("export-onnx", "export-onnx[demo]", "export-onnx", ("executorch",)),
        ("export-executorch", "export-executorch[demo]", "export-executorch", ("onnx", "onnxruntime", "onnxscript")),
    ],
)
def test_wheel_installs_alone_and_cli_runs(wheels, tmp_path, package, spec, command, forbidden):
    assert len(list(wheels.glob(f"{package.replace('-', '_')}-0.1.0-*.whl"))) == 1
    venv = tmp_path / "venv"
    _run([UV, "venv", "--python", "3.11", str(venv)])
    py = venv / "bin" / "python"
    _run([UV, "pip", "install", "--python", str(py), "--find-links", str(wheels), spec])
    listed = json.loads(_run([UV, "pip", "list", "--python", str(py), "--format", "json"]).stdout)
    names = {row["name"].lower() for row in listed}
    assert {package, "export-core", "torch"} <= names
    for name in forbidden:
        assert name not in names, f"{spec} pulled {name}"
    out = tmp_path / "out"
    proc = subprocess.run([str(venv / "bin" / command), "-o", str(out)], capture_output=True,
                          text=True, timeout=1500, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((out / "export_report.json").read_text())
    assert report["status"] == "ok" and report["validation"]["passed"]
