"""One job per model type: shared build and capture, progress file, crash and timeout handling."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from export_sweep.sweep.backends import (  # noqa: E402
    ALL_BACKENDS,
    BACKEND_TABLE,
    BACKENDS,
    Backend,
    get_backend,
)
from export_sweep.sweep.checkpoint import JobProgress  # noqa: E402
from export_sweep.sweep.executors import Limits, LocalExecutor  # noqa: E402
from export_sweep.sweep.run import TypeJob, _outcome, plan_jobs, run_sweep  # noqa: E402
from export_sweep.zoo.isolate import JobResult  # noqa: E402

HERE = Path(__file__).resolve().parent
BOTH = ("onnx", "executorch")


# ── The backend table ──────────────────────────────────────────────────────────────────────────
def test_backend_table_is_typed_data() -> None:
    assert BACKENDS == BOTH
    onnx = get_backend("onnx")
    assert (onnx.module, onnx.distribution, onnx.label) == ("export_onnx", "export-onnx", "ONNX")
    assert get_backend("executorch").module == "export_executorch"
    assert all(isinstance(b, Backend) for b in BACKEND_TABLE)
    with pytest.raises(KeyError, match="unknown backend"):
        get_backend("tensorrt")


def test_backend_options_come_from_the_table() -> None:
    from export_sweep.sweep.skips import SkipEntry

    entry = SkipEntry("x", "Cls", "onnx", "synthetic entry for this test", "https://bug")
    assert get_backend("onnx").options("Cls", [entry]) == {"optimize": False}
    assert get_backend("onnx").options("Other", [entry]) == {}
    assert get_backend("executorch").options("Cls", [entry]) == {}
    assert get_backend("executorch-portable").options("Cls", [entry]) == {"backend": "portable"}


def test_portable_is_swept_only_when_named() -> None:
    portable = get_backend("executorch-portable")
    assert (portable.module, portable.label) == ("export_executorch", "ExecuTorch portable")
    assert ALL_BACKENDS == (*BOTH, "executorch-portable")
    assert not portable.default and "executorch-portable" not in BACKENDS


def test_capture_keyword_is_detected_by_signature() -> None:
    def with_capture(model, inputs, *, capture=None):  # noqa: ANN001, ANN202
        return None

    def without(model, inputs, **options):  # noqa: ANN001, ANN202, ANN003
        return None

    assert Backend.accepts_capture(with_capture) and not Backend.accepts_capture(without)


# ── Planning ───────────────────────────────────────────────────────────────────────────────────
def _rec(**backends: tuple[str, str | None]) -> dict:
    return {"backends": {b: {"status": s, "stage": st} for b, (s, st) in backends.items()}}


def test_one_job_per_type_with_the_backends_left() -> None:
    results = {
        "bert": _rec(onnx=("pass", None), executorch=("pass", None)),
        "vit": _rec(onnx=("pass", None)),
        "gpt2": _rec(onnx=("fail", "bounds"), executorch=("fail", "bounds")),
    }
    plan = plan_jobs(results, ["bert", "vit", "gpt2", "t5"], BOTH)
    assert plan == [TypeJob("vit", ("executorch",)), TypeJob("t5", BOTH)]
    redo = plan_jobs(results, ["bert", "vit", "gpt2"], BOTH, redo=("bounds",))
    assert redo == [TypeJob("vit", ("executorch",)), TypeJob("gpt2", BOTH)]
    only_onnx = plan_jobs(results, ["bert", "vit", "gpt2"], ("onnx",), redo=("pass",))
    assert only_onnx == [TypeJob("bert", ("onnx",)), TypeJob("vit", ("onnx",))]


def test_a_type_job_gets_the_timeout_per_backend() -> None:
    job = TypeJob("bert", BOTH).job(180.0)
    assert job.timeout_s == 360.0 and job.progress_kwarg == "progress_path"
    assert TypeJob.from_key(job.key) == TypeJob("bert", BOTH)
    assert TypeJob("bert", ("onnx",)).job(180.0).timeout_s == 180.0


# ── Outcomes of finished and failed jobs ───────────────────────────────────────────────────────
PASS = {"status": "pass", "stage": None, "error": None, "seconds": 3.0}


def test_a_crash_keeps_finished_backends_and_records_the_running_one() -> None:
    progress = JobProgress("export", "executorch", 5.0, {"onnx": PASS}, {"class_name": "M"})
    res = JobResult("fail", error="WorkerCrash: worker died (signal 11): ", seconds=12.0,
                    progress=progress.to_json())
    out = _outcome(TypeJob("m", BOTH), res, 180.0)
    assert out.records["onnx"] == PASS and out.rerun == ()
    assert out.records["executorch"]["status"] == "fail"
    assert out.records["executorch"]["stage"] == "worker"
    assert out.records["executorch"]["seconds"] == 7.0
    assert out.model == {"class_name": "M"}


def test_a_timeout_reruns_only_the_backends_that_never_started() -> None:
    progress = JobProgress("export", "onnx", 1.0, {}, {})
    res = JobResult("timeout", error="Timeout: no result after 360 s", seconds=360.0,
                    progress=progress.to_json())
    out = _outcome(TypeJob("m", BOTH), res, 180.0)
    assert out.records == {
        "onnx": {"status": "fail", "stage": "timeout", "error": "Timeout: no result after 360 s",
                 "seconds": 359.0}
    }
    assert out.rerun == ("executorch",)


def test_a_timeout_names_the_export_stage_it_hung_in() -> None:
    progress = JobProgress("export", "executorch", 1.0, {"onnx": PASS}, {}, stage="lower")
    res = JobResult("timeout", error="Timeout: no result after 360 s", seconds=360.0,
                    progress=progress.to_json())
    record = _outcome(TypeJob("m", BOTH), res, 180.0).records["executorch"]
    assert record["stage"] == "timeout" and record["in_stage"] == "lower"
    assert record["error"] == "Timeout: no result after 360 s (in export stage lower)"
    # A progress file written before the stage field existed reads as no stage.
    old = {k: v for k, v in progress.to_json().items() if k != "stage"}
    record = _outcome(TypeJob("m", BOTH), replace(res, progress=old), 180.0).records["executorch"]
    assert "in_stage" not in record and record["error"] == "Timeout: no result after 360 s"


def test_a_backend_cut_short_by_an_earlier_overrun_runs_again() -> None:
    slow = {**PASS, "seconds": 300.0}
    progress = JobProgress("export", "executorch", 301.0, {"onnx": slow}, {})
    res = JobResult("timeout", error="Timeout", seconds=360.0, progress=progress.to_json())
    out = _outcome(TypeJob("m", BOTH), res, 180.0)
    assert out.records["onnx"]["stage"] == "timeout"  # over its own limit, as if alone
    assert out.records["onnx"]["error"] == "Timeout: no result after 180 s"
    assert out.rerun == ("executorch",)


def test_a_job_of_one_backend_is_never_run_again() -> None:
    progress = JobProgress("export", "onnx", 150.0, {}, {})  # the build took most of the time
    res = JobResult("timeout", error="Timeout: no result after 180 s", seconds=180.0,
                    progress=progress.to_json())
    out = _outcome(TypeJob("m", ("onnx",)), res, 180.0)
    assert out.records["onnx"]["stage"] == "timeout" and out.rerun == ()


def test_a_death_while_building_fails_every_backend_alike() -> None:
    res = JobResult("oom", error="MemoryError: ", seconds=4.0,
                    progress=JobProgress("build").to_json())
    out = _outcome(TypeJob("m", BOTH), res, 180.0)
    assert {b: (r["status"], r["stage"]) for b, r in out.records.items()} == {
        "onnx": ("fail", "oom"), "executorch": ("fail", "oom")}
    assert out.rerun == ()
    # No progress file at all (the worker died before writing it) reads the same.
    assert _outcome(TypeJob("m", BOTH), replace(res, progress=None), 180.0).records == out.records


# ── Real workers with injected faults ──────────────────────────────────────────────────────────
@pytest.fixture
def faults_on_path(monkeypatch: pytest.MonkeyPatch) -> str:
    """Puts ``sweep_faults`` on the workers' path; returns its job target."""
    paths = [str(HERE), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    return "sweep_faults:fault_job"


def _statuses(data: dict) -> dict[tuple[str, str], tuple[str, str | None]]:
    return {
        (t, b): (r["status"], r["stage"])
        for t, rec in data["results"].items()
        for b, r in rec["backends"].items()
    }


def test_shared_capture_crash_and_timeout_in_real_workers(tmp_path: Path, faults_on_path: str) -> None:
    out = tmp_path / "results.json"
    limits = Limits(memory_mb=2048, timeout_s=8.0, preload=("torch",))
    data = run_sweep(
        ["linear-ok", "linear-crash-second", "linear-hang-first"],
        out,
        backends=BOTH,
        timeout_s=8.0,
        progress=False,
        executor=LocalExecutor(2, limits),
        job_target=faults_on_path,
    )
    assert _statuses(data) == {
        ("linear-ok", "onnx"): ("pass", None),
        ("linear-ok", "executorch"): ("pass", None),
        ("linear-crash-second", "onnx"): ("pass", None),
        ("linear-crash-second", "executorch"): ("fail", "worker"),
        ("linear-hang-first", "onnx"): ("fail", "timeout"),
        ("linear-hang-first", "executorch"): ("pass", None),
    }
    ok = data["results"]["linear-ok"]
    assert ok["capture"]["status"] == "ok" and ok["capture"]["backends"] == list(BOTH)
    assert ok["capture"]["seconds"] > 0 and ok["build"]["status"] == "ok"
    assert ok["worker_seconds"] > 0
    crashed = data["results"]["linear-crash-second"]["backends"]["executorch"]
    assert crashed["error"].startswith("WorkerCrash: worker died (signal 11)")
    # The stage the export reported last (through the job's stage listener) is named.
    assert crashed["in_stage"] == "runtime" and crashed["error"].endswith("(in export stage runtime)")
    hung = data["results"]["linear-hang-first"]
    assert hung["backends"]["onnx"]["seconds"] >= 8.0 and "capture" not in hung
    assert hung["backends"]["onnx"]["error"] == (
        "Timeout: no result after 16 s (in export stage lower)")
    # The file on disk is what the call returned (written as results arrived).
    from export_sweep.results import load_results

    assert _statuses(load_results(out)) == _statuses(data)


def test_executorch_jobs_may_reserve_their_arena_beyond_the_cap() -> None:
    """An ExecuTorch program's arena (sized for the upper bounds) is one allocation at load:
    the backend's export runs with the cap raised by ``reserve_mb``, and the cap comes back."""
    import subprocess
    import sys

    from export_sweep.sweep.backends import get_backend

    assert get_backend("executorch").reserve_mb == get_backend("executorch-portable").reserve_mb
    assert get_backend("executorch").reserve_mb >= 8192 and get_backend("onnx").reserve_mb == 0
    code = (
        "import resource\n"
        "from export_sweep.zoo.isolate import extra_address_space\n"
        "cap = 1 << 36\n"
        "resource.setrlimit(resource.RLIMIT_AS, (cap, resource.RLIM_INFINITY))\n"
        "with extra_address_space(1024):\n"
        "    inside = resource.getrlimit(resource.RLIMIT_AS)[0]\n"
        "    bytearray(1 << 20)\n"
        "after = resource.getrlimit(resource.RLIMIT_AS)[0]\n"
        "print(inside - cap, after - cap)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(1024 * 1024 * 1024), "0"]
