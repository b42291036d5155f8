"""``export-executorch`` on tiny ``save_pretrained`` directories of 14 architectures.

Every architecture runs on XNNPACK (four representatives by default, the rest ``slow``); a
representative decoder and vision model also run on portable kernels, and the full portable matrix
is marked ``slow``. Each export is validated
against eager PyTorch at the export shapes and at two unseen shapes, batch 1 included, and its
report must carry the bounds (derived from the config), the planned arena and the delegation
summary.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from export_executorch.cli import main

ARCHITECTURES = (
    "bert", "roberta", "distilbert", "electra",
    "gpt2", "llama", "qwen2", "phi3", "gemma2", "opt",
    "vit", "convnext", "resnet", "mobilevit",
)
VISION = ("vit", "convnext", "resnet", "mobilevit")
XNNPACK_FAST = ("bert", "llama", "vit", "resnet")
"""XNNPACK representatives in the default suite (an encoder, a decoder, a transformer and a
convolutional vision model); the other ten are ``slow`` (the sweep's CI subset exports them too)."""
PORTABLE_FAST = ("llama", "resnet")
"""Portable representatives in the default suite: a decoder (the most ops) and a vision model; the
encoders' ops are a subset of the decoders' (``test_api`` covers portable on a small module)."""

KNOWN_FAILURES: dict[tuple[str, str], str] = {}
"""``(architecture, backend) -> reason`` for strict expected failures; each names the model-side or
upstream change needed."""


def _param(name: str, backend: str, *marks: pytest.MarkDecorator) -> object:
    reason = KNOWN_FAILURES.get((name, backend))
    extra = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(name, backend, marks=[*marks, *extra], id=f"{name}-{backend}")


def _export(name: str, backend: str, tiny_model_dir: Callable[[str], Path], out: Path,
            capsys: pytest.CaptureFixture[str]) -> dict:
    rc = main([str(tiny_model_dir(name)), "-o", str(out), "--backend", backend])
    err = capsys.readouterr().err
    report = json.loads((out / "export_report.json").read_text())
    assert rc == 0, f"exit {rc}: {report['error']}"
    assert sorted(p.name for p in out.iterdir()) == ["export_report.json", "model.pte"]
    assert f"{backend}: " in err and "nodes delegated" in err and "planned arena" in err
    return report


def _positions(model_dir: Path) -> int:
    config = json.loads((model_dir / "config.json").read_text())
    return next(config[k] for k in ("max_position_embeddings", "n_positions") if k in config)


def _check(name: str, report: dict, backend: str, model_dir: Path) -> None:
    assert report["status"] == "ok" and report["backend"] == backend
    validation = report["validation"]
    assert validation["passed"] and len(validation["checks"]) == 3
    batches = [next(iter(c["shapes"].values()))[0] for c in validation["checks"]]
    assert 1 in batches and len(set(batches)) == 3
    bounds = report["bounds"]
    assert all(d["min"] == 1 for d in bounds["dims"] if d["role"] == "batch")
    assert bounds["max_batch"] == 8 and bounds["sources"]["max_batch"] == "default"
    roles = {d["role"] for d in bounds["dims"]}
    if name in VISION:
        assert roles <= {"batch", "image"} and "batch" in roles
    else:  # the sequence cap comes from the config's position limit (at most 512)
        assert roles == {"batch", "sequence"}
        assert bounds["max_seq"] == min(_positions(model_dir), 512)
        assert bounds["sources"]["max_seq"].startswith("config.")
    assert report["memory"]["arena_bytes"] > 0
    delegation = report["delegation"]
    if backend == "xnnpack":
        assert delegation["delegated_nodes"] > 0
    else:
        assert delegation["delegated_nodes"] == 0


@pytest.mark.parametrize(("name", "backend"), [
    _param(n, "xnnpack") if n in XNNPACK_FAST else _param(n, "xnnpack", pytest.mark.slow)
    for n in ARCHITECTURES])
def test_xnnpack(name: str, backend: str, tiny_model_dir: Callable[[str], Path], tmp_path: Path,
                 capsys: pytest.CaptureFixture[str]) -> None:
    report = _export(name, backend, tiny_model_dir, tmp_path, capsys)
    _check(name, report, backend, tiny_model_dir(name))


@pytest.mark.parametrize(
    ("name", "backend"),
    [_param(n, "portable") if n in PORTABLE_FAST else _param(n, "portable", pytest.mark.slow)
     for n in ARCHITECTURES],
)
def test_portable(name: str, backend: str, tiny_model_dir: Callable[[str], Path], tmp_path: Path,
                  capsys: pytest.CaptureFixture[str]) -> None:
    report = _export(name, backend, tiny_model_dir, tmp_path, capsys)
    _check(name, report, backend, tiny_model_dir(name))
