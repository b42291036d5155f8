"""The capture patch ``tensor_len_stays_symbolic``: in the modeling modules that read their
batch size as ``len(tensor)`` (RT-DETR and the detectors built on its code, LayoutLMv3), ``len``
of a tensor answers its symbolic size, so the batch stays dynamic. Checked on a tiny RT-DETR
through ``DynamoExporter.capture``: the captured program matches eager at batch sizes other
than the example's; without the patch it accepts the example's batch only."""

from __future__ import annotations

import pytest
import torch

from export_core import DynamoExporter
from export_core.registry import withheld
from export_sweep.zoo.build import build_tiny_model

PATCH = "dynamo:transformers.models.rt_detr.modeling_rt_detr.len"


def _images(batch: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"pixel_values": torch.randn(batch, 3, 32, 32, generator=g),
            "pixel_mask": torch.ones(batch, 32, 32, dtype=torch.int64)}


@pytest.fixture(scope="module")
def tiny_rt_detr() -> torch.nn.Module:
    return build_tiny_model("rt_detr").model


def test_rt_detr_batch_stays_dynamic(tiny_rt_detr) -> None:
    capture = DynamoExporter().capture(tiny_rt_detr, _images(2, 0))
    assert PATCH in capture.patches.fired
    program = capture.program.module()
    with torch.no_grad():
        for batch, seed in ((3, 1), (1, 2)):
            inputs = _images(batch, seed)
            got = program(**inputs)
            want = tiny_rt_detr(**inputs)
            torch.testing.assert_close(got.last_hidden_state, want.last_hidden_state)


def test_len_of_other_objects_is_the_builtin(tiny_rt_detr) -> None:
    from transformers.models.rt_detr import modeling_rt_detr

    from export_core.patching import apply_patches

    with apply_patches("dynamo"):
        shadow = modeling_rt_detr.len
        assert shadow([1, 2, 3]) == 3 and shadow(torch.zeros(4, 2)) == 4
        with pytest.raises(TypeError):
            shadow(torch.tensor(1.0))
    assert "len" not in vars(modeling_rt_detr)  # the builtin is back


def test_without_the_patch_the_batch_is_pinned(tiny_rt_detr) -> None:
    """Documents the model code's len(); when this stops failing, the patch can go."""
    with withheld("dynamo", PATCH):
        capture = DynamoExporter().capture(tiny_rt_detr, _images(2, 0))
    with pytest.raises(Exception, match="pixel_values"):
        capture.program.module()(**_images(3, 1))
