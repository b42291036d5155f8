"""Two capture patches Switch Transformers needs, each tested on its own:

- ``skip_noop_module_to``: ``nn.Module.to`` inside ``forward`` that changes no tensor returns the
  module (the router's ``self.classifier = self.classifier.to(self.dtype)``); without it the
  capture fails in ``swap_tensors``.
- ``dense_switch_experts``: the experts loop over the experts the routing hit (``nonzero()``)
  becomes a fixed loop over every expert masked by the routing; without it the capture fails on
  the data-dependent loop.

The encoder is exported with dynamic batch and sequence and compared with eager in ONNX Runtime
and the ExecuTorch runtime at three shapes, with a capacity small enough to drop tokens."""

from __future__ import annotations

import pytest
import torch

import export_executorch
import export_onnx
from export_core import CaptureError
from export_core.registry import withheld
from export_core.workarounds import module_to_noop, switch_experts

EXPERTS = ("dynamo:transformers.models.switch_transformers.modeling_switch_transformers."
           "SwitchTransformersExperts.forward")
MODULE_TO = "dynamo:torch.nn.modules.module.Module.to"


def _model() -> torch.nn.Module:
    from transformers import SwitchTransformersConfig, SwitchTransformersEncoderModel

    config = SwitchTransformersConfig(
        vocab_size=64, d_model=32, d_kv=8, d_ff=48, num_layers=2, num_sparse_encoder_layers=1,
        num_heads=2, num_experts=4, expert_capacity=3, router_jitter_noise=0.0)
    torch.manual_seed(0)
    return SwitchTransformersEncoderModel(config).eval()


def _inputs(batch: int, seq: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(0, 64, (batch, seq), generator=g),
            "attention_mask": torch.ones(batch, seq, dtype=torch.int64)}


def test_dense_experts_equal_the_loop() -> None:
    experts = next(m for m in _model().modules() if type(m).__name__ == "SwitchTransformersExperts")
    g = torch.Generator().manual_seed(1)
    hidden = torch.randn(15, 32, generator=g)
    selected = torch.nn.functional.one_hot(torch.randint(0, 4, (15,), generator=g), 4)
    selected[::4] = 0  # tokens dropped for capacity get zeros
    selected = selected.view(15, 1, 4)
    weights = torch.rand(15, 1, generator=g)
    with torch.no_grad():
        want = experts(hidden, selected, weights)
        got = switch_experts.dense_switch_experts(None)(experts, hidden, selected, weights)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
    assert torch.count_nonzero(got[::4]) == 0


# The capture patch is backend-neutral: CI runs ONNX; ExecuTorch runs with -m slow and in the sweep.
@pytest.mark.parametrize("backend", ["onnx", pytest.param("executorch", marks=pytest.mark.slow)])
def test_switch_transformers_exports_and_matches_eager(backend: str) -> None:
    export = export_onnx.export if backend == "onnx" else export_executorch.export
    result = export(_model(), _inputs(2, 8, 0),
                    validation_inputs=[_inputs(3, 13, 1), _inputs(1, 5, 2)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) >= 3
    assert {EXPERTS, MODULE_TO} <= set(report["patches"]["fired"])


@pytest.mark.parametrize(("patch", "match"), [(EXPERTS, "data-dependent"), (MODULE_TO, "swap")])
def test_without_each_patch_switch_transformers_does_not_capture(patch: str, match: str) -> None:
    """Documents the model code's faults: when one stops failing, its patch can go."""
    with withheld("dynamo", patch), pytest.raises(CaptureError, match=match):
        export_onnx.export(_model(), _inputs(2, 8, 0), validate=False)


class _CastsItsLayer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.register_buffer("steps", torch.arange(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.linear = self.linear.to(torch.float32)
        return self.linear(x) + self.steps


@pytest.mark.parametrize("backend", ["onnx", "executorch"])
def test_a_noop_cast_in_forward_exports_and_matches_eager(backend: str) -> None:
    export = export_onnx.export if backend == "onnx" else export_executorch.export
    torch.manual_seed(0)
    result = export(_CastsItsLayer().eval(), {"x": torch.randn(2, 4)},
                    validation_inputs=[{"x": torch.randn(5, 4)}, {"x": torch.randn(1, 4)}])
    assert result.report["validation"]["passed"] is True
    assert MODULE_TO in result.report["patches"]["fired"]


def test_a_cast_that_changes_weights_still_converts() -> None:
    """Only no-op conversions are skipped: a real one runs the original ``Module.to``."""
    to = module_to_noop.skip_noop_module_to(torch.nn.Module.to)
    module = _CastsItsLayer()
    assert to(module, torch.float32) is module
    assert to(module, device="cpu", dtype=torch.float32) is module
    converted = to(module, torch.float64)
    assert converted.linear.weight.dtype == torch.float64
    assert converted.steps.dtype == torch.int64  # Module.to casts floating point tensors only
