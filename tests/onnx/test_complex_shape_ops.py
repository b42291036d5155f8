"""Shape-only ops on complex tensors through ONNX (``complex_shape_ops``): ``unsqueeze`` (positive
and negative axes), ``squeeze.dims``, ``select`` and ``expand`` between ``view_as_complex`` and
``view_as_real``, as in complex rotary embeddings, compared with eager in ONNX Runtime at two
shapes; without the patch translation fails."""

from __future__ import annotations

import pytest
import torch

import export_onnx
from export_core import TranslationError
from export_core.registry import withheld

PATCH = "torch.onnx._internal.exporter._dispatching.dispatch"


class ComplexOp(torch.nn.Module):
    """``x (batch, seq, 4, 2)`` as complex ``(batch, seq, 4)``, one shape op, times a complex
    ``freqs (seq, 4)`` rotation, back to real."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x, angles):
        z = torch.view_as_complex(x)
        freqs = torch.polar(torch.ones_like(angles), angles)
        return torch.view_as_real(self.fn(z, freqs))


OPS = {
    "unsqueeze-neg": lambda z, f: z.unsqueeze(-2) * f.unsqueeze(0).unsqueeze(-2),
    "unsqueeze-pos": lambda z, f: z.unsqueeze(2) * f.unsqueeze(1),
    "squeeze-dims": lambda z, f: torch.squeeze(z.unsqueeze(1).unsqueeze(-1), (1, -1)) * f,
    "select": lambda z, f: z.select(-1, 1).unsqueeze(-1) * f,
    "expand": lambda z, f: z * f.unsqueeze(0).expand(z.shape[0], -1, -1),
}


def _inputs(batch: int, seq: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(batch, seq, 4, 2), torch.randn(seq, 4)


@pytest.mark.parametrize("name", list(OPS))
def test_complex_shape_op_matches_eager(name):
    torch.manual_seed(0)
    r = export_onnx.export(ComplexOp(OPS[name]).eval(), _inputs(2, 5),
                           validation_inputs=[_inputs(3, 7), _inputs(1, 2)])
    report = r.report
    assert report["status"] == "ok" and report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) >= 2
    assert f"onnx:{PATCH}" in report["patches"]["fired"]


def test_real_valued_programs_do_not_fire_it():
    r = export_onnx.export(torch.nn.Linear(4, 4).eval(), (torch.randn(2, 4),))
    assert f"onnx:{PATCH}" not in r.report["patches"]["fired"]


def test_without_the_patch_translation_fails():
    with withheld("onnx", PATCH), pytest.raises(TranslationError, match="complex-valued input"):
        export_onnx.export(ComplexOp(OPS["unsqueeze-neg"]).eval(), _inputs(2, 5))
