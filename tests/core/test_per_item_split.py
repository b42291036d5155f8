"""The capture patch ``per_item_split_as_one_chunk``: Qwen-VL-style ``get_image_features`` split
the pooled features per image with ``torch.split(x, sizes.tolist())`` and ``forward``
concatenates them again; ``.tolist()`` pinned the image count. With the patch the split returns
one chunk, the image count stays dynamic, and validation compares the unpatched eager model's
output, its chunks concatenated (the registered ``repack``).

Checked through ``export_onnx.export`` / ``export_executorch.export`` on tiny Qwen2-VL at 2, 1
and 3 images (batch 1 included), through the capture on Qwen3-VL (whose deepstack features are
split the same way), and with the patch withheld (the artifact takes the example's count only).
"""

from __future__ import annotations

import pytest
import torch
import torch.utils._pytree as pytree
from transformers.modeling_outputs import BaseModelOutputWithPooling

import export_executorch
import export_onnx
from export_core import DynamoExporter, ExportError
from export_core.inputs import make_example_inputs
from export_core.patching import apply_patches
from export_core.registry import withheld
from export_core.workarounds.per_item_split import DeferredSplitSizes, one_chunk_per_split
from export_sweep.zoo.build import build_tiny_model

PATCH = "dynamo:transformers.models.qwen2_vl.modeling_qwen2_vl.Qwen2VLModel.get_image_features"
# (batch, sequence): one image per sequence, 2x2 patches (one merged token) at sequence 8, 4x4
# at 12. Qwen3-VL's patch merger layer-norms a (merged tokens, hidden) view whose fake kernel
# guards on a size of 1, so a set of one merged token in all is not among them.
SHAPES = ((2, 8), (1, 12), (3, 12))


def _tiny(model_type: str) -> tuple[torch.nn.Module, list[dict]]:
    model = build_tiny_model(model_type).model
    return model, list(make_example_inputs(model, shapes=SHAPES).sets)


@pytest.fixture(scope="module")
def qwen2_vl() -> tuple[torch.nn.Module, list[dict]]:
    return _tiny("qwen2_vl")


def _image_counts(report: dict) -> list[int]:
    return [c["shapes"]["image_grid_thw"][0] for c in report["validation"]["checks"]]


def test_onnx_artifact_takes_any_image_count(qwen2_vl) -> None:
    model, sets = qwen2_vl
    result = export_onnx.export(model, sets[0], validation_inputs=sets[1:])
    report = result.report
    assert report["validation"]["passed"] is True
    assert _image_counts(report) == [2, 1, 3]
    assert report["validation"]["eager_repacked_by"] == [PATCH]
    assert PATCH in report["patches"]["fired"]
    pooled = [n for n in report["outputs"] if n.startswith("image_outputs.pooler_output")]
    assert pooled == ["image_outputs.pooler_output.0"]


def test_executorch_artifact_takes_any_image_count(qwen2_vl) -> None:
    model, sets = qwen2_vl
    result = export_executorch.export(model, sets[0], validation_inputs=[sets[2], sets[1]])
    report = result.report
    assert report["validation"]["passed"] is True
    assert _image_counts(report) == [2, 3, 1]
    assert report["validation"]["eager_repacked_by"] == [PATCH]
    # the planned arena: the patches' feature axis and the grid's (t, h, w) axis are static, and
    # the rotary positions' batch axis is bounded as a batch (it was 512 x 512: 7 GiB, bad_alloc)
    dims = {(d["input"], d["axis"]): d for d in report["bounds"]["dims"]}
    assert ("pixel_values", 1) not in dims and ("image_grid_thw", 1) not in dims
    assert dims[("position_ids", 1)]["max"] == report["bounds"]["max_batch"]
    assert report["memory"]["arena_bytes"] < 2**30


def test_qwen3_vl_deepstack_features_are_one_chunk_too() -> None:
    model, sets = _tiny("qwen3_vl")
    capture = DynamoExporter().capture(model, sets[0])
    fired = [n for n in capture.patches.fired if n.endswith("Qwen3VLModel.get_image_features")]
    assert fired
    program = capture.program.module()
    with torch.no_grad():
        for inputs in sets:
            want = one_chunk_per_split(model(**inputs))
            assert len(want.image_outputs.pooler_output) == 1
            assert all(len(layer) == 1 for layer in want.image_outputs.deepstack_features)
            got = program(**inputs)
            for g, w in zip(pytree.tree_leaves(got), pytree.tree_leaves(want), strict=True):
                torch.testing.assert_close(g, w)


def test_the_patched_method_returns_the_concatenation(qwen2_vl) -> None:
    """Eagerly, under the patch: one chunk, equal to the unpatched chunks concatenated; the
    vision tower's own ``.tolist()`` calls and ``torch.split`` elsewhere are untouched, and both
    are restored afterwards."""
    model, sets = qwen2_vl
    inputs = sets[2]
    args = (inputs["pixel_values"], inputs["image_grid_thw"])
    with torch.no_grad():
        per_image = model.get_image_features(*args).pooler_output
        assert len(per_image) == 3
        tolist, split = torch.Tensor.tolist, torch.split
        with apply_patches("dynamo") as session:
            chunks = model.get_image_features(*args).pooler_output
            assert torch.tensor([3, 4]).tolist() == [3, 4]
            assert len(torch.split(torch.arange(6), [2, 4])) == 2
        assert PATCH in session.fired
    assert torch.Tensor.tolist is tolist and torch.split is split
    assert "tolist" not in vars(torch.Tensor)
    assert len(chunks) == 1
    torch.testing.assert_close(chunks[0], torch.cat(per_image))


def test_deferred_sizes_refuse_any_use_but_the_split() -> None:
    sizes = DeferredSplitSizes(torch.tensor([2, 3]))
    for use in (len, list, lambda s: s[0], lambda s: range(s)):
        with pytest.raises(TypeError, match="only torch.split"):
            use(sizes)


def test_repack_concatenates_chunks_only() -> None:
    a, b = torch.randn(2, 4), torch.randn(3, 4)
    inner = BaseModelOutputWithPooling(last_hidden_state=torch.randn(5, 4), pooler_output=(a, b))
    inner["deepstack_features"] = [(a, b), (b, a)]
    plain = BaseModelOutputWithPooling(last_hidden_state=a, pooler_output=b)
    out = one_chunk_per_split({"image": inner, "text": plain})
    torch.testing.assert_close(out["image"].pooler_output[0], torch.cat([a, b]))
    assert isinstance(out["image"].pooler_output, tuple) and len(out["image"].pooler_output) == 1
    assert [len(layer) for layer in out["image"]["deepstack_features"]] == [1, 1]
    torch.testing.assert_close(out["image"]["deepstack_features"][1][0], torch.cat([b, a]))
    assert out["text"].pooler_output is b  # a tensor field is not a list of chunks


def test_without_the_patch_the_image_count_is_pinned(qwen2_vl) -> None:
    """Documents the model code's ``.tolist()``; when this stops failing, the patch can go."""
    model, sets = qwen2_vl
    with withheld("dynamo", PATCH):
        capture = DynamoExporter().capture(model, sets[0])
    assert capture.output_names.count("image_outputs.pooler_output.1") == 1  # one per image
    with pytest.raises(Exception, match="image_grid_thw"):
        capture.program.module()(**sets[2])


SMOLVLM_PATCH = "dynamo:transformers.models.smolvlm.modeling_smolvlm.SmolVLMModel.get_image_features"


def _smolvlm() -> tuple[torch.nn.Module, list[dict]]:
    """Tiny SmolVLM (the Idefics3 layout) and its input sets at batch 2, 3 and 1: ``pixel_values``
    ``(batch, images, 3, 32, 32)``, the images of a sample split with
    ``features.split(real_images_per_sample.tolist())`` (a method, not ``torch.split``)."""
    tiny = build_tiny_model("smolvlm", forward=True)
    first, second = tiny.inputs.first, tiny.inputs.second
    return tiny.model, [first, second, {k: v[:1] for k, v in first.items()}]


@pytest.mark.parametrize("exporter", [
    export_onnx,
    pytest.param(export_executorch, marks=pytest.mark.slow),  # about 40 s; -m slow
], ids=["onnx", "executorch"])
def test_smolvlm_per_sample_split_keeps_the_batch_dynamic(exporter) -> None:
    model, sets = _smolvlm()
    result = exporter.export(model, sets[0], validation_inputs=sets[1:])
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["pixel_values"][0] for c in report["validation"]["checks"]] == [2, 3, 1]
    assert SMOLVLM_PATCH in report["patches"]["fired"]
    assert report["validation"]["eager_repacked_by"] == [SMOLVLM_PATCH]


def test_without_the_patch_smolvlm_pins_the_batch() -> None:
    model, sets = _smolvlm()
    with withheld("dynamo", SMOLVLM_PATCH), pytest.raises(ExportError):
        export_onnx.export(model, sets[0], validation_inputs=sets[1:])
