"""The ONNX patch ``identity_constants_match_exactly``: the optimizer's no-op rules remove
``x + 0`` / ``x * 1`` only for an exact 0 / 1, so a normalisation's ``1e-8`` epsilon (and a
``1.000005`` scale) survive the optimizer. Compared with eager in ONNX Runtime at three shapes,
batch 1 among them, on rows whose variance is of the epsilon's order; real model code: Muse
Glimmer's text model (centred RMSNorm, ``post_norm_eps=1e-8``)."""

from __future__ import annotations

import pytest
import torch

import export_onnx
from export_core import ExportError
from export_core.registry import withheld
from export_sweep.zoo.build import build_tiny_model

PATCH = "onnx:onnxscript.rewriter._matcher.SimplePatternMatcher._match_constant"


class _CentredNorm(torch.nn.Module):
    """``forward(x)``: ``x`` ``(batch, seq, 16)`` float32 -> centred RMS-normalised ``x`` with
    epsilon ``1e-8``, scaled by ``1.000005``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        centred = x - x.mean(-1, keepdim=True)
        return centred * torch.rsqrt(centred.pow(2).mean(-1, keepdim=True) + 1e-8) * 1.000005


def _rows(batch: int, seq: int, seed: int) -> tuple[torch.Tensor]:
    """Rows of standard deviation 1e-4 (variance 1e-8, the epsilon's order)."""
    g = torch.Generator().manual_seed(seed)
    return (1e-4 * torch.randn(batch, seq, 16, generator=g),)


VALIDATION = [_rows(3, 7, 1), _rows(1, 2, 2)]


def test_small_epsilons_survive_the_optimizer() -> None:
    result = export_onnx.export(_CentredNorm(), _rows(2, 5, 0), validation_inputs=VALIDATION)
    assert result.report["validation"]["passed"] is True
    assert len(result.report["validation"]["checks"]) == 3
    assert PATCH in result.report["patches"]["fired"]


def test_without_the_patch_the_epsilon_is_removed() -> None:
    """Documents the rewriter's tolerance: when this stops failing, the patch can go."""
    with withheld("onnx", PATCH), pytest.raises(ExportError, match="differs from eager"):
        export_onnx.export(_CentredNorm(), _rows(2, 5, 0), validation_inputs=VALIDATION)


def test_exact_identities_are_still_removed() -> None:
    """``x + 0`` and ``x * 1`` are still rewritten away (the patch does not fire)."""

    class _Identities(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x + 0.0) * 1.0

    result = export_onnx.export(_Identities(), (torch.randn(2, 3),))
    ops = [n.op_type for n in result.program.model_proto.graph.node]
    assert "Add" not in ops and "Mul" not in ops
    assert PATCH not in result.report["patches"]["fired"]


def test_muse_glimmer_text_matches_eager() -> None:
    g = torch.Generator().manual_seed(0)
    ids = [torch.randint(5, 200, (b, s), generator=g) for b, s in [(2, 8), (3, 12), (1, 5)]]
    result = export_onnx.export(build_tiny_model("muse_glimmer_text").model, {"input_ids": ids[0]},
                                validation_inputs=[{"input_ids": i} for i in ids[1:]])
    assert result.report["validation"]["passed"] is True
    assert PATCH in result.report["patches"]["fired"]
