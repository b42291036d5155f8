"""The ONNX patch ``type_promotion_without_grad``: ``torch.onnx``'s type-promotion re-run happens
without grad, so an SDPA whose float mask is computed from parameters keeps the fused CPU
kernel's output layout, and the views the capture resolved on it stay valid. Compared with
eager in ONNX Runtime at three shapes, batch 1 among them, for a learned per-head bias (with a
plain and a patch-derived sequence length) and for a model of that kind (LayoutLMv3's relative
position biases)."""

from __future__ import annotations

import pytest
import torch

import export_onnx
from export_core import ExportError
from export_core.registry import withheld
from export_sweep.zoo.build import build_tiny_model

PATCH = "onnx:torch.onnx._internal.fx.passes.type_promotion.InsertTypePromotion._run"
F = torch.nn.functional


class _BiasedAttention(torch.nn.Module):
    """``forward(x)``: ``x`` ``(batch, seq, 64)`` float32 (or ``(batch, 64, height, width)``
    with ``patches``: ``seq = height * width + 1``) -> ``(batch, seq, 64)``: four-head
    self-attention whose additive mask ``(batch, 4, seq, seq)`` is a learned per-head bias
    (``bias``: ``"learned"``), the same bias detached (``"frozen"``), or a boolean mask."""

    def __init__(self, bias: str = "learned", patches: bool = False) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(64, 64)
        self.head_bias = torch.nn.Parameter(torch.randn(4, 1, 1))
        self.bias, self.patches = bias, patches

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.patches:
            x = x.flatten(2).transpose(1, 2)
            x = torch.cat([x[:, :1], x], 1)
        batch, seq, _ = x.shape
        q = self.proj(x).view(batch, seq, -1, 16).transpose(1, 2)
        if self.bias == "learned":
            mask = (q[..., :1] * self.head_bias).expand(batch, 4, seq, seq).contiguous()
        elif self.bias == "frozen":
            mask = (q[..., :1].detach() * self.head_bias.detach()).expand(batch, 4, seq, seq)
        else:
            mask = torch.ones(batch, 1, seq, seq, dtype=torch.bool)
        out = F.scaled_dot_product_attention(q, q, q, attn_mask=mask)
        out = out.reshape(batch, -1, seq, 16).transpose(1, 2)
        return out.reshape(batch, seq, -1)


def _inputs(patches: bool) -> list[tuple[torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    shapes = [(2, 64, 4, 4), (3, 64, 4, 6), (1, 64, 2, 2)] if patches else \
        [(2, 9, 64), (3, 12, 64), (1, 5, 64)]
    return [(torch.randn(*shape, generator=g),) for shape in shapes]


@pytest.mark.parametrize("patches", [False, True], ids=["sequence", "patches"])
def test_learned_attention_bias_exports_and_matches_eager(patches: bool) -> None:
    first, *validation = _inputs(patches)
    result = export_onnx.export(_BiasedAttention("learned", patches).eval(), first,
                                validation_inputs=validation)
    assert result.report["validation"]["passed"] is True
    assert len(result.report["validation"]["checks"]) == 3
    assert PATCH in result.report["patches"]["fired"]


def test_without_the_patch_the_view_fails() -> None:
    """Documents the fault: when this stops failing, the patch can go."""
    first, *validation = _inputs(False)
    with withheld("onnx", PATCH), pytest.raises(ExportError, match="Cannot view a tensor"):
        export_onnx.export(_BiasedAttention("learned").eval(), first, validation_inputs=validation)


@pytest.mark.parametrize("bias", ["frozen", "boolean"])
def test_masks_without_grad_do_not_count_as_fired(bias: str) -> None:
    first, *validation = _inputs(False)
    result = export_onnx.export(_BiasedAttention(bias).eval(), first, validation_inputs=validation)
    assert result.report["validation"]["passed"] is True
    assert PATCH not in result.report["patches"]["fired"]


def test_layoutlmv3_matches_eager() -> None:
    tiny = build_tiny_model("layoutlmv3")
    result = export_onnx.export(tiny.model, tiny.inputs.first, validation_inputs=tiny.inputs.sets[1:])
    assert result.report["validation"]["passed"] is True
    assert PATCH in result.report["patches"]["fired"]
