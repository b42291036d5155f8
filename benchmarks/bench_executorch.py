"""Export overhead and runtime latency of export-executorch on the embedded default (all-MiniLM-L6-v2).

Side by side in one run, each export in a fresh subprocess (so neither warms the other's caches),
alternating, ``--repeat`` times each:

* ``export-executorch``: ``export_executorch.export(backend="xnnpack")`` (all stages, bounds,
  delegation summary, runtime load; validation off, so both do the same work otherwise)
* ``bare``: ``torch.export.export(..., Dim.AUTO)`` -> ``to_edge_transform_and_lower(
  XnnpackPartitioner())`` -> ``to_executorch()`` -> write ``model.pte``

Prints the median export wall time of each and their ratio (target <= 1.15), the slowest stages of
export-executorch (from its report), the peak RSS of each process, the planned arena, and the
latency of the ExecuTorch XNNPACK program over eager PyTorch on the same unseen batch
(target <= 1.0).

Usage: ``uv run python benchmarks/bench_executorch.py [--repeat 3] [--iters 50] [--pte PATH]``
(``--pte``: only the latency, on an existing program of the default model)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _demo import load_demo  # noqa: E402


def child(mode: str, out: str) -> None:
    """Run one export in this process and print a JSON line with its seconds and peak RSS."""
    import logging
    import resource
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    import torch

    model, sets = load_demo()
    inputs = sets.export
    stages: list[dict] = []
    extra: dict = {}
    t = time.perf_counter()
    if mode == "export-executorch":
        import export_executorch

        result = export_executorch.export(model, inputs, output=out, validate=False)
        stages = result.report["stages"]
        extra = {"arena_bytes": result.report["memory"]["arena_bytes"],
                 "bounds": {k: result.report["bounds"][k] for k in ("max_batch", "max_seq")},
                 "delegation": {k: result.report["delegation"][k]
                                for k in ("delegated_nodes", "total_nodes")}}
    else:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.exir import to_edge_transform_and_lower

        dyn = {k: {i: torch.export.Dim.AUTO for i in range(v.dim())} for k, v in inputs.items()}
        ep = torch.export.export(model, (), inputs, dynamic_shapes=dyn)
        manager = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()
        with open(os.path.join(out, "model.pte"), "wb") as f:
            manager.write_to_file(f)
    seconds = time.perf_counter() - t
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"mode": mode, "seconds": seconds, "peak_rss_mb": rss_mb, "stages": stages,
                      **extra}))


def latency(path: str, iters: int) -> tuple[float, float, tuple[int, ...]]:
    """Median ExecuTorch (XNNPACK) and eager latency (ms) on the same batch of unseen sentences."""
    import torch

    from export_executorch import ExecutorchRunner

    model, sets = load_demo()
    batch = sets.validation[0]

    def timed(fn) -> float:
        for _ in range(3):
            fn()
        samples = []
        for _ in range(iters):
            t = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - t) * 1e3)
        return statistics.median(samples)

    with torch.inference_mode():
        eager = timed(lambda: model(**batch))
    # loaded after the eager timing: XNNPACK's thread pool must not compete with eager PyTorch
    runner = ExecutorchRunner(path, list(sets.export))
    et = timed(lambda: runner(batch))
    return et, eager, tuple(batch["input_ids"].shape)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--child", choices=["export-executorch", "bare"])
    ap.add_argument("--out")
    ap.add_argument("--pte", help="only measure latency, on this model.pte of the default model")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.out)
        return
    if args.pte:
        et_ms, eager_ms, shape = latency(args.pte, args.iters)
        print(f"latency on batch {shape} (median of {args.iters}): ExecuTorch XNNPACK "
              f"{et_ms:.2f} ms, eager {eager_ms:.2f} ms, ratio {et_ms / eager_ms:.3f}")
        return
    results: dict[str, list[dict]] = {"export-executorch": [], "bare": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            for mode in ("bare", "export-executorch") if i % 2 else ("export-executorch", "bare"):
                out = os.path.join(tmp, f"{mode}-{i}")
                os.makedirs(out)
                proc = subprocess.run([sys.executable, __file__, "--child", mode, "--out", out],
                                      capture_output=True, text=True, check=True)
                row = json.loads(proc.stdout.strip().splitlines()[-1])
                results[mode].append(row)
                print(f"  run {i} {mode:18s} {row['seconds']:6.2f} s  peak RSS "
                      f"{row['peak_rss_mb']:7.0f} MB", file=sys.stderr)
        ours = statistics.median(r["seconds"] for r in results["export-executorch"])
        bare = statistics.median(r["seconds"] for r in results["bare"])
        rss_ours = max(r["peak_rss_mb"] for r in results["export-executorch"])
        rss_bare = max(r["peak_rss_mb"] for r in results["bare"])
        first = results["export-executorch"][0]
        stage_s: dict[str, list[float]] = {}
        for r in results["export-executorch"]:
            for s in r["stages"]:
                stage_s.setdefault(s["name"], []).append(s["seconds"])
        top = sorted(((statistics.median(v), k) for k, v in stage_s.items()), reverse=True)[:6]
        et_ms, eager_ms, shape = latency(
            os.path.join(tmp, "export-executorch-0", "model.pte"), args.iters)
    print(f"export wall time (median of {args.repeat}, fresh process each)")
    print(f"  export-executorch              {ours:7.2f} s")
    print(f"  bare torch.export + XNNPACK    {bare:7.2f} s")
    print(f"  ratio                          {ours / bare:7.3f}   (target <= 1.15)")
    print("slowest export-executorch stages (median s): "
          + ", ".join(f"{name} {sec:.2f}" for sec, name in top))
    print("peak RSS")
    print(f"  export-executorch              {rss_ours:7.0f} MB")
    print(f"  bare                           {rss_bare:7.0f} MB")
    print(f"planned arena {first['arena_bytes'] / 2**20:.1f} MiB at bounds {first['bounds']}; "
          f"delegated {first['delegation']['delegated_nodes']}/"
          f"{first['delegation']['total_nodes']} nodes")
    print(f"latency on batch {shape} (median of {args.iters})")
    print(f"  ExecuTorch XNNPACK             {et_ms:7.2f} ms")
    print(f"  eager PyTorch                  {eager_ms:7.2f} ms")
    print(f"  ratio                          {et_ms / eager_ms:7.3f}   (target <= 1.0)")


if __name__ == "__main__":
    main()
