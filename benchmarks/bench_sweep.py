"""Cost of the export sweep per model type: one job per (type, backend) vs one job per type.

Reads two results files of the same subset (``--before``: per-pair jobs, as the sweep ran while
it lived in export-core; ``--after``: one job per type) and prints, for
the types measured in both, the worker-seconds per model type (both backends together): median,
mean, and their ratio, plus the wall time of each run and the projected wall time of the full
sweep (``--full-types`` built types, default 534) on ``--workers`` cores (default 2).

Worker-seconds of a type:

- ``measured``: the ``worker_seconds`` the sweep records (wall time of the type's jobs in the
  worker); only one-job-per-type results have it.
- ``from records``: for per-pair results, each backend's job built the model and exported it:
  ``sum over backends of (build + export)``; for per-type results, ``build + capture + sum of
  exports``. Both exclude worker start-up and imports.

Compare runs measured under the same load: on a shared 2-core machine the export seconds of one
run can be twice another's.

``--run`` first runs the after sweep itself: ``export-sweep run --subset ci --backend all -j 2
--out AFTER`` (about 10 min on 2 cores). Without ``--before`` the committed
``coverage/sweep-results.json`` is the before (measured with a warm zoo cache: its build times
are loads).

``--ray-vs-local TYPE ...`` instead runs those types (both backends) once on a local Ray
instance (``--workers`` CPUs) and once in the local pool, and prints each run's wall time, the
worker-seconds per type and whether every status and stage agree.

Usage::

    uv run python benchmarks/bench_sweep.py --before before.json --after after.json
    uv run python benchmarks/bench_sweep.py --run --after after.json
    uv run python benchmarks/bench_sweep.py --ray-vs-local bert vit resnet distilbert
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("onnx", "executorch")


@dataclass(frozen=True)
class TypeCost:
    """Worker-seconds of one model type.

    Attributes:
        model_type: the type.
        from_records: build + capture + exports, counting the build once per job.
        measured: the recorded ``worker_seconds`` (``None`` for per-pair results).
        jobs: jobs the type took (2 per-pair, 1 per type).
    """

    model_type: str
    from_records: float
    measured: float | None
    jobs: int


def type_cost(model_type: str, rec: dict[str, Any]) -> TypeCost | None:
    """The cost of one type's record, ``None`` when a backend is missing."""
    backends = rec.get("backends", {})
    if not all(b in backends for b in BACKENDS):
        return None
    build = float((rec.get("build") or {}).get("seconds") or 0.0)
    exports = sum(float(backends[b].get("seconds") or 0.0) for b in BACKENDS)
    per_type = "worker_seconds" in rec
    if per_type:
        capture = float((rec.get("capture") or {}).get("seconds") or 0.0)
        return TypeCost(model_type, build + capture + exports, float(rec["worker_seconds"]), 1)
    return TypeCost(model_type, len(BACKENDS) * build + exports, None, len(BACKENDS))


def costs(data: dict[str, Any], types: list[str]) -> dict[str, TypeCost]:
    """Costs of ``types`` recorded with both backends."""
    out = {}
    for t in types:
        rec = data.get("results", {}).get(t)
        cost = type_cost(t, rec) if rec else None
        if cost is not None:
            out[t] = cost
    return out


def _stats(values: list[float]) -> tuple[float, float]:
    return (statistics.median(values), statistics.fmean(values)) if values else (0.0, 0.0)


def report(before: dict[str, Any], after: dict[str, Any], types: list[str], *,
           full_types: int, workers: int) -> str:
    """The comparison, as printable lines."""
    b, a = costs(before, types), costs(after, types)
    common = [t for t in types if t in b and t in a]
    lines = [f"model types measured in both: {len(common)} of {len(types)}", ""]
    lines.append(f"{'worker-seconds per type':34s} {'median':>8s} {'mean':>8s}")
    rows = {
        "before (per pair, from records)": [b[t].from_records for t in common],
        "after (per type, from records)": [a[t].from_records for t in common],
    }
    measured = [a[t].measured for t in common if a[t].measured is not None]
    if len(measured) == len(common):
        rows["after (per type, measured)"] = measured
    for label, values in rows.items():
        med, mean = _stats(values)
        lines.append(f"{label:34s} {med:8.1f} {mean:8.1f}")
    bmed, bmean = _stats(rows["before (per pair, from records)"])
    amed, amean = _stats(rows["after (per type, from records)"])
    if amed and amean:
        lines.append(f"{'ratio before / after':34s} {bmed / amed:8.2f} {bmean / amean:8.2f}")
    lines.append("")
    for label, data in (("before", before), ("after", after)):
        wall = data.get("wall_seconds_last_run")
        if wall:
            lines.append(f"wall time of the {label} run: {wall:.0f} s ({data.get('workers', '?')} workers)")
    lines.append(f"projected full sweep ({full_types} types, {workers} cores, perfect packing):")
    for label, mean in (("before", bmean), ("after", amean)):
        hours = full_types * mean / workers / 3600
        lines.append(f"  {label}: {full_types} x {mean:.1f} s / {workers} = {hours:.2f} h")
    return "\n".join(lines)


def ray_vs_local(types: list[str], workers: int) -> str:
    """Sweep ``types`` on a local Ray instance and in the local pool; compare."""
    import tempfile

    import ray

    from export_sweep.sweep.executors import LocalExecutor, RayExecutor
    from export_sweep.sweep.run import run_sweep

    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    ray.init(num_cpus=workers, include_dashboard=False, object_store_memory=100 * 1024**2,
             log_to_driver=False)
    try:
        runs = {
            "ray": run_sweep(types, tmp / "ray.json", progress=False, executor=RayExecutor()),
            "local": run_sweep(types, tmp / "local.json", progress=False,
                               executor=LocalExecutor(workers)),
        }
    finally:
        ray.shutdown()
    lines = [f"{'':12s} {'wall s':>8s} " + " ".join(f"{t[:12]:>12s}" for t in types)]
    for name, data in runs.items():
        per_type = " ".join(f"{data['results'][t].get('worker_seconds', 0):12.1f}" for t in types)
        lines.append(f"{name:12s} {data['wall_seconds_last_run']:8.1f} {per_type}")

    def statuses(data: dict[str, Any]) -> dict[tuple[str, str], tuple[str, Any]]:
        return {(t, b): (r["status"], r["stage"]) for t, rec in data["results"].items()
                for b, r in rec["backends"].items()}

    same = statuses(runs["ray"]) == statuses(runs["local"])
    lines.append(f"statuses and stages identical: {same}")
    lines.append(", ".join(f"{t}/{b}={s}" for (t, b), (s, _) in sorted(statuses(runs["ray"]).items())))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", default=str(ROOT / "coverage" / "sweep-results.json"))
    p.add_argument("--after", help="results of the one-job-per-type sweep")
    p.add_argument("--ray-vs-local", nargs="+", metavar="TYPE", help="compare Ray and the pool")
    p.add_argument("--subset", default="ci")
    p.add_argument("--run", action="store_true", help="run the after sweep first")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--full-types", type=int, default=534)
    args = p.parse_args(argv)
    if args.ray_vs_local:
        print(ray_vs_local(args.ray_vs_local, args.workers))
        return 0
    if not args.after:
        p.error("--after is required (or --ray-vs-local)")
    from export_sweep.sweep.subsets import SUBSETS

    types = list(SUBSETS[args.subset])
    if args.run:
        cmd = [sys.executable, "-m", "export_sweep", "run", "--subset", args.subset,
               "--backend", "all", "-j", str(args.workers), "--out", args.after, "--quiet"]
        subprocess.run(cmd, check=True)
    before = json.loads(Path(args.before).read_text())
    after = json.loads(Path(args.after).read_text())
    print(report(before, after, types, full_types=args.full_types, workers=args.workers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
