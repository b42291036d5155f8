"""``new_empty`` / ``empty`` of a symbolic size through ExecuTorch (``symbolic_empty_as_zeros``):
the program keeps its dynamic batch and length (``to_edge``'s ``_empty_dim_order`` takes an
``int[]`` size and pinned them to the example's), compared with eager at three shapes; without
the fix the larger input is refused ("Attempted to resize a static / bounded tensor")."""

from __future__ import annotations

import pytest
import torch

import export_executorch
from export_core import RuntimeLoadError
from export_core.registry import withheld

FIX = "symbolic_empty_as_zeros"


class ExpandKV(torch.nn.Module):
    """Multi-head latent attention's ``expand_kv``: ``(batch, seq, 8)`` → keys
    ``(batch, 2, seq, 6)`` built in a ``new_empty`` buffer from a nope and a rope part."""

    def forward(self, x):
        b, s, _ = x.shape
        nope, rot = x[..., :4].unsqueeze(1).expand(b, 2, s, 4), x[..., 4:6].unsqueeze(1).expand(b, 2, s, 2)
        keys = nope.new_empty((b, 2, s, 6))
        keys[..., :4] = nope
        keys[..., 4:] = rot
        return keys * 2


class EmptyThenFill(torch.nn.Module):
    """``torch.empty((batch, seq))`` of the input's dtype, then ``copy_`` of a function of x."""

    def forward(self, x):
        out = torch.empty((x.shape[0], x.shape[1]), dtype=x.dtype)
        out.copy_(x.sum(-1))
        return out + 1


@pytest.mark.parametrize("model", [ExpandKV, EmptyThenFill], ids=["new_empty", "empty"])
def test_symbolic_empty_keeps_the_program_dynamic(model):
    result = export_executorch.export(model().eval(), (torch.randn(2, 8, 8),),
                                      validation_inputs=[(torch.randn(3, 12, 8),), (torch.randn(1, 5, 8),)])
    report = result.report
    assert report["status"] == "ok" and report["validation"]["passed"] is True
    assert {next(iter(c["shapes"].values()))[0] for c in report["validation"]["checks"]} >= {1, 2, 3}
    assert FIX in report["fixes"]["applied"]


def test_a_static_empty_is_left_alone():
    class Static(torch.nn.Module):
        def forward(self, x):
            buf = x.new_empty((4,))
            buf.fill_(3.0)
            return x + buf

    report = export_executorch.export(Static().eval(), (torch.randn(2, 4),)).report
    assert report["validation"]["passed"] is True and FIX not in report["fixes"]["applied"]


def test_without_the_fix_the_program_is_pinned_to_the_example():
    pinned = r"bounds \(2, 8, 512\) \(axis 0: 3 > 2, axis 1: 12 > 8\)"
    with withheld("executorch", FIX), pytest.raises(RuntimeLoadError, match=pinned):
        export_executorch.export(ExpandKV().eval(), (torch.randn(2, 8, 8),),
                                 validation_inputs=[(torch.randn(3, 12, 8),)])
