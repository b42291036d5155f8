"""Check the ExecuTorch CUDA backend on a machine with a CUDA GPU.

Exports two models with ``export_executorch.export(backend="cuda")`` (bfloat16, AOTInductor):
the embedded default all-MiniLM-L6-v2 (BERT encoder; a tiny random BERT when the ``demo`` extra is
missing) and a tiny random ResNet classifier, runs each ``.pte`` (with its ``.ptd`` weights) in
``executorch.runtime`` at the export shapes and at two unseen shapes (batch 1 included), and
prints the comparison with float32 eager PyTorch.

Exits 0 when both exports pass, 1 otherwise, and 2 with one line on stderr where there is no CUDA
device (or no ExecuTorch CUDA backend) to check.

Usage: ``uv run python scripts/cuda_check.py [-o OUT]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _models():
    """``(name, model, input sets, constant kwargs)`` for the two models."""
    import torch
    import transformers

    from export_core.inputs import build_input_sets

    torch.manual_seed(0)
    try:
        from export_core.cli import demo_model_dir

        path = demo_model_dir()
        tok = transformers.AutoTokenizer.from_pretrained(path)
        text = transformers.AutoModel.from_pretrained(path).eval()
        name = "all-MiniLM-L6-v2"
    except Exception:
        tok = None
        text = transformers.BertModel(transformers.BertConfig(
            vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=128, max_position_embeddings=128)).eval()
        name = "tiny-bert"
    yield name, text, build_input_sets(text, text.config, tok)
    resnet = transformers.ResNetForImageClassification(transformers.ResNetConfig(
        embedding_size=16, hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1],
        num_labels=10)).eval()
    yield "tiny-resnet", resnet, build_input_sets(resnet, resnet.config)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", help="directory for the programs (default: a temp dir)")
    args = ap.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("cuda_check: error: no CUDA device is visible to torch "
              "(torch.cuda.is_available() is False); run this on a machine with a CUDA GPU",
              file=sys.stderr)
        return 2
    from export_executorch.runner import registered_backends

    if "CudaBackend" not in registered_backends():
        print("cuda_check: error: the installed ExecuTorch runtime has no CudaBackend "
              f"(registered: {', '.join(registered_backends()) or 'none'}); install an "
              "ExecuTorch build with CUDA support", file=sys.stderr)
        return 2

    import export_executorch
    from export_core.errors import ExportError

    root = Path(args.output) if args.output else Path(tempfile.mkdtemp(prefix="cuda-check-"))
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}")
    failed = 0
    for name, model, sets in _models():
        out = root / name
        try:
            result = export_executorch.export(
                model, sets.export, output=out, backend="cuda",
                validation_inputs=sets.validation,
            )
            report = result.report
        except ExportError as e:
            print(f"{name:18s} FAILED {e}")
            failed += 1
            continue
        v = report["validation"]
        print(f"{name:18s} ok   {result.path}  (bf16, atol {v['atol']}, rtol {v['rtol']})")
        for check in v["checks"]:
            shapes = ", ".join(f"{k}{tuple(s)}" for k, s in check["shapes"].items())
            print(f"    {shapes:48s} max|diff| {check['max_abs']:.3e}  max rel {check['max_rel']:.3e}"
                  f"  {'pass' if check['passed'] else 'FAIL'}")
        seconds = {s["name"]: s["seconds"] for s in report["stages"]}
        print(f"    lower {seconds.get('lower', 0):.1f} s, arena "
              f"{report['memory']['arena_bytes'] / 2**20:.1f} MiB")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
