"""The options say what they do: ``--help`` and usage errors answer without torch, ``--opset``
outside the supported range and hub ids are refused, ``--static`` exports validate at their own
shape, ``--no-validate`` reports ``skipped``, the validation report states its criterion, and
unactionable library warnings are hidden for an export only."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import onnxruntime as ort
import pytest
import torch

import export_onnx
from export_core import InputError, ValidationError
from export_core.cli import HUB_ID_MESSAGE
from export_core.validation import CRITERION
from export_core.warning_filters import UNACTIONABLE_LOGS, quiet_unactionable_warnings
from export_onnx.cli import main
from export_onnx.opsets import MAX_OPSET, MIN_OPSET

_NO_TORCH = r'''
import contextlib, io, json, sys
from export_onnx.cli import main as onnx_main
from export_executorch.cli import main as et_main
out = {}
for name, main, argv in [
    ("onnx-help", onnx_main, ["--help"]),
    ("onnx-opset", onnx_main, ["--opset", "99"]),
    ("et-help", et_main, ["--help"]),
    ("et-backend", et_main, ["--backend", "tpu"]),
    ("onnx-hub", onnx_main, ["bert-base-uncased", "-o", sys.argv[1] + "/a", "-q"]),
    ("et-hub", et_main, ["some-org/some-model", "-o", sys.argv[1] + "/b", "-q"]),
    ("onnx-missing", onnx_main, [sys.argv[1] + "/missing", "-o", sys.argv[1] + "/c", "-q"]),
]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
    out[name] = {"code": code, "err": err.getvalue().strip().splitlines()}
out["torch_imported"] = "torch" in sys.modules
print(json.dumps(out))
'''


def test_help_usage_errors_and_refused_models_import_no_torch(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", _NO_TORCH, str(tmp_path)],
                          capture_output=True, text=True, timeout=120, check=True)
    out = json.loads(proc.stdout)
    assert out.pop("torch_imported") is False
    assert out["onnx-help"]["code"] == 0 and out["et-help"]["code"] == 0
    assert out["onnx-opset"]["code"] == 2
    assert out["onnx-opset"]["err"][-1] == (
        f"export-onnx: error: argument --opset: opset 99 is not supported; choose one from "
        f"{MIN_OPSET} to {MAX_OPSET}")
    assert out["et-backend"]["code"] == 2 and "invalid choice: 'tpu'" in out["et-backend"]["err"][-1]
    for name, prog in (("onnx-hub", "export-onnx"), ("et-hub", "export-executorch")):
        assert out[name]["code"] == 1 and len(out[name]["err"]) == 1, out[name]
        assert out[name]["err"][0].startswith(f"{prog}: error: [load] MODEL ")
        assert out[name]["err"][0].endswith(HUB_ID_MESSAGE)
    assert out["onnx-missing"]["code"] == 1
    assert "does not exist" in out["onnx-missing"]["err"][0]


def test_supported_opsets_are_what_torch_onnx_exports() -> None:
    from torch.onnx import _constants
    from torch.onnx._internal.exporter import _constants as exporter_constants

    assert MIN_OPSET == exporter_constants.TORCHLIB_OPSET
    assert MAX_OPSET == _constants.ONNX_MAX_OPSET
    with pytest.raises(InputError, match=f"choose one from {MIN_OPSET} to {MAX_OPSET}"):
        export_onnx.OnnxConfig(opset=MAX_OPSET + 1)


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], dict]:
    rc = main(argv)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    out = Path(argv[argv.index("-o") + 1])
    return rc, err, json.loads((out / "export_report.json").read_text())


def test_static_export_is_validated_at_its_own_shape_on_two_value_sets(
    tiny_model_dir: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    model_dir = tiny_model_dir("bert")
    capsys.readouterr()
    rc, err, report = _cli([str(model_dir), "-o", str(tmp_path), "--static"], capsys)
    assert rc == 0, err
    v = report["validation"]
    assert v["status"] == "passed" and v["static"] is True and "static export" in v["note"]
    assert len(v["checks"]) == 2 and v["checks"][0]["shapes"] == v["checks"][1]["shapes"]
    assert "bounds" not in report
    assert any("static input shapes on 2 sets of input values" in ln for ln in err), err
    session = ort.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    shapes = [i.shape for i in session.get_inputs()]
    assert all(isinstance(d, int) for shape in shapes for d in shape), shapes


def test_no_validate_reports_skipped_and_says_so(
    tiny_model_dir: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    model_dir = tiny_model_dir("bert")
    capsys.readouterr()
    rc, err, report = _cli([str(model_dir), "-o", str(tmp_path), "--no-validate", "-q"], capsys)
    assert rc == 0
    assert report["status"] == "ok"
    assert report["validation"]["status"] == "skipped" and report["validation"]["passed"] is None
    assert report["validation"]["checks"] == []
    assert err == ["export-onnx: validation skipped (--no-validate): the artifact was not compared "
                   "with eager PyTorch"]


class Affine(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        warnings.warn("a warning the model itself raises", UserWarning, stacklevel=1)
        return self.linear(x)


class Noisy(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1e-2 * torch.rand_like(x)


def test_validation_states_its_criterion_and_the_worst_margin() -> None:
    report = export_onnx.export(Affine(), (torch.randn(3, 8),)).report
    v = report["validation"]
    assert v["criterion"] == CRITERION == (
        "|a - b| <= atol + rtol * |b| for every element (a: artifact, b: eager)")
    for check in v["checks"]:
        worst = check["worst"]
        assert worst["allowed"] == pytest.approx(v["atol"] + v["rtol"] * abs(worst["eager"]))
        assert worst["abs_diff"] == pytest.approx(abs(worst["artifact"] - worst["eager"]))
        assert worst["margin"] == pytest.approx(worst["allowed"] - worst["abs_diff"])
        assert worst["margin"] >= 0 and worst["output"] == report["outputs"][0]
    with pytest.raises(ValidationError, match=r"worst element \[\d+, \d+\]: \|a-b\|=.* > atol \+ rtol\*\|b\|"):
        export_onnx.export(Noisy(), (torch.randn(3, 8),))


def test_unactionable_warnings_are_hidden_for_the_export_only() -> None:
    filters_before = list(warnings.filters)
    log_filters_before = {f.logger: list(logging.getLogger(f.logger).filters) for f in UNACTIONABLE_LOGS}
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with quiet_unactionable_warnings():
            warnings.warn("`isinstance(treespec, LeafSpec)` is deprecated, use ...", FutureWarning,
                          stacklevel=1)
        export_onnx.export(Affine(), (torch.randn(3, 8),))
        warnings.warn("`isinstance(treespec, LeafSpec)` after the export", FutureWarning, stacklevel=1)
    messages = [str(w.message) for w in seen]
    assert not any("LeafSpec" in m and "after the export" not in m for m in messages), messages
    assert "a warning the model itself raises" in messages  # nothing is filtered wholesale
    assert any("after the export" in m for m in messages)  # and nothing after
    assert list(warnings.filters) == filters_before
    assert {f.logger: list(logging.getLogger(f.logger).filters) for f in UNACTIONABLE_LOGS} == \
        log_filters_before
