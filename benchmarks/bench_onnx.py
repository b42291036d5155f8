"""Export overhead and runtime latency of export-onnx on the embedded default (all-MiniLM-L6-v2).

Side by side in one run, each export in a fresh subprocess (so neither warms the other's caches),
alternating, ``--repeat`` times each:

* ``export-onnx``: ``export_onnx.export`` (all stages; validation off, so both do the same work)
* ``bare``: ``torch.onnx.export(model, kwargs=..., dynamo=True, dynamic_shapes=Dim.AUTO...)``

Prints the median export wall time of each and their ratio (target <= 1.05), the peak RSS of
each process, and ONNX Runtime latency of the artifact over eager PyTorch on the same batch
(target <= 0.7).

Usage: ``uv run python benchmarks/bench_onnx.py [--repeat 3]``
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
    import resource
    import warnings

    warnings.filterwarnings("ignore")
    import logging

    logging.disable(logging.WARNING)
    import torch

    model, sets = load_demo()
    inputs = sets.export
    t = time.perf_counter()
    if mode == "export-onnx":
        import export_onnx

        export_onnx.export(model, inputs, output=out, validate=False)
    else:
        dyn = {k: {i: torch.export.Dim.AUTO for i in range(v.dim())} for k, v in inputs.items()}
        prog = torch.onnx.export(model, (), kwargs=inputs, dynamo=True, dynamic_shapes=dyn,
                                 verbose=False, optimize=True)
        prog.save(os.path.join(out, "model.onnx"))
    seconds = time.perf_counter() - t
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"mode": mode, "seconds": seconds, "peak_rss_mb": rss_mb}))


def latency(path: str, iters: int) -> tuple[float, float, tuple[int, ...]]:
    """Median ORT and eager latency (ms) on the same batch of unseen sentences, side by side."""
    import torch

    model, sets = load_demo()
    batch = sets.validation[0]

    def eager() -> Any:
        def call() -> Any:
            with torch.inference_mode():
                return model(**batch)
        return call

    ms = side_by_side({"eager": eager, "onnx": lambda: onnx_runtime_call(path, batch)}, iters)
    return ms["onnx"], ms["eager"], tuple(batch["input_ids"].shape)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--child", choices=["export-onnx", "bare"])
    ap.add_argument("--out")
    args = ap.parse_args()
    if args.child:
        child(args.child, args.out)
        return
    results: dict[str, list[dict]] = {"export-onnx": [], "bare": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeat):
            for mode in ("bare", "export-onnx") if i % 2 else ("export-onnx", "bare"):
                out = os.path.join(tmp, f"{mode}-{i}")
                os.makedirs(out)
                proc = subprocess.run([sys.executable, __file__, "--child", mode, "--out", out],
                                      capture_output=True, text=True, check=True)
                row = json.loads(proc.stdout.strip().splitlines()[-1])
                results[mode].append(row)
                print(f"  run {i} {mode:12s} {row['seconds']:6.2f} s  peak RSS {row['peak_rss_mb']:7.0f} MB",
                      file=sys.stderr)
        ours = statistics.median(r["seconds"] for r in results["export-onnx"])
        bare = statistics.median(r["seconds"] for r in results["bare"])
        rss_ours = max(r["peak_rss_mb"] for r in results["export-onnx"])
        rss_bare = max(r["peak_rss_mb"] for r in results["bare"])
        onnx_ms, eager_ms, shape = latency(os.path.join(tmp, "export-onnx-0", "model.onnx"), args.iters)
    print(f"export wall time (median of {args.repeat}, fresh process each)")
    print(f"  export-onnx            {ours:7.2f} s")
    print(f"  bare torch.onnx.export {bare:7.2f} s")
    print(f"  ratio                  {ours / bare:7.3f}   (target <= 1.05)")
    print("peak RSS")
    print(f"  export-onnx            {rss_ours:7.0f} MB")
    print(f"  bare torch.onnx.export {rss_bare:7.0f} MB")
    print(f"latency on batch {shape} (median of {args.iters})")
    print(f"  ONNX Runtime           {onnx_ms:7.2f} ms")
    print(f"  eager PyTorch          {eager_ms:7.2f} ms")
    print(f"  ratio                  {onnx_ms / eager_ms:7.3f}   (target <= 0.7)")


if __name__ == "__main__":
    main()
