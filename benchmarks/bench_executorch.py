"""Export overhead and runtime latency of export-executorch on the embedded default (all-MiniLM-L6-v2).

Side by side in one run, each export in a fresh subprocess (so neither warms the other's caches),
alternating, ``--repeat`` times each:

* ``export-executorch``: ``export_executorch.export(backend="xnnpack")`` (all stages, bounds,
  delegation summary, runtime load; validation off, so both do the same work otherwise)
* ``bare``: ``torch.export.export(..., Dim.AUTO)`` -> ``to_edge_transform_and_lower(
  XnnpackPartitioner())`` -> ``to_executorch()`` -> write ``model.pte``

Prints the median export wall time of each and their ratio (target <= 1.05), the slowest stages of
export-executorch (from its report), the peak RSS of each process, the planned arena, and the
latency of eager PyTorch, ONNX Runtime (an ``export-onnx`` artifact of the same model) and the
ExecuTorch XNNPACK program on the same unseen batch, side by side in one process (target: the
ExecuTorch ratio over eager <= 0.45 and <= ONNX Runtime's).

Usage: ``uv run python benchmarks/bench_executorch.py [--repeat 3] [--iters 60]``
``[--pte PATH [--onnx PATH]]`` (``--pte``: only the latency, on existing artifacts of the default
model)
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
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _demo import load_demo  # noqa: E402
from _latency import onnx_runtime_call, side_by_side  # noqa: E402


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


def latency(pte: str, onnx: str | None, iters: int) -> tuple[dict[str, float], tuple[int, ...]]:
    """Median latency (ms) of eager PyTorch, ONNX Runtime (when ``onnx`` is given) and the
    ExecuTorch XNNPACK program on the same batch of unseen sentences, side by side."""
    import torch

    from export_executorch import ExecutorchRunner

    model, sets = load_demo()
    batch = sets.validation[0]

    def eager() -> Any:
        def call() -> Any:
            with torch.inference_mode():
                return model(**batch)
        return call

    calls: dict[str, Any] = {"eager PyTorch": eager}
    if onnx:
        calls["ONNX Runtime"] = lambda: onnx_runtime_call(onnx, batch)
    runner_names = list(sets.export)
    calls["ExecuTorch XNNPACK"] = lambda: (lambda r: lambda: r(batch))(
        ExecutorchRunner(pte, runner_names))
    return side_by_side(calls, iters), tuple(batch["input_ids"].shape)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--iters", type=int, default=60)
    ap.add_argument("--child", choices=["export-executorch", "bare"])
    ap.add_argument("--out")
    ap.add_argument("--pte", help="only measure latency, on this model.pte of the default model")
    ap.add_argument("--onnx", help="with --pte: also ONNX Runtime on this model.onnx of it")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.out)
        return
    if args.pte:
        ms, shape = latency(args.pte, args.onnx, args.iters)
        print_latency(ms, shape, args.iters)
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
        onnx_dir = os.path.join(tmp, "onnx")
        os.makedirs(onnx_dir)
        subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "bench_onnx.py"),
                        "--child", "export-onnx", "--out", onnx_dir],
                       capture_output=True, text=True, check=True)
        ms, shape = latency(os.path.join(tmp, "export-executorch-0", "model.pte"),
                            os.path.join(onnx_dir, "model.onnx"), args.iters)
    print(f"export wall time (median of {args.repeat}, fresh process each)")
    print(f"  export-executorch              {ours:7.2f} s")
    print(f"  bare torch.export + XNNPACK    {bare:7.2f} s")
    print(f"  ratio                          {ours / bare:7.3f}   (target <= 1.05)")
    print("slowest export-executorch stages (median s): "
          + ", ".join(f"{name} {sec:.2f}" for sec, name in top))
    print("peak RSS")
    print(f"  export-executorch              {rss_ours:7.0f} MB")
    print(f"  bare                           {rss_bare:7.0f} MB")
    print(f"planned arena {first['arena_bytes'] / 2**20:.1f} MiB at bounds {first['bounds']}; "
          f"delegated {first['delegation']['delegated_nodes']}/"
          f"{first['delegation']['total_nodes']} nodes")
    print_latency(ms, shape, args.iters)


def print_latency(ms: dict[str, float], shape: tuple[int, ...], iters: int) -> None:
    """Print each runtime's median latency and its ratio over eager PyTorch, with the targets:
    ExecuTorch XNNPACK at or below 0.45x eager and at or below ONNX Runtime's ratio."""
    eager = ms["eager PyTorch"]
    print(f"latency on batch {shape} (median of {iters}, side by side in one process)")
    for name, value in ms.items():
        print(f"  {name:30s} {value:7.2f} ms   {value / eager:6.3f}x eager")
    et = ms["ExecuTorch XNNPACK"] / eager
    onnx = ms.get("ONNX Runtime")
    target = "target <= 0.45x" + (f" and <= ONNX Runtime's {onnx / eager:.3f}x" if onnx else "")
    met = et <= 0.45 and (onnx is None or et <= onnx / eager)
    print(f"  ExecuTorch XNNPACK ratio {et:.3f}x ({target}: {'met' if met else 'not met'})")


if __name__ == "__main__":
    main()
