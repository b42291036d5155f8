"""The sweep on Ray: the same jobs as Ray tasks give the same records as the local pool.

A local Ray instance (2 CPUs, no dashboard) is started in this process and shut down after. Six
model types go through both executors, ONNX only: four real exports, one type whose worker
segfaults and one that hangs past its deadline (``sweep_faults``); per type and backend, status
and stage must be identical. The ``--ray ADDRESS`` command line connects to the same instance
from another process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import ray  # noqa: E402  (export-sweep[ray], in the dev group)

from export_sweep.cli import main  # noqa: E402
from export_sweep.sweep.executors import Limits, LocalExecutor, RayExecutor  # noqa: E402
from export_sweep.sweep.run import run_sweep  # noqa: E402

HERE = Path(__file__).resolve().parent
TYPES = ["bert", "vit", "resnet", "distilbert", "crash-me", "hang-me"]
TIMEOUT_S = 30.0
EXPECTED = {
    ("bert", "onnx"): ("pass", None),
    ("vit", "onnx"): ("pass", None),
    ("resnet", "onnx"): ("pass", None),
    ("distilbert", "onnx"): ("pass", None),
    ("crash-me", "onnx"): ("fail", "worker"),
    ("hang-me", "onnx"): ("fail", "timeout"),
}


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A local Ray instance whose workers can import ``sweep_faults``; yields its address."""
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), old]))
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            object_store_memory=100 * 1024**2,
            log_to_driver=False,
            _temp_dir=str(tmp_path_factory.mktemp("ray")),
        )
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old


def _statuses(data: dict) -> dict[tuple[str, str], tuple[str, str | None]]:
    return {
        (t, b): (r["status"], r["stage"])
        for t, rec in data["results"].items()
        for b, r in rec["backends"].items()
    }


def _sweep(out: Path, executor: object) -> dict:
    return run_sweep(
        TYPES,
        out,
        backends=("onnx",),
        timeout_s=TIMEOUT_S,
        progress=False,
        executor=executor,  # type: ignore[arg-type]
        job_target="sweep_faults:fault_job",
    )


@pytest.mark.slow  # about 100 s; the CLI test below runs on Ray in the default run
def test_ray_and_local_pool_record_the_same(ray_cluster: str, tmp_path: Path) -> None:
    limits = Limits(memory_mb=4096, timeout_s=TIMEOUT_S, preload=("torch", "transformers", "export_onnx"))
    on_ray = _sweep(tmp_path / "ray.json", RayExecutor(ray_cluster, limits))
    local = _sweep(tmp_path / "local.json", LocalExecutor(2, limits))
    assert _statuses(on_ray) == _statuses(local) == EXPECTED
    assert on_ray["workers"] == 2
    assert on_ray["results"]["crash-me"]["backends"]["onnx"]["error"].startswith(
        "WorkerCrash: worker died (signal 11)"
    )
    hung = on_ray["results"]["hang-me"]["backends"]["onnx"]
    assert hung["error"] == f"Timeout: no result after {TIMEOUT_S:.0f} s"
    # Resumable like the local run: everything recorded, nothing to run.
    again = _sweep(tmp_path / "ray.json", RayExecutor(ray_cluster, limits))
    assert again["results"] == on_ray["results"]


def test_cli_runs_the_sweep_on_a_ray_cluster(ray_cluster: str, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "export_sweep", "--families", "bert", "--backend", "onnx",
           "--out", str(out), "--quiet", "--ray", ray_cluster]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rec = json.loads(out.read_text())["results"]["bert"]
    assert rec["backends"]["onnx"]["status"] == "pass", rec


def test_ray_missing_is_one_clear_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    code = main(["--families", "bert", "--out", str(tmp_path / "r.json"), "--ray", "auto"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("export-sweep: --ray needs the ray package: pip install 'export-sweep[ray]'")
    assert len(err.splitlines()) == 1
