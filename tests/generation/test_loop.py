"""The generate loop on toy numpy graphs: left padding, positions, EOS, budget, sampling, streaming.

No torch and no artifact: a toy "model" whose next token is a function of the row's last token,
its position and the cache it carries, so every rule of the loop shows in the tokens.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from export_core.generation import (
    CacheLayout,
    GenerationError,
    GenerationLoop,
    GenerationManifest,
    GraphSpec,
    SamplingOptions,
    left_pad,
    next_tokens,
)

VOCAB, PAD, EOS = 16, 0, 1


class ToyGraph:
    """Logits peak at ``(last token + position + cached tokens) % VOCAB``, avoiding EOS unless
    the row's position reaches ``eos_at``. The cache is the running sum of fed tokens."""

    def __init__(self, role: str, eos_at: int | None = None) -> None:
        self.role = role
        self.eos_at = eos_at
        self.input_names = ["input_ids", "attention_mask", "position_ids"] + (
            ["past_key_values.0.key"] if role == "decode" else [])
        self.output_names = ["logits", "present.0.key"]
        self.calls: list[dict[str, np.ndarray]] = []

    def run(self, feeds):
        self.calls.append({k: np.array(v) for k, v in feeds.items()})
        ids, mask, pos = feeds["input_ids"], feeds["attention_mask"], feeds["position_ids"]
        past = feeds.get("past_key_values.0.key", np.zeros((ids.shape[0], 1), dtype=np.int64))
        cache = past + (ids * mask[:, -ids.shape[1]:]).sum(axis=1, keepdims=True)
        target = (ids[:, -1] + pos[:, -1] + cache[:, 0]) % VOCAB
        target = np.where(target <= EOS, target + 2, target)
        if self.eos_at is not None:
            target = np.where(pos[:, -1] + 1 >= self.eos_at, EOS, target)
        logits = np.full((ids.shape[0], 1, VOCAB), -5.0, dtype=np.float32)
        logits[np.arange(ids.shape[0]), 0, target] = 5.0
        logits[:, 0, :] += np.linspace(0, 1, VOCAB, dtype=np.float32)  # a spread for sampling
        return {"logits": logits, "present.0.key": cache}


def _loop(eos_at: int | None = None, max_length: int = 64, max_batch: int = 4) -> GenerationLoop:
    graphs = {r: GraphSpec(r, f"{r}/model.onnx", (), ()) for r in ("prefill", "decode")}
    manifest = GenerationManifest(
        task="text-generation-with-past", architecture="Toy", backend="onnx", graphs=graphs,
        cache=CacheLayout(1, {"past_key_values.0.key": "present.0.key"}), max_length=max_length,
        max_batch=max_batch, pad_token_id=PAD, eos_token_ids=(EOS,))
    return GenerationLoop(manifest, {"prefill": ToyGraph("prefill", eos_at), "decode": ToyGraph("decode", eos_at)})


def test_left_padding_puts_prompts_at_the_right():
    ids, mask = left_pad([[5, 6, 7], [9]], PAD)
    assert ids.tolist() == [[5, 6, 7], [PAD, PAD, 9]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]


def test_positions_follow_generate_and_the_cache_travels():
    loop = _loop()
    loop.generate([[5, 6, 7], [9]], max_new_tokens=3)
    prefill, decode = loop.prefill.calls[0], loop.decode.calls
    # generate's rule: cumsum(mask) - 1, and 1 at padding
    assert prefill["position_ids"].tolist() == [[0, 1, 2], [1, 1, 0]]
    assert [c["position_ids"].tolist() for c in decode] == [[[3], [1]], [[4], [2]]]
    assert [c["attention_mask"].shape for c in decode] == [(2, 4), (2, 5)]
    # the decode step's cache is the previous step's present
    assert decode[0]["past_key_values.0.key"].tolist() == [[18], [9]]


def test_a_padded_row_generates_what_it_generates_alone():
    loop = _loop()
    batch = loop.generate([[5, 6, 7, 8], [9, 3]], max_new_tokens=6).sequences
    alone = _loop().generate([[9, 3]], max_new_tokens=6).sequences
    assert batch[1] == alone[0]


def test_eos_ends_a_row_and_pads_it_while_others_go_on():
    loop = _loop(eos_at=5)
    steps = list(loop.stream([[5, 6, 7], [9]], max_new_tokens=8))
    out = _loop(eos_at=5).generate([[5, 6, 7], [9]], max_new_tokens=8)
    # EOS comes from position 4 on: row 0 (prompt at positions 0-2) at its third new token,
    # row 1 (prompt at position 0) at its fifth
    assert out.sequences[0][-1] == EOS and len(out.sequences[0]) == 3
    assert out.sequences[1][-1] == EOS and len(out.sequences[1]) == 5
    assert out.stopped == ["eos", "eos"]
    assert steps[3].tokens[0] == PAD and steps[3].finished[0] and not steps[3].finished[1]
    assert len(steps) == 5  # the loop ends when every row has finished


def test_ignoring_eos_runs_the_whole_budget():
    out = _loop(eos_at=3).generate([[5, 6]], max_new_tokens=7, stop_on_eos=False)
    assert len(out.sequences[0]) == 7 and out.stopped == ["length"]


def test_min_new_tokens_masks_eos_until_then():
    # EOS would come at the third new token; masked, the row runs on to its sixth, then stops
    out = _loop(eos_at=5).generate([[5, 6, 7]], max_new_tokens=8, min_new_tokens=6)
    assert EOS not in out.sequences[0][:6]
    assert out.sequences[0][-1] == EOS and len(out.sequences[0]) == 7 and out.stopped == ["eos"]
    with pytest.raises(GenerationError, match="min_new_tokens must be in"):
        list(_loop().stream([[5]], max_new_tokens=2, min_new_tokens=3))


def test_streaming_yields_each_step_before_the_next_runs():
    loop = _loop()
    seen = []
    for step in loop.stream([[5, 6]], max_new_tokens=4):
        seen.append((step.index, len(loop.decode.calls)))
    assert seen == [(0, 0), (1, 1), (2, 2), (3, 3)]


def test_requests_beyond_the_bounds_are_refused_before_running():
    loop = _loop(max_length=10, max_batch=2)
    with pytest.raises(GenerationError, match=r"exceeds the export's maximum length 10"):
        loop.generate([[5, 6, 7, 8]], max_new_tokens=7)
    with pytest.raises(GenerationError, match="maximum batch 2"):
        loop.generate([[5], [6], [7]], max_new_tokens=1)
    with pytest.raises(GenerationError, match="no tokens"):
        loop.generate([[]], max_new_tokens=1)
    assert loop.prefill.calls == []
    loop.generate([[5, 6, 7, 8]], max_new_tokens=6)  # exactly max_length


def test_sampling_with_a_seed_repeats_and_differs_from_greedy():
    opts = SamplingOptions(do_sample=True, temperature=3.0, seed=7)
    a = _loop().generate([[5, 6]], max_new_tokens=20, sampling=opts).sequences
    b = _loop().generate([[5, 6]], max_new_tokens=20, sampling=opts).sequences
    greedy = _loop().generate([[5, 6]], max_new_tokens=20).sequences
    other = _loop().generate([[5, 6]], max_new_tokens=20,
                             sampling=SamplingOptions(do_sample=True, temperature=3.0, seed=8)).sequences
    assert a == b
    assert a != greedy and a != other


def test_top_k_one_and_a_tiny_top_p_are_greedy():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, VOCAB))
    greedy = next_tokens(logits, SamplingOptions(), rng)
    for opts in (SamplingOptions(do_sample=True, top_k=1, seed=0),
                 SamplingOptions(do_sample=True, top_p=1e-6, seed=0)):
        assert next_tokens(logits, opts, np.random.default_rng(1)).tolist() == greedy.tolist()


def test_top_k_never_draws_outside_the_k_best():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(1, VOCAB))
    best = set(np.argsort(-logits[0])[:3].tolist())
    draws = {int(next_tokens(logits, SamplingOptions(do_sample=True, top_k=3, temperature=5.0), rng)[0])
             for _ in range(200)}
    assert draws <= best and len(draws) > 1


@pytest.mark.parametrize("bad", [{"temperature": 0}, {"top_k": -1}, {"top_p": 0}, {"top_p": 1.5}])
def test_bad_sampling_options_are_refused(bad):
    with pytest.raises(ValueError):
        SamplingOptions(do_sample=True, **bad)


def test_the_loop_side_imports_no_torch():
    code = ("import sys, export_core.generation, export_onnx.generation; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


# ── encoder-decoder exports and the generation config's token rules ──────────────────────────


class ToyEncoder:
    """Encodes a right-padded source as its masked token sum, ``(batch, 1, 1)``."""

    input_names = ["input_ids", "attention_mask"]
    output_names = ["last_hidden_state"]

    def __init__(self) -> None:
        self.calls: list[dict[str, np.ndarray]] = []

    def run(self, feeds):
        self.calls.append({k: np.array(v) for k, v in feeds.items()})
        total = (feeds["input_ids"] * feeds["attention_mask"]).sum(axis=1)
        return {"last_hidden_state": total[:, None, None].astype(np.float32)}


class ToyDecoder:
    """Logits peak at ``(last token + source sum + steps so far) % VOCAB`` (never PAD or EOS);
    the cache counts the steps."""

    def __init__(self, role: str) -> None:
        self.input_names = ["decoder_input_ids", "attention_mask", "encoder_outputs.last_hidden_state"] + (
            ["past_key_values.0.decoder.key"] if role == "decode" else [])
        self.calls: list[dict[str, np.ndarray]] = []

    def run(self, feeds):
        self.calls.append({k: np.array(v) for k, v in feeds.items()})
        ids = feeds["decoder_input_ids"]
        steps = feeds.get("past_key_values.0.decoder.key", np.zeros((ids.shape[0], 1), dtype=np.int64)) + 1
        source = feeds["encoder_outputs.last_hidden_state"][:, 0, 0].astype(np.int64)
        target = (ids[:, -1] + source + steps[:, 0]) % VOCAB
        target = np.where(target <= EOS, target + 2, target)
        logits = np.zeros((ids.shape[0], 1, VOCAB), dtype=np.float32)
        logits[np.arange(ids.shape[0]), 0, target] = 5.0
        logits[:, 0, EOS] = 4.0  # EOS second best everywhere
        return {"logits": logits, "present.0.decoder.key": steps}


def _seq2seq_loop(rules=None, max_length: int = 16):
    from export_core.generation import TokenRules

    graphs = {r: GraphSpec(r, f"{r}/model.onnx", (), ()) for r in ("encoder", "prefill", "decode")}
    manifest = GenerationManifest(
        task="text2text-generation-with-past", architecture="ToySeq2Seq", backend="onnx", graphs=graphs,
        cache=CacheLayout(1, {"past_key_values.0.decoder.key": "present.0.decoder.key"}),
        max_length=max_length, max_batch=4, pad_token_id=PAD, eos_token_ids=(EOS,), decoder_prompt=(PAD,),
        encoder_outputs={"encoder_outputs.last_hidden_state": "last_hidden_state"},
        encoder_inputs=("input_ids", "attention_mask"), max_source_length=8,
        token_rules=rules or TokenRules())
    sessions = {"encoder": ToyEncoder(), "prefill": ToyDecoder("prefill"), "decode": ToyDecoder("decode")}
    return GenerationLoop(manifest, sessions), sessions


def _toy_seq2seq_tokens(source: list[int], n: int) -> list[int]:
    out, last = [], PAD
    for step in range(n):
        t = (last + sum(source) + step + 1) % VOCAB
        t = t + 2 if t <= EOS else t
        out.append(t)
        last = t
    return out


def test_encoder_decoder_runs_the_encoder_once_and_feeds_its_output_to_every_step():
    loop, sessions = _seq2seq_loop()
    got = loop.generate([[3, 4, 5], [6]], max_new_tokens=5)
    assert got.sequences == [_toy_seq2seq_tokens([3, 4, 5], 5), _toy_seq2seq_tokens([6], 5)]
    (encoded,) = sessions["encoder"].calls
    # the source is right-padded, its mask fed to every decoder step unchanged
    assert encoded["input_ids"].tolist() == [[3, 4, 5], [6, PAD, PAD]]
    assert encoded["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert sessions["prefill"].calls[0]["decoder_input_ids"].tolist() == [[PAD], [PAD]]
    assert len(sessions["decode"].calls) == 4
    for call in sessions["decode"].calls:
        assert call["attention_mask"].tolist() == encoded["attention_mask"].tolist()
        assert call["decoder_input_ids"].shape == (2, 1)


def test_token_rules_forced_bos_forced_eos_and_suppression():
    from export_core.generation import TokenRules

    free = _toy_seq2seq_tokens([3], 6)
    # forced BOS (first token), forced EOS (last token of the budget)
    loop, _ = _seq2seq_loop(TokenRules(forced_bos_token_id=9, forced_eos_token_id=(EOS,)))
    (row,) = loop.generate([[3]], max_new_tokens=6, stop_on_eos=False).sequences
    assert row[0] == 9 and row[-1] == EOS
    # suppressed everywhere: the runner-up (EOS here) is chosen instead; begin-suppressed only
    # at the first step
    loop, _ = _seq2seq_loop(TokenRules(suppress_tokens=(free[1],)))
    (row,) = loop.generate([[3]], max_new_tokens=3, stop_on_eos=False).sequences
    assert row[:2] == [free[0], EOS]
    loop, _ = _seq2seq_loop(TokenRules(begin_suppress_tokens=(free[0],)))
    (row,) = loop.generate([[3]], max_new_tokens=1).sequences
    assert row == [EOS]


def test_encoder_decoder_requests_are_checked():
    loop, _ = _seq2seq_loop(max_length=8)
    with pytest.raises(GenerationError, match=r"decoder start tokens \(1 tokens\) \+ max_new_tokens \(8\)"):
        loop.generate([[3]], max_new_tokens=8)
    with pytest.raises(GenerationError, match="exceeds the export's maximum source length 8"):
        loop.generate([[3] * 9], max_new_tokens=2)
    with pytest.raises(GenerationError, match="either prompts"):
        loop.generate(None, max_new_tokens=2)
    with pytest.raises(GenerationError, match="takes \\['input_ids', 'attention_mask'\\], not \\['input_features'\\]"):
        loop.generate(encoder_inputs={"input_features": np.zeros((1, 4, 8), np.float32)}, max_new_tokens=2)
    decoder_only = _loop()
    with pytest.raises(GenerationError, match="for an encoder-decoder export"):
        decoder_only.generate([[3]], encoder_inputs={"input_ids": np.zeros((1, 2), np.int64)}, max_new_tokens=2)
