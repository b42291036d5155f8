"""Capture-level ("dynamo") patches: packed vision attention, window order, position ids.

Every export here runs through ``torch.export.export`` inside ``apply_patches("dynamo")``, as
``DynamoExporter`` does. Reproduces case 13 (tiny Qwen2-VL vision tower, two packed images;
source: https://github.com/pytorch/pytorch/issues/158786) and variants of its kind: other grids
with the same patch total, video frames, dynamic patch and image counts, and the Qwen2.5-VL window
attention.
"""

from __future__ import annotations

import random

import pytest
import torch
from torch.export import Dim
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

import export_core.workarounds  # noqa: F401  (registers the patches)
from export_core.patching import apply_patches
from export_core.registry import patches_for, resolve_target
from export_core.workarounds.packed_vision_attention import (
    PACKED_ATTENTION_IMPLEMENTATION,
    block_diagonal_mask,
)
from export_core.workarounds.vision_position_ids import position_ids
from export_core.workarounds.vision_window_index import window_index

QWEN2_VL_ATTENTION = "dynamo:transformers.models.qwen2_vl.modeling_qwen2_vl.VisionAttention.forward"
QWEN2_5_VL_ATTENTION = (
    "dynamo:transformers.models.qwen2_5_vl.modeling_qwen2_5_vl.Qwen2_5_VLVisionAttention.forward"
)
QWEN2_5_VL_WINDOW = (
    "dynamo:transformers.models.qwen2_5_vl.modeling_qwen2_5_vl.get_vision_window_index"
)
QWEN2_VL_POSITIONS = "dynamo:transformers.models.qwen2_vl.modeling_qwen2_vl.get_vision_position_ids"

PATCH_DIM = 2 * 2 * 2 * 3  # temporal_patch_size * patch_size**2 * in_channels
CASE_GRID = [[1, 4, 4], [1, 4, 4]]  # case 13: two images of 4x4 patches


def _tower(name: str, depth: int = 2, attn_implementation: str | None = None) -> torch.nn.Module:
    """A tiny random vision tower (patch 2, merge 2, temporal patch 2, 3 channels)."""
    extra = {} if attn_implementation is None else {"attn_implementation": attn_implementation}
    common = dict(
        depth=depth,
        num_heads=4,
        patch_size=2,
        spatial_merge_size=2,
        temporal_patch_size=2,
        in_channels=3,
        **extra,
    )
    if name == "qwen2_vl":
        from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLVisionConfig
        from transformers.models.qwen2_vl.modeling_qwen2_vl import (
            Qwen2VisionTransformerPretrainedModel,
        )

        config = Qwen2VLVisionConfig(embed_dim=32, hidden_size=32, mlp_ratio=2, **common)
        model_cls = Qwen2VisionTransformerPretrainedModel
    elif name == "qwen2_5_vl":
        from transformers.models.qwen2_5_vl.configuration_qwen2_5_vl import (
            Qwen2_5_VLVisionConfig,
        )
        from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (
            Qwen2_5_VisionTransformerPretrainedModel,
        )

        # window of 8 px = 2x2 merged tokens; block 0 windowed, the last block full attention
        config = Qwen2_5_VLVisionConfig(
            hidden_size=32,
            intermediate_size=64,
            out_hidden_size=32,
            window_size=8,
            fullatt_block_indexes=[depth - 1],
            **common,
        )
        model_cls = Qwen2_5_VisionTransformerPretrainedModel
    elif name == "qwen3_vl":
        from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLVisionConfig
        from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLVisionModel

        config = Qwen3VLVisionConfig(
            hidden_size=32,
            intermediate_size=64,
            out_hidden_size=32,
            num_position_embeddings=16,
            deepstack_visual_indexes=[0],
            **common,
        )
        model_cls = Qwen3VLVisionModel
    elif name == "glm4v":
        from transformers.models.glm4v.configuration_glm4v import Glm4vVisionConfig
        from transformers.models.glm4v.modeling_glm4v import Glm4vVisionModel

        config = Glm4vVisionConfig(
            hidden_size=32, intermediate_size=64, out_hidden_size=32, image_size=8, **common
        )
        model_cls = Glm4vVisionModel
    else:  # pragma: no cover - test table typo
        raise ValueError(name)
    torch.manual_seed(0)
    return _Vision(model_cls(config).eval())


class _Vision(torch.nn.Module):
    """``(pixel_values, grid_thw) -> last_hidden_state`` of a vision tower."""

    def __init__(self, tower: torch.nn.Module) -> None:
        super().__init__()
        self.tower = tower

    def forward(self, pixel_values: torch.Tensor, grid_thw: torch.Tensor) -> torch.Tensor:
        return self.tower(pixel_values, grid_thw=grid_thw).last_hidden_state


def _inputs(grid: list[list[int]], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    grid_thw = torch.tensor(grid)
    generator = torch.Generator().manual_seed(seed)
    pixels = torch.randn(int(grid_thw.prod(-1).sum()), PATCH_DIM, generator=generator)
    return pixels, grid_thw


def _export(model: torch.nn.Module, args: tuple, dynamic_shapes=None):
    with apply_patches("dynamo") as session:
        program = torch.export.export(model, args, dynamic_shapes=dynamic_shapes, strict=False)
    return program, session


def _assert_matches_eager(program, model: torch.nn.Module, grids: list[list[list[int]]]) -> None:
    runner = program.module()
    for seed, grid in enumerate(grids):
        args = _inputs(grid, seed)
        with torch.no_grad():
            expected = model(*args)
            got = runner(*args)
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5, msg=f"grid {grid}")


def _patch_dims(images: bool) -> tuple:
    patches = {0: 4 * Dim("merged_tokens", min=2, max=1024)}  # multiple of spatial_merge_size**2
    return (patches, {0: Dim("images", min=1, max=16)} if images else None)


@pytest.fixture(autouse=True, scope="module")
def _imported_targets():
    """Import every patch target once, so per-test timings show export work, not imports."""
    with apply_patches("dynamo"):
        pass


# ── case 13 itself ────────────────────────────────────────────────────────────────────────────


def test_case13_exports_and_equals_eager_for_other_grids_of_same_total():
    model = _tower("qwen2_vl")
    program, session = _export(model, _inputs(CASE_GRID))
    assert QWEN2_VL_ATTENTION in session.fired
    _assert_matches_eager(
        program,
        model,
        [CASE_GRID, [[1, 2, 4], [1, 4, 6]], [[1, 8, 2], [1, 2, 8]], [[2, 2, 4], [1, 4, 4]]],
    )


def test_case13_export_fails_without_the_patch():
    model = _tower("qwen2_vl", depth=1)
    with pytest.raises(GuardOnDataDependentSymNode):
        torch.export.export(model, _inputs(CASE_GRID), strict=False)


def test_patched_attributes_are_restored_and_routing_leaves_no_trace():
    before = {}
    for record in patches_for("dynamo"):
        try:
            target = resolve_target(record.target)
        except LookupError:
            continue
        before[record.name] = (target, target.owner.__dict__.get(target.attribute))
    model = _tower("qwen2_vl", depth=1)
    attention = model.tower.blocks[0].attn
    config = attention.config

    with apply_patches("dynamo") as session:
        for name in before:
            assert name in session.installed
        model(*_inputs(CASE_GRID))

    from transformers.modeling_utils import AttentionInterface

    assert QWEN2_VL_ATTENTION in session.fired
    for name, (target, stored) in before.items():
        assert target.owner.__dict__.get(target.attribute) is stored, name
    assert attention.config is config
    assert config._attn_implementation != PACKED_ATTENTION_IMPLEMENTATION
    assert PACKED_ATTENTION_IMPLEMENTATION not in AttentionInterface._global_mapping


def test_attributes_are_restored_when_the_export_raises():
    from transformers.models.qwen2_vl.modeling_qwen2_vl import VisionAttention

    original = VisionAttention.__dict__["forward"]
    with pytest.raises(RuntimeError, match="boom"):
        with apply_patches("dynamo"):
            assert VisionAttention.__dict__["forward"] is not original
            raise RuntimeError("boom")
    assert VisionAttention.__dict__["forward"] is original


# ── variants of the kind ──────────────────────────────────────────────────────────────────────


def test_qwen2_vl_dynamic_patch_and_image_counts():
    model = _tower("qwen2_vl", depth=1)
    program, session = _export(model, _inputs(CASE_GRID), _patch_dims(images=True))
    assert {QWEN2_VL_ATTENTION, QWEN2_VL_POSITIONS} <= set(session.fired)
    _assert_matches_eager(
        program,
        model,
        [[[1, 4, 8]], [[1, 2, 4], [1, 2, 4], [1, 4, 4]], [[1, 6, 6], [2, 2, 2], [1, 8, 4]]],
    )


def test_qwen2_5_vl_window_attention_exports_and_equals_eager():
    model = _tower("qwen2_5_vl")
    program, session = _export(model, _inputs(CASE_GRID), _patch_dims(images=False))
    assert {QWEN2_5_VL_ATTENTION, QWEN2_5_VL_WINDOW} <= set(session.fired)
    _assert_matches_eager(
        program,
        model,
        [CASE_GRID, [[1, 2, 4], [1, 4, 6]], [[2, 2, 4], [1, 6, 6]], [[1, 2, 2], [1, 2, 4]]],
    )


def test_qwen2_5_vl_export_fails_without_the_patches():
    model = _tower("qwen2_5_vl", depth=1)
    with pytest.raises(GuardOnDataDependentSymNode):
        torch.export.export(model, _inputs(CASE_GRID), strict=False)


@pytest.mark.parametrize("name", ["qwen3_vl", "glm4v"])
def test_other_packed_towers_export_and_equal_eager(name):
    model = _tower(name, depth=1)
    program, session = _export(model, _inputs(CASE_GRID))
    assert any(fired.endswith("VisionAttention.forward") for fired in session.fired)
    _assert_matches_eager(program, model, [CASE_GRID, [[1, 2, 4], [1, 4, 6]]])


@pytest.mark.parametrize("name", ["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "glm4v"])
@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
def test_routed_attention_equals_the_segment_loop_in_eager_mode(name, implementation):
    model = _tower(name, depth=1, attn_implementation=implementation)
    args = _inputs([[1, 2, 4], [1, 4, 6], [1, 2, 2]])
    with torch.no_grad():
        expected = model(*args)
        with apply_patches("dynamo") as session:
            got = model(*args)
    assert any(fired.endswith("Attention.forward") for fired in session.fired)
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


# ── the loop-free helpers against their upstream originals ───────────────────────────────────


def _random_grids(count: int, merges: tuple[int, ...]):
    rng = random.Random(0)
    for _ in range(count):
        merge = rng.choice(merges)
        images = rng.randint(1, 4)
        grid = [
            [rng.randint(1, 3), merge * rng.randint(1, 7), merge * rng.randint(1, 7)]
            for _ in range(images)
        ]
        yield torch.tensor(grid), merge


def test_window_index_equals_upstream():
    from transformers.vision_utils import get_vision_window_index

    for grid, merge in _random_grids(150, (1, 2)):
        for window, patch in ((8, 2), (4, 1), (112, 14), (6, 1)):
            expected = get_vision_window_index(grid, merge, window, patch)
            got = window_index(grid, merge, window, patch)
            for g, e in zip(got, expected, strict=True):
                assert g.dtype == e.dtype
                assert torch.equal(g, e), (grid.tolist(), merge, window, patch)


def test_position_ids_equal_upstream():
    from transformers.vision_utils import get_vision_position_ids

    for grid, merge in _random_grids(150, (1, 2, 3)):
        for merge_arg in (merge, torch.full((grid.shape[0],), merge)):
            for temporal in (False, True):
                expected = get_vision_position_ids(grid, merge_arg, include_temporal=temporal)
                got = position_ids(grid, merge_arg, include_temporal=temporal)
                assert got.dtype == expected.dtype
                assert torch.equal(got, expected), (grid.tolist(), merge, temporal)


def test_precomputed_inputs_are_popped_like_upstream():
    grid = torch.tensor(CASE_GRID)
    given = torch.zeros(32, 2, dtype=torch.long)
    kwargs = {"position_ids": given}
    assert position_ids(grid, 2, kwargs=kwargs) is given and not kwargs
    order, cu = torch.arange(8), torch.tensor([0, 32], dtype=torch.int32)
    kwargs = {"window_index": order, "cu_window_seqlens": cu}
    got_order, got_cu = window_index(grid, 2, 8, 2, kwargs=kwargs)
    assert got_order is order and got_cu is cu and not kwargs


def test_block_diagonal_mask():
    cu = torch.tensor([0, 2, 5, 6], dtype=torch.int32)
    mask = block_diagonal_mask(cu, cu, 6, 6)
    segment = torch.tensor([0, 0, 1, 1, 1, 2])
    assert mask.shape == (1, 1, 6, 6) and mask.dtype == torch.bool
    assert torch.equal(mask[0, 0], segment[:, None] == segment[None, :])


def test_block_diagonal_mask_exports_with_a_dynamic_segment_count():
    class Mask(torch.nn.Module):
        def forward(self, hidden: torch.Tensor, cu_seqlens: torch.Tensor) -> torch.Tensor:
            length = hidden.shape[0]
            return block_diagonal_mask(cu_seqlens, cu_seqlens, length, length)

    cu = torch.tensor([0, 16, 32], dtype=torch.int32)
    dims = ({0: Dim("length", min=2, max=512)}, {0: Dim("boundaries", min=2, max=65)})
    program = torch.export.export(Mask(), (torch.zeros(32), cu), dynamic_shapes=dims, strict=False)
    for bounds in ([0, 20], [0, 3, 4, 9]):  # one segment; three segments
        cu = torch.tensor(bounds, dtype=torch.int32)
        hidden = torch.zeros(bounds[-1])
        assert torch.equal(program.module()(hidden, cu), Mask()(hidden, cu))
