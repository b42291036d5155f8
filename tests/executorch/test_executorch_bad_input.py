"""Bad input to ``export-executorch`` and ``export_executorch.export``: one clear line naming the
stage, a non-zero exit, no partial ``.pte``, every patch restored."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

import export_executorch
from export_core.errors import LoweringError, RuntimeLoadError
from export_core.registry import patches_for, resolve_target
from export_executorch.cli import main


def _originals() -> dict[str, object]:
    """The current value of every ExecuTorch patch target."""
    out = {}
    for rec in patches_for("executorch.xnnpack"):
        t = resolve_target(rec.target)
        out[rec.target] = t.stored()
    return out


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    rc = main([*argv, "-q"])
    err = capsys.readouterr().err
    return rc, [ln for ln in err.splitlines() if ln.strip()]


def _no_program(out: Path) -> None:
    """Neither the program nor a temporary part of it was left in ``out``."""
    left = [p.name for p in out.iterdir()] if out.exists() else []
    assert not [n for n in left if n.endswith((".pte", ".ptd"))], left


def test_missing_model_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    rc, lines = _run([str(tmp_path / "nope"), "-o", str(out)], capsys)
    assert rc == 1
    assert len(lines) == 1 and lines[0].startswith("export-executorch: error: [load]")
    assert "does not exist" in lines[0]
    report = json.loads((out / "export_report.json").read_text())
    assert report["status"] == "failed" and report["stage"] == "load"
    _no_program(out)


@pytest.mark.parametrize("damage", ["config", "weights"])
def test_corrupt_model_dir(
    damage: str, tiny_model_dir: Callable[[str], Path], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    for f in tiny_model_dir("bert").iterdir():
        (broken / f.name).write_bytes(f.read_bytes())
    target = broken / ("config.json" if damage == "config" else "model.safetensors")
    target.write_bytes(b"\x00not what you expect{")
    out = tmp_path / "out"
    rc, lines = _run([str(broken), "-o", str(out)], capsys)
    assert rc == 1
    assert len(lines) == 1 and lines[0].startswith("export-executorch: error: [load]")
    _no_program(out)


def test_unknown_backend_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--backend", "tpu"])
    assert info.value.code == 2
    assert "invalid choice: 'tpu'" in capsys.readouterr().err


def test_unwritable_output(
    tiny_model_dir: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    rc, lines = _run([str(tiny_model_dir("bert")), "-o", str(blocker / "out")], capsys)
    assert rc == 1
    assert len(lines) == 1 and "is not writable" in lines[0]
    assert lines[0].startswith("export-executorch: error: [")


def test_cuda_without_a_device(
    tiny_model_dir: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "out"
    rc, lines = _run([str(tiny_model_dir("bert")), "-o", str(out), "--backend", "cuda"], capsys)
    assert rc == 1
    assert lines == [
        "export-executorch: error: [prepare] the cuda backend needs a CUDA GPU and none is "
        "visible to torch (torch.cuda.is_available() is False); use --backend xnnpack or "
        "portable on this machine"
    ]
    assert json.loads((out / "export_report.json").read_text())["stage"] == "prepare"
    _no_program(out)


def test_lowering_failure_through_the_cli(
    tiny_model_dir: Callable[[str], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import executorch.exir

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("partitioner exploded\nsecond line of detail")

    monkeypatch.setattr(executorch.exir, "to_edge_transform_and_lower", broken)
    before = _originals()
    out = tmp_path / "out"
    rc, lines = _run([str(tiny_model_dir("bert")), "-o", str(out)], capsys)
    assert rc == 1
    assert lines == [
        "export-executorch: error: [lower] to_edge_transform_and_lower failed for xnnpack: "
        "RuntimeError: partitioner exploded"
    ]
    report = json.loads((out / "export_report.json").read_text())
    assert report["status"] == "failed" and report["stage"] == "lower"
    assert report["patches"]["installed"]
    assert _originals() == before
    _no_program(out)
    assert sorted(p.name for p in out.iterdir()) == ["export_report.json"]


@pytest.fixture(scope="module")
def custom_ops() -> tuple[object, object]:
    """``etbad::unlowerable`` (no out variant: ``to_executorch`` fails) and ``etbad::unloadable``
    (an out variant in Python only: the runtime has no kernel for it)."""
    lib = torch.library.Library("etbad", "DEF")
    lib.define("unlowerable(Tensor x) -> Tensor")
    lib.impl("unlowerable", lambda x: x * 3, "CompositeExplicitAutograd")
    lib.define("unloadable(Tensor x) -> Tensor")
    lib.impl("unloadable", lambda x: x * 2, "CompositeExplicitAutograd")
    lib.define("unloadable.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")

    def unloadable_out(x: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
        return out.copy_(x * 2)

    lib.impl("unloadable.out", unloadable_out, "CompositeExplicitAutograd")
    yield torch.ops.etbad.unlowerable.default, torch.ops.etbad.unloadable.default
    lib._destroy()


class _Calls(torch.nn.Module):
    def __init__(self, op: object) -> None:
        super().__init__()
        self.op = op

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.op(x) + 1


def test_op_without_out_variant_fails_to_lower(custom_ops, tmp_path: Path) -> None:
    before = _originals()
    with pytest.raises(LoweringError) as info:
        export_executorch.export(_Calls(custom_ops[0]), (torch.randn(2, 3),), output=tmp_path)
    assert str(info.value) == (
        "[to_executorch] to_executorch failed: RuntimeError: Missing out variants: {'etbad::unlowerable'}"
    )
    assert json.loads((tmp_path / "export_report.json").read_text())["stage"] == "to_executorch"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export_report.json"]
    assert _originals() == before


def test_program_that_cannot_load_is_a_failed_export(custom_ops, tmp_path: Path) -> None:
    with pytest.raises(RuntimeLoadError) as info:
        export_executorch.export(_Calls(custom_ops[1]), (torch.randn(2, 3),), output=tmp_path,
                                 backend="portable")
    assert str(info.value).startswith("[runtime] ExecuTorch cannot load method forward")
    assert str(info.value).endswith("(Missing operator: [0] etbad::unloadable.out)")
    report = json.loads((tmp_path / "export_report.json").read_text())
    assert report["status"] == "failed" and report["stage"] == "runtime"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export_report.json"]


def test_cli_exit_code_in_a_fresh_process(tmp_path: Path) -> None:
    """The installed entry point, end to end: a missing model directory exits 1 with one line."""
    proc = subprocess.run(
        [sys.executable, "-m", "export_executorch.cli", str(tmp_path / "missing"), "-o",
         str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines[-1].startswith("export-executorch: error: [load] model directory")
    assert proc.stdout == ""


@pytest.mark.parametrize("message, reason", [
    ("Failed to load method forward, error: 0x:21", "MemoryAllocationFailed: the runtime could not"),
    ("Failed to load method forward, error: 0x14", "OperatorMissing: a kernel the program calls"),
    ("Failed to load method forward, error: 0x:11", "NotImplemented"),
    ("Failed to load method forward", "missing kernel or unsupported op?"),
])
def test_a_load_failure_names_its_error_code(message: str, reason: str) -> None:
    """The runtime's ``load_method`` error code is named (0x21 was reported as a missing kernel;
    it is a failed memory allocation: granitemoehybrid on portable kernels)."""
    from export_executorch.runner import load_error_reason

    assert load_error_reason(message).startswith(reason)
