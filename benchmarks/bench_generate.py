"""Decode speed of the generate loop over exported graphs against eager ``generate()``.

Side by side in one run, on one random-weight Llama built from a config (``--size tiny``: 2
layers, hidden 32 — the model of the tests; ``--size large``: 16 layers, hidden 1024, vocab
32000, about 300 M parameters), batch 1, greedy, a 16-token prompt, ``--new-tokens`` new tokens:

* ``eager``: ``model.generate`` (dynamic cache), timed per token with a streamer
* ``onnx``: ``OnnxGenerator`` over a ``text-generation-with-past`` export in ONNX Runtime
* ``executorch``: ``ExecutorchGenerator`` over the XNNPACK export

Each runner is measured in a fresh subprocess (peak RSS is the process's own ``VmHWM``), ``--repeat`` times,
alternating; the script prints the median time to first token, decode tokens per second and
their ratio to eager (targets on the tiny model: ONNX Runtime >= 2.5x, ExecuTorch >= 3.5x), and
the cache's memory per token.

Usage: ``uv run python benchmarks/bench_generate.py [--size tiny|large] [--repeat 3] [--new-tokens 64]``
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

SIZES = {
    "tiny": dict(vocab_size=160, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256),
    "large": dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=16,
                  num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=256),
}


def build(size: str):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(**SIZES[size], pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return LlamaForCausalLM(cfg).eval()


def prompt(size: str) -> list[int]:
    import random

    rng = random.Random(0)
    return [rng.randrange(3, SIZES[size]["vocab_size"]) for _ in range(16)]


def child(mode: str, size: str, directory: str, new_tokens: int) -> None:
    """Generate once in this process (after one warm-up) and print a JSON line."""
    stamps: list[float] = []
    ids = prompt(size)
    if mode == "eager":
        import torch
        from transformers.generation.streamers import BaseStreamer

        model = build(size)

        class Stamp(BaseStreamer):
            def put(self, value):
                stamps.append(time.perf_counter())

            def end(self):
                pass

        def run(streamer=None):
            with torch.no_grad():
                model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                               max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                               pad_token_id=0, streamer=streamer)

        run()
        stamps.clear()
        start = time.perf_counter()
        run(Stamp())
        stamps = stamps[1:]  # the streamer's first put is the prompt
    else:
        if mode == "onnx":
            from export_onnx.generation import OnnxGenerator as Gen
        else:
            from export_executorch.generation import ExecutorchGenerator as Gen
        gen = Gen(directory)

        def run():
            for _ in gen.stream([ids], max_new_tokens=new_tokens, stop_on_eos=False):
                stamps.append(time.perf_counter())

        run()
        stamps.clear()
        start = time.perf_counter()
        run()
    ttft = stamps[0] - start
    decode = (len(stamps) - 1) / (stamps[-1] - stamps[0])
    # VmHWM: this process's own peak (ru_maxrss would include the parent's, kept across exec)
    with open("/proc/self/status") as f:
        rss = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:")) / 1024
    print(json.dumps({"mode": mode, "ttft_s": ttft, "decode_tok_s": decode, "peak_rss_mb": rss}))


def export(size: str, root: str) -> dict[str, str]:
    from export_core.generation import export_with_past
    from export_executorch.exporter import ExecutorchExporter
    from export_onnx.exporter import OnnxExporter

    model = build(size)
    dirs = {"onnx": os.path.join(root, "onnx"), "executorch": os.path.join(root, "executorch")}
    for mode, exporter in (("onnx", OnnxExporter()), ("executorch", ExecutorchExporter())):
        t = time.perf_counter()
        export_with_past(exporter, model, output=dirs[mode], max_length=128, max_batch=2,
                         validate=size == "tiny")
        print(f"exported {mode} in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    return dirs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", choices=sorted(SIZES), default="tiny")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument("--child", nargs=3, metavar=("MODE", "SIZE", "DIR"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        child(args.child[0], args.child[1], args.child[2], args.new_tokens)
        return
    with tempfile.TemporaryDirectory(prefix="bench-generate-") as root:
        dirs = export(args.size, root)
        runs: dict[str, list[dict]] = {m: [] for m in ("eager", "onnx", "executorch")}
        for _ in range(args.repeat):
            for mode in runs:
                out = subprocess.run([sys.executable, __file__, "--child", mode, args.size, dirs.get(mode, ""),
                                      "--new-tokens", str(args.new_tokens)],
                                     check=True, capture_output=True, text=True).stdout
                runs[mode].append(json.loads(out.strip().splitlines()[-1]))
    cfg = SIZES[args.size]
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    per_token = 2 * cfg["num_hidden_layers"] * cfg["num_key_value_heads"] * head_dim * 4
    eager = statistics.median(r["decode_tok_s"] for r in runs["eager"])
    print(f"size {args.size}, batch 1, prompt 16, {args.new_tokens} new tokens, median of {args.repeat}")
    print(f"{'runner':<11} {'TTFT ms':>8} {'decode tok/s':>13} {'x eager':>8} {'peak RSS MB':>12}")
    for mode, rs in runs.items():
        tok_s = statistics.median(r["decode_tok_s"] for r in rs)
        print(f"{mode:<11} {1000 * statistics.median(r['ttft_s'] for r in rs):>8.1f} {tok_s:>13.1f} "
              f"{tok_s / eager:>8.2f} {statistics.median(r['peak_rss_mb'] for r in rs):>12.0f}")
    print(f"cache memory per token (float32, batch 1): {per_token} bytes")


if __name__ == "__main__":
    main()
