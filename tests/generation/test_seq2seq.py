"""Generation from an encoder-decoder's exported encoder, prefill and decode graphs (T5, BART,
Whisper), per backend.

Each case exports a tiny random model with :func:`export_core.generation.export_with_past`,
which validates the artifacts by generation: the loop over the saved graphs must give eager
``generate()``'s greedy tokens for a source of batch 1 and a right-padded batch of 2 (Whisper:
random features), over the whole budget. Then the backend's ``Generator`` loads the written
directory and must give eager's tokens again for an input none of the checks used.

An ONNX case takes ~20 s, an ExecuTorch one ~90 s: all are slow (T5 on ONNX runs by default
through the CLI, in ``test_cli_seq2seq.py``;
``pytest -m slow tests/generation/test_seq2seq.py`` runs these).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from _families import SEQ2SEQ_FAMILIES, build_model, generation_backend

os.environ.setdefault("HF_HUB_OFFLINE", "1")

FAST: set[tuple[str, str]] = set()
"""None by default: T5 on ONNX runs through the CLI in ``test_cli_seq2seq.py``."""
BACKENDS = ("onnx", "executorch")
MAX_LENGTH = 40
TASKS = {"t5": "text2text-generation-with-past", "bart": "text2text-generation-with-past",
         "whisper": "automatic-speech-recognition-with-past"}
CONTIGUOUS_FIX = "keep_contiguous_as_clone"
"""The ONNX node fix T5's attention needs (``export_onnx/workarounds/contiguous_clone.py``)."""


def _case(family: str, backend: str):
    marks = [] if (family, backend) in FAST else [pytest.mark.slow]
    return pytest.param(family, backend, marks=marks, id=f"{family}-{backend}")


def _eager_new_tokens(model, inputs: dict[str, torch.Tensor], budget: int, eos: list[int]) -> list[list[int]]:
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=budget, do_sample=False, use_cache=True)
    rows = []
    for row in out[:, -budget:].tolist() if out.shape[1] >= budget else out.tolist():
        cut = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
        rows.append(row[:cut])
    return rows


@pytest.mark.parametrize(("family", "backend"), [_case(f, b) for b in BACKENDS for f in SEQ2SEQ_FAMILIES])
def test_encoder_decoder_generates_eager_tokens(family: str, backend: str, tmp_path) -> None:
    from export_core.generation import export_with_past

    exporter, open_session, generator_class = generation_backend(backend)
    model = build_model(family)
    out = tmp_path / "out"
    result = export_with_past(exporter, model, output=out, open_session=open_session, max_length=MAX_LENGTH)

    assert result.check is not None and result.check.passed, result.check and result.check.first_problem()
    report = result.report
    assert report["status"] == "ok" and report["task"] == TASKS[family]
    cases = report["validation"]["cases"]
    assert [c["name"] for c in cases] == ["batch1", "batch2_padded"]
    # every row compared over the whole budget: the decoder's maximum length less its start token
    assert all(n == MAX_LENGTH - 1 for c in cases for n in c["compared"]), cases
    assert set(report["graphs"]) == {"encoder", "prefill", "decode"}
    assert all(g["validation"] == "passed" for g in report["graphs"].values())
    manifest = result.manifest
    assert manifest.is_encoder_decoder and manifest.decoder_prompt == (model.config.decoder_start_token_id,)
    decode = manifest.graph("decode")
    # the contract's names: the two halves of each layer's cache apart, fed back step by step
    for i in range(2):
        for half in ("decoder", "encoder"):
            for kind in ("key", "value"):
                assert manifest.cache.feeds[f"past_key_values.{i}.{half}.{kind}"] == f"present.{i}.{half}.{kind}"
                assert f"past_key_values.{i}.{half}.{kind}" in decode.inputs
    assert manifest.encoder_outputs == {"encoder_outputs.last_hidden_state": "last_hidden_state"}
    assert (out / "encoder" / (result.graphs["encoder"].path.name)).is_file()
    if backend == "onnx" and family == "t5":
        assert CONTIGUOUS_FIX in result.graphs["encoder"].report["fixes"]["applied"]
    if family == "bart":
        assert manifest.token_rules.forced_eos_token_id == (2,)
    if family == "whisper":
        assert manifest.token_rules.suppress_tokens == (5, 6)
        assert manifest.token_rules.begin_suppress_tokens == (7,)

    generator = generator_class(out)
    eos = list(manifest.eos_token_ids)
    if family == "whisper":
        features = np.random.default_rng(7).standard_normal((2, 16, 64)).astype(np.float32)
        want = _eager_new_tokens(model, {"input_features": torch.from_numpy(features)}, 20, eos)
        got = generator.generate(encoder_inputs={"input_features": features}, max_new_tokens=20)
        assert all(5 not in row and 6 not in row and row[:1] != [7] for row in got.sequences)
    else:
        source = [[31, 23, 57, 42, 17, 90], [44, 12, 9]]  # no special token of any config
        ids = torch.tensor([source[0], source[1] + [0] * 3])
        mask = torch.tensor([[1] * 6, [1] * 3 + [0] * 3])
        want = _eager_new_tokens(model, {"input_ids": ids, "attention_mask": mask}, 20, eos)
        got = generator.generate(source, max_new_tokens=20)
    assert got.sequences == want


def test_a_speech_model_without_whisper_input_layout_is_refused() -> None:
    import transformers

    from export_core.errors import InputError
    from export_core.generation import export_with_past

    exporter, _, _ = generation_backend("onnx")
    # Speech2Text takes input_features of input_feat_per_channel filterbanks, any frame count
    config = transformers.Speech2TextConfig(
        vocab_size=128, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, input_feat_per_channel=16,
        conv_channels=32, max_source_positions=64, max_target_positions=64)
    model = transformers.Speech2TextForConditionalGeneration(config).eval()
    with pytest.raises(InputError, match="Whisper's input layout.*Speech2TextConfig has no num_mel_bins"):
        export_with_past(exporter, model, output=None, max_length=MAX_LENGTH)
