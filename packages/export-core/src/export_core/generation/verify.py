"""Validation by generation: the loop over the exported graphs against eager ``generate()``.

Greedy tokens must be equal over each case's whole budget: both sides run with
``min_new_tokens`` equal to it, so EOS is masked on both and a random model that emits EOS early
is still compared token for token. Where they differ and eager's two best scores at that step are
within float tolerance of each other (a tie the artifact may break the other way), the row's
comparison ends there and the tie is reported.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from .loop import GenerationLoop

__all__ = ["GenerationCase", "CaseResult", "GenerationCheck", "compare_with_eager", "default_cases"]

TIE_TOLERANCE = 1e-4
"""Two scores closer than ``TIE_TOLERANCE * max(1, |score|)`` are a tie."""


@dataclass(frozen=True)
class GenerationCase:
    """One comparison: prompt lengths per row (left-padded to the longest) and the token budget."""

    name: str
    prompt_lengths: tuple[int, ...]
    max_new_tokens: int


@dataclass
class CaseResult:
    """The outcome of one :class:`GenerationCase`.

    Attributes:
        name, prompt_lengths, max_new_tokens: the case.
        compared: per row, tokens compared.
        matched: per row, whether all compared tokens were equal.
        ties: per row, the step where a tie ended the comparison, or ``None``.
        first_mismatch: ``{"row", "step", "eager", "artifact"}`` of the first real mismatch.
    """

    name: str
    prompt_lengths: list[int]
    max_new_tokens: int
    compared: list[int] = field(default_factory=list)
    matched: list[bool] = field(default_factory=list)
    ties: list[int | None] = field(default_factory=list)
    first_mismatch: dict[str, int] | None = None

    @property
    def passed(self) -> bool:
        return all(self.matched)


@dataclass
class GenerationCheck:
    """All cases of one export's validation by generation."""

    cases: list[CaseResult]
    tie_tolerance: float = TIE_TOLERANCE

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.cases)

    def first_problem(self) -> str:
        for c in self.cases:
            if c.first_mismatch is not None:
                m = c.first_mismatch
                return (f"case {c.name} (prompt lengths {c.prompt_lengths}): row {m['row']} step "
                        f"{m['step']}: eager token {m['eager']}, artifact {m['artifact']}")
        return "none"

    def as_dict(self) -> dict[str, Any]:
        return {"status": "passed" if self.passed else "failed", "passed": self.passed,
                "kind": "generation", "criterion": "greedy tokens equal to eager generate(); a "
                f"top-2 tie within {self.tie_tolerance} (relative) ends a row's comparison",
                "cases": [asdict(c) | {"passed": c.passed} for c in self.cases]}


def default_cases(max_length: int, min_new_tokens: int = 64, prompt: int = 0) -> list[GenerationCase]:
    """Batch 1 with a 5-token prompt; a padded batch of 2 (7 and 3 tokens); batch 1 run to
    ``max_length`` (when that is more than ``min_new_tokens`` further). Prompt lengths differ from
    the capture's (10). For an encoder-decoder the prompts are its sources and ``prompt`` is
    the length of its decoder start tokens, which ``max_length`` counts."""
    if prompt:
        budget = max(1, min(min_new_tokens, max_length - prompt))
        cases = [GenerationCase("batch1", (5,), budget), GenerationCase("batch2_padded", (7, 3), budget)]
        if max_length - prompt > budget:
            cases.append(GenerationCase("to_max_length", (4,), max_length - prompt))
        return cases
    budget = max(1, min(min_new_tokens, max_length - 7))
    cases = [GenerationCase("batch1", (5,), min(budget, max_length - 5)),
             GenerationCase("batch2_left_padded", (7, 3), budget)]
    if max_length - 4 > budget:
        cases.append(GenerationCase("to_max_length", (4,), max_length - 4))
    return cases


def _prompts(lengths: tuple[int, ...], vocab: int, avoid: set[int], seed: int) -> list[list[int]]:
    rng = np.random.default_rng(seed)
    allowed = np.array([i for i in range(vocab) if i not in avoid])
    return [rng.choice(allowed, size=n).tolist() for n in lengths]


def _is_tie(scores: torch.Tensor) -> bool:
    top = torch.topk(scores.double(), 2).values
    return float(top[0] - top[1]) <= TIE_TOLERANCE * max(1.0, abs(float(top[0])))


def _case_inputs(loop: GenerationLoop, prompts: list[list[int]],
                 seed: int) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The eager ``generate`` inputs of a case and the loop's arguments for the same case."""
    from .loop import left_pad, right_pad

    m = loop.manifest
    if "input_features" in m.encoder_inputs:
        # features of the export's fixed length, one random set per row
        frames = m.max_source_length or 0
        bins = int(m.extra.get("num_mel_bins", 0))
        features = np.random.default_rng(seed).standard_normal((len(prompts), bins, frames)).astype(np.float32)
        return {"input_features": torch.from_numpy(features)}, {"encoder_inputs": {"input_features": features}}
    # a decoder-only prompt is left-padded, an encoder's source right-padded
    ids, mask = (right_pad if m.is_encoder_decoder else left_pad)(prompts, m.pad_token_id)
    return ({"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask)},
            {"prompts": prompts})


def compare_with_eager(model: torch.nn.Module, loop: GenerationLoop, *, vocab: int, avoid: set[int],
                       max_new_tokens: int = 64, cases: list[GenerationCase] | None = None,
                       seed: int = 0) -> GenerationCheck:
    """Greedy generation from the artifacts and from eager ``generate()`` on the same prompts
    (an encoder-decoder's sources, right-padded; Whisper's: random features, one set per row).

    Args:
        model: the eager model.
        loop: the loop over the exported graphs.
        vocab: prompt ids are drawn below it, none in ``avoid`` (pad, EOS).
        max_new_tokens: the budget of the first two cases.
        cases: defaults to :func:`default_cases`.

    Returns:
        A :class:`GenerationCheck` (it does not raise on mismatch).
    """
    m = loop.manifest
    cases = cases or default_cases(m.max_length, max_new_tokens, len(m.decoder_prompt))
    results = []
    for n, case in enumerate(cases):
        prompts = _prompts(case.prompt_lengths, vocab, avoid, seed + n)
        eager_inputs, loop_inputs = _case_inputs(loop, prompts, seed + n)
        budget = case.max_new_tokens
        with torch.no_grad():
            eager = model.generate(**eager_inputs, max_new_tokens=budget, min_new_tokens=budget,
                                   do_sample=False, use_cache=True,
                                   pad_token_id=m.pad_token_id, eos_token_id=list(m.eos_token_ids) or None,
                                   output_scores=True, return_dict_in_generate=True)
        # min_new_tokens = max_new_tokens: every row has exactly the budget's new tokens
        eager_new = eager.sequences[:, -budget:].tolist()
        got = loop.generate(**loop_inputs, max_new_tokens=budget, min_new_tokens=budget)
        result = CaseResult(case.name, list(case.prompt_lengths), case.max_new_tokens)
        eos = set(m.eos_token_ids)
        for row, (want, have) in enumerate(zip(eager_new, got.sequences)):
            # eager pads finished rows; keep its tokens up to and including the first EOS
            cut = next((i + 1 for i, t in enumerate(want) if t in eos), len(want))
            want = want[:cut]
            tie = None
            ok = True
            compared = 0
            for step, (a, b) in enumerate(zip(want, have)):
                if a != b:
                    if _is_tie(eager.scores[step][row]):
                        tie = step
                    else:
                        ok = False
                        if result.first_mismatch is None:
                            result.first_mismatch = {"row": row, "step": step, "eager": a, "artifact": b}
                    break
                compared += 1
            else:
                if len(want) != len(have):
                    ok = False
                    if result.first_mismatch is None:
                        result.first_mismatch = {"row": row, "step": min(len(want), len(have)),
                                                 "eager": len(want), "artifact": len(have)}
            result.compared.append(compared)
            result.matched.append(ok)
            result.ties.append(tie)
        results.append(result)
    return GenerationCheck(results)
