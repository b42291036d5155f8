"""DynamoExporter capture: names, dynamic axes, state cleanup, pytree registration, validation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from export_core import CaptureError, DynamoExporter, InputError
from export_core.dynamic_shapes import resized_inputs
from export_core.pytree import check_roundtrip, register_pytree_nodes
from export_core.validation import compare_leaves


class KwargsModel(torch.nn.Module):
    """forward(**kwargs): the signature adapter must give the program named inputs."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, **kwargs):
        return {"hidden": self.lin(kwargs["x"]) * kwargs["scale"], "count": kwargs["x"].sum(-1)}


class Stateful(torch.nn.Module):
    def forward(self, x):
        self._cos_cached = x.cos()
        self.some_tensor = x * 2
        return self._cos_cached + 1


def test_kwargs_model_gets_named_inputs_and_outputs():
    r = DynamoExporter().capture(KwargsModel().eval(), {"x": torch.randn(2, 3, 4), "scale": torch.randn(2, 3, 1)})
    assert r.input_names == ["x", "scale"]
    assert r.output_names == ["hidden", "count"]
    assert [s for s in r.program.graph_signature.user_inputs] == ["x", "scale"]


def test_dynamic_axes_accept_other_shapes_including_one():
    m = KwargsModel().eval()
    r = DynamoExporter().capture(m, {"x": torch.randn(2, 3, 4), "scale": torch.randn(2, 3, 1)})
    for b, s in ((1, 1), (5, 7)):
        x, scale = torch.randn(b, s, 4), torch.randn(b, s, 1)
        torch.testing.assert_close(r.program.module()(x=x, scale=scale)["hidden"], m(x=x, scale=scale)["hidden"])


def test_static_export_specialises():
    from export_core import DynamoConfig

    r = DynamoExporter(DynamoConfig(dynamic=False)).capture(torch.nn.Linear(4, 2), (torch.randn(3, 4),))
    assert not r.program.range_constraints


def test_state_cleanup_restores_attributes():
    m = Stateful()
    m.some_tensor = torch.zeros(1)
    DynamoExporter().capture(m, (torch.randn(3, 4),))
    assert not hasattr(m, "_cos_cached")
    assert torch.equal(m.some_tensor, torch.zeros(1))


def test_capture_errors_are_typed():
    class Bad(torch.nn.Module):
        def forward(self, x):
            return x.nonzero().shape[0] * x if x.sum() > 0 else x

    with pytest.raises(CaptureError, match=r"^\[capture\]"):
        DynamoExporter().capture(Bad(), (torch.randn(3, 4),))
    with pytest.raises(InputError):
        DynamoExporter().capture(torch.nn.Linear(2, 2), [torch.randn(2, 2)])


def test_resized_inputs_follow_symbols():
    m = KwargsModel().eval()
    inputs = {"x": torch.randn(2, 3, 4), "scale": torch.randn(2, 3, 1)}
    r = DynamoExporter().capture(m, inputs)
    bigger, lowest = resized_inputs(r.program, inputs)
    assert bigger["x"].shape == (3, 4, 4) and bigger["scale"].shape == (3, 4, 1)
    assert lowest["x"].shape == (1, 1, 4)


class WholeFrames(torch.nn.Module):
    """``x`` ``(batch, frames, 4)`` float32 -> ``(batch, frames // 2)``: pairs of frames summed.
    Eager refuses an odd frame count, as audio encoders refuse frames that are no multiple of
    their subsampling factor; the check is skipped while exporting, so the capture does not
    see it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not torch.compiler.is_exporting() and x.shape[1] % 2:
            raise ValueError(f"frames ({x.shape[1]}) must be a multiple of 2")
        return x.reshape(x.shape[0], x.shape[1] // 2, 8).sum(-1)


def test_derived_validation_sets_the_model_refuses_are_left_out():
    """The derived sets are 9 frames (refused) and 1 (refused): the export is validated at its
    example, the report counts the refusals, and nothing fails."""
    result = DynamoExporter().export(WholeFrames().eval(), (torch.randn(2, 8, 4),))
    report = result.report
    assert report["validation"]["passed"] is True
    assert report["validation_sets_refused_by_model"] == 2
    assert [c["shapes"]["0"] for c in report["validation"]["checks"]] == [[2, 8, 4]]


def test_cache_pytree_roundtrip_for_every_cache_class():
    from transformers import DynamicCache, EncoderDecoderCache, LlamaConfig

    register_pytree_nodes()
    cfg = LlamaConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4)
    cache = DynamicCache(config=cfg)
    for i in range(2):
        cache.update(torch.randn(2, 4, 3, 8), torch.randn(2, 4, 3, 8), i)
    check_roundtrip(cache)
    check_roundtrip(EncoderDecoderCache(cache, DynamicCache(config=cfg)))
    import torch.utils._pytree as pytree
    from transformers.cache_utils import Cache

    assert all(c in pytree.SUPPORTED_NODES for c in [Cache, *Cache.__subclasses__()])


def test_cache_leaves_are_named_as_the_contract_says():
    from transformers import DynamicCache, LlamaConfig

    from export_core.naming import leaf_names

    register_pytree_nodes()
    cache = DynamicCache(config=LlamaConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4))
    for i in range(2):
        cache.update(torch.randn(1, 4, 3, 8), torch.randn(1, 4, 3, 8), i)
    assert leaf_names({"past_key_values": cache}, cache_name="past_key_values") == [
        "past_key_values.0.key", "past_key_values.0.value", "past_key_values.1.key", "past_key_values.1.value"]
    assert leaf_names({"logits": torch.ones(1), "past_key_values": cache}, cache_name="present")[1:3] == [
        "present.0.key", "present.0.value"]


def test_compare_leaves_flags_nan_shape_and_values():
    e = torch.tensor([1.0, 2.0, float("nan")])
    ok = compare_leaves(["a"], [np.array([1.0, 2.00001, np.nan], dtype=np.float32)], [e], atol=1e-4, rtol=1e-3)
    assert ok[0].passed
    bad = compare_leaves(["a"], [np.array([1.0, 2.0, 0.0], dtype=np.float32)], [e], atol=1e-4, rtol=1e-3)
    assert not bad[0].passed and "NaN" in bad[0].problem
    shape = compare_leaves(["a"], [np.zeros(2)], [e], atol=1e-4, rtol=1e-3)
    assert not shape[0].passed and "shape" in shape[0].problem


def test_packed_patch_features_and_grid_axis_are_static():
    """Beside a grid input, the packed patches' feature axis and the grid's (t, h, w) axis are
    fixed; the patch and image counts stay Dim.AUTO."""
    from torch.export import Dim

    from export_core.dynamic_shapes import auto_dynamic_shapes

    packed = {"pixel_values": torch.zeros(8, 96), "image_grid_thw": torch.ones(2, 3, dtype=torch.long),
              "input_ids": torch.zeros(2, 11, dtype=torch.long)}
    spec = auto_dynamic_shapes(packed)
    assert spec["pixel_values"] == {0: Dim.AUTO, 1: Dim.STATIC}
    assert spec["image_grid_thw"] == {0: Dim.AUTO, 1: Dim.STATIC}
    assert spec["input_ids"] == {0: Dim.AUTO, 1: Dim.AUTO}
    # without a grid, a 2-d floating input is (batch, features) of any kind: left to torch
    assert auto_dynamic_shapes({"inputs_embeds": torch.zeros(2, 16)})["inputs_embeds"] == {
        0: Dim.AUTO, 1: Dim.AUTO}

