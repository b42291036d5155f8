"""``export_executorch.export`` on a small ``nn.Module``: both CPU backends, bounds, report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import export_executorch
from export_core.errors import InputError, LoweringError, RuntimeLoadError
from export_executorch import ExecutorchRunner

CONTRACT_KEYS = {
    "status", "stage", "task", "inputs", "outputs", "stages", "patches", "fixes",
    "validation", "versions", "error",
}


class TinyEncoder(torch.nn.Module):
    """``tokens`` (batch, seq) int64 and ``features`` (batch, seq, 16) float32 -> two outputs:
    ``(batch, seq, 8)`` and ``(batch, 8)``."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.proj = torch.nn.Linear(16, 8)

    def forward(self, tokens: torch.Tensor, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.relu(self.proj(self.embed(tokens) + features))
        return h, h.mean(dim=1)


def _inputs(batch: int, seq: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "tokens": torch.randint(0, 50, (batch, seq), generator=g),
        "features": torch.randn(batch, seq, 16, generator=g),
    }


EXPORT = _inputs(2, 6, 0)
VALIDATION = [_inputs(3, 9, 1), _inputs(1, 1, 2)]  # batch 1, one token


@pytest.fixture(scope="module", params=["xnnpack", "portable"])
def exported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """One export per CPU backend, to disk, with a tight batch bound."""
    torch.manual_seed(0)
    model = TinyEncoder().eval()
    out = tmp_path_factory.mktemp(f"api-{request.param}")
    result = export_executorch.export(
        model, EXPORT, output=out, backend=request.param, max_batch=4, max_seq=32,
        validation_inputs=[*VALIDATION, _inputs(5, 3, 9)], task="feature-extraction",
    )
    return request.param, model, out, result


def test_writes_program_and_report(exported) -> None:
    backend, _, out, result = exported
    assert result.path == out / "model.pte"
    assert sorted(p.name for p in out.iterdir()) == ["export_report.json", "model.pte"]
    on_disk = json.loads((out / "export_report.json").read_text())
    assert on_disk["status"] == "ok" and on_disk["stage"] is None and on_disk["error"] is None
    assert CONTRACT_KEYS <= set(on_disk)
    assert {"backend", "dtype", "bounds", "delegation", "memory"} <= set(on_disk)
    assert on_disk["backend"] == backend and on_disk["dtype"] == "float32"
    assert on_disk["inputs"] == ["tokens", "features"]
    assert on_disk["versions"]["executorch"] and on_disk["versions"]["export-executorch"]
    names = [s["name"] for s in on_disk["stages"]]
    for stage in ("prepare", "capture", "torch_patches", "executorch_patches", "fx_program_fixes",
                  "fx_node_fixes", "lower",
                  "to_executorch", "save", "runtime", "validate"):
        assert stage in names


def test_validated_at_two_shapes_including_batch_one(exported) -> None:
    _, _, _, result = exported
    checks = result.report["validation"]["checks"]
    assert result.report["validation"]["passed"]
    shapes = [c["shapes"]["tokens"] for c in checks]
    assert shapes == [[2, 6], [3, 9], [1, 1]]
    assert result.report["validation_sets_skipped"] == 1  # batch 5 > max_batch 4


def test_bounds_in_report(exported) -> None:
    _, _, _, result = exported
    bounds = result.report["bounds"]
    assert bounds["max_batch"] == 4 and bounds["max_seq"] == 32
    assert bounds["sources"]["max_batch"] == "option"
    dims = {(d["input"], d["axis"]): d for d in bounds["dims"]}
    assert set(dims) == {("tokens", 0), ("tokens", 1), ("features", 0), ("features", 1)}
    assert all(d["min"] == 1 for d in dims.values())
    assert dims["tokens", 0]["role"] == "batch" and dims["tokens", 0]["max"] == 4
    assert dims["features", 1]["role"] == "sequence" and dims["features", 1]["max"] == 32
    memory = result.report["memory"]
    assert memory["arena_bytes"] > 0 and memory["arena_bytes"] == sum(memory["buffers"])
    assert memory["program_bytes"] == (result.path.stat().st_size)


def test_delegation_summary(exported) -> None:
    backend, _, _, result = exported
    d = result.report["delegation"]
    assert set(d) >= {"delegated_nodes", "total_nodes", "portable_ops"}
    assert d["total_nodes"] == d["delegated_nodes"] + sum(d["portable_ops"].values())
    if backend == "xnnpack":
        assert d["delegated_nodes"] > 0 and d["delegated_subgraphs"] >= 1
    else:
        assert d["delegated_nodes"] == 0 and d["portable_ops"]


def test_program_runs_at_its_bounds_and_rejects_beyond(
    exported, capfd: pytest.CaptureFixture[str]
) -> None:
    _, model, out, _ = exported
    runner = ExecutorchRunner(out / "model.pte", ["tokens", "features"])
    for batch, seq in ((4, 32), (1, 1)):
        inputs = _inputs(batch, seq, 3)
        got = runner(inputs)
        with torch.no_grad():
            want = model(**inputs)
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-3)
    capfd.readouterr()
    with pytest.raises(RuntimeLoadError) as info:
        runner(_inputs(5, 4, 4))
    # refused before the runtime runs: the axis and both sizes named, nothing on stderr
    assert ("input tokens has shape (5, 4), beyond the program's bounds (4, 32) "
            "(axis 0: 5 > 4)") in str(info.value)
    assert capfd.readouterr().err == ""


def test_in_memory_export_with_tuple_inputs() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh()).eval()
    x = torch.randn(3, 4)
    result = export_executorch.export(model, (x,), validation_inputs=[(torch.randn(1, 4),)])
    assert result.path is None and result.report["status"] == "ok"
    assert isinstance(result.program.buffer, bytes)
    assert [d["role"] for d in result.report["bounds"]["dims"]] == ["batch"]


def test_unknown_backend_is_an_input_error() -> None:
    with pytest.raises(InputError, match="unknown ExecuTorch backend 'tpu'"):
        export_executorch.export(torch.nn.Linear(2, 2), (torch.randn(2, 2),), backend="tpu")


def test_bound_below_example_size_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"max_batch=3 is below the example size 4"):
        export_executorch.export(TinyEncoder().eval(), _inputs(4, 6, 0), output=tmp_path,
                                 max_batch=3)
    report = json.loads((tmp_path / "export_report.json").read_text())
    assert report["status"] == "failed" and report["stage"] == "fx_program_fixes"
    assert not (tmp_path / "model.pte").exists()


def test_cuda_without_a_device_fails_in_prepare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(LoweringError) as info:
        export_executorch.export(torch.nn.Linear(2, 2), (torch.randn(2, 2),), output=tmp_path,
                                 backend="cuda")
    assert str(info.value).startswith("[prepare] the cuda backend needs a CUDA GPU")
    report = json.loads((tmp_path / "export_report.json").read_text())
    assert report["stage"] == "prepare" and not (tmp_path / "model.pte").exists()


def test_too_small_cap_is_reported(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="max_batch must be at least 3 to keep the axis dynamic"):
        export_executorch.export(TinyEncoder().eval(), EXPORT, output=tmp_path, max_batch=2,
                                 validation_inputs=VALIDATION)
    report = json.loads((tmp_path / "export_report.json").read_text())
    assert report["status"] == "failed" and report["stage"] == "fx_program_fixes"


class _Waveform(torch.nn.Module):
    """``input_values`` (batch, samples) float32 -> (batch, frames, 4) with 80-sample frames;
    its ``config`` says 50 Hz, so the default cap (1 s) is 50 samples."""

    def __init__(self) -> None:
        super().__init__()
        self.config = type("Cfg", (), {"sampling_rate": 50})()
        self.conv = torch.nn.Conv1d(1, 4, kernel_size=80, stride=80)

    def forward(self, input_values: torch.Tensor) -> torch.Tensor:
        return self.conv(input_values.unsqueeze(1)).transpose(1, 2)


def test_waveform_default_cap_grows_to_the_example_and_drops_larger_sets() -> None:
    g = torch.Generator().manual_seed(0)
    wave = [torch.randn(b, n, generator=g) for b, n in ((2, 640), (1, 480), (3, 800))]
    result = export_executorch.export(
        _Waveform().eval(), {"input_values": wave[0]}, backend="portable",
        validation_inputs=[{"input_values": w} for w in wave[1:]],
    )
    bounds = result.report["bounds"]
    dims = {(d["input"], d["axis"]): (d["role"], d["max"]) for d in bounds["dims"]}
    assert dims == {("input_values", 0): ("batch", 8), ("input_values", 1): ("audio", 640)}
    assert bounds["sources"]["max_audio_samples"].startswith("example size of input_values[1]")
    shapes = [c["shapes"]["input_values"] for c in result.report["validation"]["checks"]]
    assert shapes == [[2, 640], [1, 480]]  # 800 samples > the 640 the program plans for
    assert result.report["validation_sets_skipped"] == 1
    with pytest.raises(InputError, match="max_audio_samples=600 is below the example size 640"):
        export_executorch.export(_Waveform().eval(), {"input_values": wave[0]},
                                 backend="portable", max_audio_samples=600)


def test_no_admissible_validation_set_falls_back_to_derived_shapes() -> None:
    """Every given set is longer than the 640 samples the program plans for: the export is
    validated at shapes derived from its bounds instead of at its example alone."""
    g = torch.Generator().manual_seed(0)
    example, longer = torch.randn(2, 640, generator=g), torch.randn(3, 800, generator=g)
    result = export_executorch.export(
        _Waveform().eval(), {"input_values": example}, backend="portable",
        validation_inputs=[{"input_values": longer}])
    report = result.report
    shapes = [c["shapes"]["input_values"] for c in report["validation"]["checks"]]
    assert report["validation"]["passed"] is True
    assert shapes[0] == [2, 640] and len(shapes) >= 2
    assert all(b <= 8 and n <= 640 for b, n in shapes[1:]) and [3, 800] not in shapes
    assert report["validation_sets_skipped"] == 1
    assert report["validation_sets_derived"] == len(shapes) - 1


def test_leaves_that_are_not_tensors_are_not_artifact_outputs() -> None:
    """A ``None`` inside the output tree (a ``ModelOutput`` tuple field a layer leaves unset)
    or a Python int (a spatial size) is an output of the ExecuTorch program but no eager leaf:
    validation compares the tensors (was: "artifact returned 4 outputs, eager 2"; PE-Audio,
    MaskFormer-Swin)."""

    class WithNone(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, tuple[None, torch.Tensor, int]]:
            return x * 2, (None, x.sum(-1), x.shape[1])

    result = export_executorch.export(WithNone().eval(), (torch.randn(2, 5),),
                                      validation_inputs=[(torch.randn(3, 7),)])
    validation = result.report["validation"]
    assert validation["passed"] is True and len(validation["checks"]) >= 2
