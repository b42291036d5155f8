"""Hostile and broken inputs through both CLIs and both Python APIs: one line naming the stage,
a non-zero exit (or an ``ExportError`` subclass), no artifact, and the process-global state
(patches, pytree registrations, flags, logger levels, warning filters) as it was."""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.export import Dim

import export_executorch
import export_onnx
from _state import assert_unchanged, global_state
from export_core import BudgetError, CaptureError, ExportError, InputError
from export_core.loading import PICKLE_REFUSED
from export_executorch.cli import main as et_main
from export_onnx.cli import main as onnx_main

CLIS = {"export-onnx": onnx_main, "export-executorch": et_main}
APIS = {"onnx": export_onnx.export, "executorch": export_executorch.export}
ARTIFACTS = ("model.onnx", "model.onnx.data", "model.pte")


def _no_artifact(out: Path) -> None:
    left = sorted(p.name for p in out.rglob("*")) if out.exists() else []
    assert not [n for n in left if n in ARTIFACTS or n.endswith((".pte", ".ptd", ".onnx"))], left


def _cli(prog: str, argv: list[str], capsys: pytest.CaptureFixture[str], out: Path,
         stage: str) -> str:
    """Run ``prog`` in-process; check the clean failure and return its one stderr line."""
    before = global_state()
    rc = CLIS[prog]([*argv, "-o", str(out), "-q"])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert rc == 1, lines
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{prog}: error: [{stage}] "), lines
    _no_artifact(out)
    report = json.loads((out / "export_report.json").read_text())
    assert (report["status"], report["stage"]) == ("failed", stage)
    assert_unchanged(before)
    return lines[0]


def _api(backend: str, model: torch.nn.Module, inputs: Any, out: Path, error: type[ExportError],
         stage: str, **options: Any) -> str:
    """Call ``export`` of ``backend``; check the clean failure and return the message."""
    before = global_state()
    with pytest.raises(error) as info:
        APIS[backend](model, inputs, output=out, **options)
    message = str(info.value)
    assert info.value.stage == stage and message.startswith(f"[{stage}] "), message
    assert "\n" not in message
    _no_artifact(out)
    if (out / "export_report.json").exists():
        report = json.loads((out / "export_report.json").read_text())
        assert (report["status"], report["stage"]) == ("failed", stage)
    assert_unchanged(before)
    return message


# ── model directories the loader refuses ──────────────────────────────────────────────────────


def _copy(tiny_model_dir: Callable[[str], Path], tmp_path: Path) -> Path:
    bad = tmp_path / "model"
    shutil.copytree(tiny_model_dir("bert"), bad)
    return bad


def _edit_config(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    config = json.loads((path / "config.json").read_text())
    change(config)
    (path / "config.json").write_text(json.dumps(config))


def _no_architectures(path: Path) -> None:
    _edit_config(path, lambda c: c.pop("architectures"))


def _mismatched(path: Path) -> None:
    _edit_config(path, lambda c: c.update(intermediate_size=c["intermediate_size"] * 2))


def _truncated(path: Path) -> None:
    data = (path / "model.safetensors").read_bytes()
    (path / "model.safetensors").write_bytes(data[: len(data) // 2])


def _missing_tensor(path: Path) -> None:
    from safetensors.torch import load_file, save_file

    weights = load_file(path / "model.safetensors")
    del weights[next(k for k in sorted(weights) if k.startswith("pooler."))]
    save_file(weights, path / "model.safetensors", metadata={"format": "pt"})


def _pickle_with_objects(path: Path) -> None:
    from safetensors.torch import load_file

    weights: dict[str, Any] = dict(load_file(path / "model.safetensors"))
    weights["payload"] = argparse.Namespace(run="anything")  # not a tensor: a pickle gadget
    torch.save(weights, path / "pytorch_model.bin")
    (path / "model.safetensors").unlink()


def _remote_code(path: Path) -> None:
    _edit_config(path, lambda c: c.update(auto_map={"AutoModel": "modeling_evil.EvilModel"}))
    (path / "modeling_evil.py").write_text("raise SystemExit('remote code ran')\n")


@pytest.mark.parametrize("prog", list(CLIS))
@pytest.mark.parametrize("damage, expected", [
    (_no_architectures, "names no architectures, so the model class and task cannot be "
                        "inferred; pass --task"),
    (_mismatched, "do not match its config.json: "),
    (_truncated, "cannot load AutoModel for task 'feature-extraction'"),
    (_missing_tensor, "lack 1 tensor(s) AutoModel needs (pooler."),
    (_pickle_with_objects, PICKLE_REFUSED),
    (_remote_code, "asks for custom code (auto_map: AutoModel); this tool never runs code"),
], ids=["no-architectures", "shape-mismatch", "truncated-safetensors", "missing-tensor",
        "pickle-objects", "remote-code"])
def test_model_directory_refused(prog: str, damage: Callable[[Path], None], expected: str,
                                 tiny_model_dir: Callable[[str], Path], tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    model = _copy(tiny_model_dir, tmp_path)
    damage(model)
    line = _cli(prog, [str(model)], capsys, tmp_path / "out", "load")
    assert expected in line
    assert "weights_only=False" not in line and "trust_remote_code=True" not in line


def test_safetensors_are_read_before_a_pickle(tiny_model_dir: Callable[[str], Path],
                                             tmp_path: Path) -> None:
    """Beside ``model.safetensors``, a hostile ``pytorch_model.bin`` is never unpickled."""
    from export_core.loading import load_model_dir

    model = _copy(tiny_model_dir, tmp_path)
    torch.save({"payload": argparse.Namespace(run="anything")}, model / "pytorch_model.bin")
    before = global_state()
    loaded = load_model_dir(model)
    assert loaded.model.config.architectures == ["BertModel"]
    assert_unchanged(before)


def test_no_architectures_with_a_task_exports(tiny_model_dir: Callable[[str], Path],
                                              tmp_path: Path) -> None:
    """The refusal names the way out, and that way works (ONNX only: the cheaper backend)."""
    model = _copy(tiny_model_dir, tmp_path)
    _no_architectures(model)
    assert onnx_main([str(model), "--task", "feature-extraction", "-o", str(tmp_path / "o"),
                      "-q"]) == 0
    assert (tmp_path / "o" / "model.onnx").is_file()


# ── models and inputs the exporters refuse ─────────────────────────────────────────────────────


class Lin(torch.nn.Module):
    """``x`` (batch, 4) float32 -> (batch, 3)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


class Raises(Lin):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise ValueError("this model refuses to run")


class NoTensor(Lin):
    def forward(self, x: torch.Tensor) -> dict[str, float]:
        return {"score": float(self.lin(x).sum())}


@pytest.mark.parametrize("backend", list(APIS))
@pytest.mark.parametrize("case", ["wrong-dtype", "wrong-rank", "forward-raises", "no-tensor",
                                  "dynamic-shapes-key", "dynamic-shapes-rank"])
def test_api_refuses(backend: str, case: str, tmp_path: Path) -> None:
    x = torch.randn(2, 4)
    model, inputs, options = Lin(), {"x": x}, {}
    error, stage, expected = CaptureError, "capture", "the model's eager forward fails on the " \
        "example inputs"
    if case == "wrong-dtype":
        inputs = {"x": torch.ones(2, 4, dtype=torch.long)}
        expected += " (x: int64 [2, 4]): RuntimeError"
    elif case == "wrong-rank":
        inputs = {"x": torch.randn(2, 3, 5)}
        expected += " (x: float32 [2, 3, 5]): RuntimeError"
    elif case == "forward-raises":
        model, expected = Raises(), expected + " (x: float32 [2, 4]): ValueError: this model " \
            "refuses to run"
    elif case == "no-tensor":
        model, expected = NoTensor(), "the model returns no tensor (it returned dict)"
    elif case == "dynamic-shapes-key":
        options = {"dynamic_shapes": {"y": {0: Dim("batch")}}}
        error, stage, expected = InputError, "dynamic_shapes", "dynamic_shapes names 'y', " \
            "which the inputs do not have (inputs: x)"
    else:
        options = {"dynamic_shapes": {"x": [Dim("batch")]}}
        error, stage, expected = InputError, "dynamic_shapes", "dynamic_shapes['x'] has 1 " \
            "entries, but x has 2 axes (shape [2, 4])"
    message = _api(backend, model, inputs, tmp_path, error, stage, **options)
    assert expected in message


@pytest.mark.parametrize("backend, options, expected", [
    ("onnx", {"dynamic": False, "dynamic_shapes": {"x": {0: Dim("b")}}},
     "dynamic=False contradicts dynamic_shapes"),
    ("executorch", {"dynamic": False, "dynamic_shapes": {"x": {0: Dim("b")}}},
     "dynamic=False contradicts dynamic_shapes"),
    ("executorch", {"dynamic": False, "max_batch": 4},
     "max_batch=4 contradicts a static export"),
    ("onnx", {"max_artifact_bytes": 0}, "max_artifact_bytes must be a positive number of bytes"),
    ("executorch", {"max_arena_bytes": -1}, "max_arena_bytes must be a positive number of bytes"),
])
def test_api_contradictory_options(backend: str, options: dict[str, Any], expected: str,
                                   tmp_path: Path) -> None:
    message = _api(backend, Lin(), {"x": torch.randn(2, 4)}, tmp_path, InputError, "inputs",
                   **options)
    assert expected in message
    assert not tmp_path.exists() or not list(tmp_path.iterdir())  # refused before any stage


def test_cli_contradictory_options(tiny_model_dir: Callable[[str], Path], tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    line = _cli("export-executorch", [str(tiny_model_dir("bert")), "--static", "--max-seq", "16"],
                capsys, tmp_path / "out", "inputs")
    assert "max_seq=16 contradicts a static export" in line


@pytest.mark.parametrize("prog", list(CLIS))
@pytest.mark.parametrize("case", ["forward-raises", "no-tensor"])
def test_cli_model_that_fails_at_capture(prog: str, case: str,
                                         tiny_model_dir: Callable[[str], Path], tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import functools

    from transformers import BertModel

    model_dir = tiny_model_dir("bert")  # built (and its inputs checked) with the real forward

    @functools.wraps(BertModel.forward)  # the signature the input recipes read stays BERT's
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        if case == "no-tensor":
            return None
        raise ValueError("this model refuses to run")

    monkeypatch.setattr(BertModel, "forward", forward)
    # a forward that raises fails already while the CLI checks its example inputs
    stage = "inputs" if case == "forward-raises" else "capture"
    line = _cli(prog, [str(model_dir)], capsys, tmp_path / "out", stage)
    assert ("the model returns no tensor (it returned NoneType)" if case == "no-tensor"
            else "ValueError: this model refuses to run") in line


# ── size budgets ───────────────────────────────────────────────────────────────────────────────


@pytest.mark.parametrize("backend, stage", [("onnx", "translate"), ("executorch", "lower")])
def test_api_weights_over_budget(backend: str, stage: str, tmp_path: Path) -> None:
    message = _api(backend, Lin(), {"x": torch.randn(2, 4)}, tmp_path, BudgetError, stage,
                   max_artifact_bytes=32)
    assert "the model's weights (a lower bound of model." in message
    assert ": 60 B (60 bytes), above the budget max_artifact_bytes=32 (32 B)" in message


@pytest.mark.parametrize("prog, stage", [("export-onnx", "translate"),
                                         ("export-executorch", "lower")])
def test_cli_weights_over_budget(prog: str, stage: str, tiny_model_dir: Callable[[str], Path],
                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _cli(prog, [str(tiny_model_dir("bert")), "--max-artifact-mb", "0.01"], capsys,
                tmp_path / "out", stage)
    assert "above the budget max_artifact_bytes=10485 (10.2 KiB); raise it (--max-artifact-mb" in line


def test_api_arena_over_budget(tmp_path: Path) -> None:
    """Checked after memory planning, before the save: the numbers are the planned ones."""
    message = _api("executorch", Lin(), {"x": torch.randn(2, 4)}, tmp_path, BudgetError,
                   "to_executorch", max_arena_bytes=16, max_batch=8)
    assert message.startswith("[to_executorch] the planned activation arena (x[0] <= 8): ")
    assert "above the budget max_arena_bytes=16 (16 B)" in message
