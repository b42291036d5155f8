"""Generation from exported prefill/decode graphs, per decoder-only family and backend.

Each case exports a tiny random model with :func:`export_core.generation.export_with_past`
(the backend's exporter and ``open_session``), which validates the artifacts by generation:
the loop over the saved graphs must give eager ``generate()``'s greedy tokens (batch 1, a
left-padded batch of 2, one run to ``max_length``). Then the backend's ``Generator`` loads the
written directory and must give eager's tokens again, for a prompt none of the checks used.

An ONNX case takes ~45 s, an ExecuTorch one ~150 s: all but a few representative ones are
``slow`` (``pytest -m slow tests/generation``).
"""

from __future__ import annotations

import os

import pytest
import torch
from _families import FAMILIES, build_model, generation_backend

os.environ.setdefault("HF_HUB_OFFLINE", "1")

FAST = {("llama", "onnx")}
"""The cases of the default run (ExecuTorch generation runs by default in
``test_cli_generate.py``)."""

XFAIL: dict[tuple[str, str], str] = {}
"""``(family, backend)``: the model-side reason the export does not generate eager's tokens."""

BACKENDS = ("onnx", "executorch")

MOE = {"mixtral", "qwen2_moe"}
"""Families whose experts go through the ``batched_mm`` patch (``workarounds/moe_experts.py``)."""

SLIDING = {"mistral": [0, 1], "gemma2": [0], "gemma3": [0]}
"""Families with sliding-window layers (their indices), cached in full in the graphs
(``generation/cache_layers.py``)."""

EXPERTS_PATCH = "dynamo:transformers.integrations.moe.ExpertsInterface.get_interface"

MAX_LENGTH = 48
"""Prompt + generated tokens: beyond every sliding window of the configs (8), so the window
fills during the check; small enough to keep an ExecuTorch memory plan and the run short."""


def _case(family: str, backend: str):
    marks = []
    if (family, backend) not in FAST:
        marks.append(pytest.mark.slow)
    if (family, backend) in XFAIL:
        marks.append(pytest.mark.xfail(strict=True, reason=XFAIL[family, backend]))
    return pytest.param(family, backend, marks=marks, id=f"{family}-{backend}")


CASES = [_case(f, b) for b in BACKENDS for f in FAMILIES]


def _eager_tokens(model: torch.nn.Module, prompt: list[int], max_new_tokens: int, pad: int,
                  eos: list[int]) -> list[int]:
    with torch.no_grad():
        out = model.generate(input_ids=torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                             max_new_tokens=max_new_tokens, do_sample=False, use_cache=True,
                             pad_token_id=pad, eos_token_id=eos or None)
    new = out[0, len(prompt):].tolist()
    cut = next((i + 1 for i, t in enumerate(new) if t in eos), len(new))
    return new[:cut]


@pytest.mark.parametrize(("family", "backend"), CASES)
def test_family_generates_eager_tokens(family: str, backend: str, tmp_path) -> None:
    from export_core.generation import export_with_past

    exporter, open_session, generator_class = generation_backend(backend)
    model = build_model(family)
    out = tmp_path / "out"
    result = export_with_past(exporter, model, output=out, open_session=open_session,
                              max_length=MAX_LENGTH)

    assert result.check is not None and result.check.passed, result.check and result.check.first_problem()
    report = result.report
    assert report["status"] == "ok"
    assert report["validation"]["status"] == "passed"
    cases = report["validation"]["cases"]
    assert [c["name"] for c in cases] == ["batch1", "batch2_left_padded", "to_max_length"]
    assert all(c["passed"] for c in cases)
    if family in SLIDING:
        # the run to max_length went past the sliding window (8) before an EOS or a tie ended it
        longest = next(c for c in cases if c["name"] == "to_max_length")
        assert longest["ties"] == [None] and longest["compared"][0] > 8, longest
    assert report["graphs"]["decode"]["validation"] == "passed"
    assert (out / "generation.json").is_file()
    for role in ("prefill", "decode"):
        fired = result.graphs[role].report["patches"]["fired"]
        assert (EXPERTS_PATCH in fired) == (family in MOE), (role, fired)
    assert result.manifest.extra["sliding_layers_cached_in_full"] == SLIDING.get(family, [])

    generator = generator_class(out)
    manifest = result.manifest
    prompt = [31, 23, 57, 42, 17, 90]  # no special token of any config
    want = _eager_tokens(model, prompt, 20, manifest.pad_token_id, list(manifest.eos_token_ids))
    got = generator.generate([prompt], max_new_tokens=20)
    assert got.sequences == [want]
