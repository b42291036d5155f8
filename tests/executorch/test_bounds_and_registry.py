"""Cheap checks of the bound choice and of the registered ExecuTorch workarounds (no lowering)."""

from __future__ import annotations

import pytest
import torch
from torch.export import Dim

from export_core.errors import InputError
from export_core.registry import describe
from export_executorch import workarounds
from export_executorch.bounds import apply_dim_bounds, axis_role, dim_limits


class _Config:
    def __init__(self, **kw: object) -> None:
        self.__dict__.update(kw)


def test_limits_from_config_capped_and_overridden() -> None:
    small = dim_limits(_Config(max_position_embeddings=128, image_size=32))
    assert (small.max_batch, small.max_seq, small.max_image_size) == (8, 128, 32)
    assert small.sources == {"max_batch": "default", "max_seq": "config.max_position_embeddings",
                             "max_image_size": "config.image_size", "max_audio_samples": "default",
                             "max_frames": "default"}
    huge = dim_limits(_Config(max_position_embeddings=131072))
    assert huge.max_seq == 512 and huge.sources["max_seq"].startswith("default cap")
    nested = dim_limits(_Config(text_config=_Config(n_positions=64)))
    assert nested.max_seq == 64
    plain = dim_limits(None, max_batch=3, max_seq=40)
    assert (plain.max_batch, plain.max_seq, plain.max_image_size) == (3, 40, 224)
    assert plain.sources["max_batch"] == plain.sources["max_seq"] == "option"
    with pytest.raises(InputError, match="max_batch must be at least 3 to keep the axis dynamic"):
        dim_limits(None, max_batch=2)


def test_axis_roles() -> None:
    ids, pixels = torch.zeros(2, 8, dtype=torch.long), torch.zeros(2, 3, 32, 32)
    assert [axis_role("input_ids", ids, a) for a in range(2)] == ["batch", "sequence"]
    assert [axis_role("pixel_values", pixels, a) for a in range(4)] == [
        "batch", "sequence", "image", "image"]
    wave, multi = torch.zeros(2, 3200), torch.zeros(2, 1, 3200)
    assert [axis_role("input_values", wave, a) for a in range(2)] == ["batch", "audio"]
    assert [axis_role("input_values", multi, a) for a in range(3)] == ["batch", "sequence", "audio"]
    spectrogram = torch.zeros(2, 512, 128)  # (batch, frames, mel): frames are not samples
    assert [axis_role("input_values", spectrogram, a) for a in range(2)] == ["batch", "sequence"]
    # a key/value cache (batch, kv_heads, past_sequence, head_dim) is 4-d float but holds tokens:
    # as an image its past axis was capped at 224 and decode failed at past 225 (0x12)
    key = torch.zeros(2, 2, 10, 8)
    assert axis_role("past_key_values.0.key", key, 2) == "sequence"
    # multimodal rotary positions (sections, batch, sequence): as a sequence its batch axis was
    # bounded at max_seq, and the shared batch symbol planned a 7 GiB arena for GLM-4V
    mrope = torch.zeros(3, 2, 8, dtype=torch.long)
    assert [axis_role("position_ids", mrope, a) for a in (1, 2)] == ["batch", "sequence"]


def test_audio_cap_from_sampling_rate_or_default() -> None:
    assert dim_limits(_Config(sampling_rate=24000)).max_audio_samples == 24000
    assert dim_limits(_Config(sampling_rate=24000)).sources["max_audio_samples"] == (
        "1 s at config.sampling_rate=24000")
    assert dim_limits(None).max_audio_samples == 16000


def test_frame_cap_from_config_or_default() -> None:
    assert dim_limits(_Config(num_frames=16)).max_frames == 16
    assert dim_limits(_Config(frames_per_clip=8)).sources["max_frames"] == "config.frames_per_clip"
    assert dim_limits(_Config(vision_config=_Config(num_frames=32))).max_frames == 32
    assert dim_limits(None).max_frames == 64
    assert dim_limits(None, max_frames=12).sources["max_frames"] == "option"
    video = torch.zeros(2, 16, 3, 32, 32)
    assert [axis_role("pixel_values", video, a) for a in range(5)] == [
        "batch", "frames", "image", "image", "image"]
    assert axis_role("pixel_values", torch.zeros(2, 3, 32, 32), 1) == "sequence"
    assert dim_limits(None, max_audio_samples=800).sources["max_audio_samples"] == "option"


def test_bounds_written_into_the_program() -> None:
    class Add(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return x + y.sum(-1, keepdim=True)

    x, y = torch.randn(3, 5), torch.randn(3, 7)
    ep = torch.export.export(Add(), (x, y), dynamic_shapes=({0: Dim.AUTO, 1: Dim.AUTO},
                                                             {0: Dim.AUTO, 1: Dim.AUTO}))
    plan = apply_dim_bounds(ep, ["x", "y"], dim_limits(None, max_batch=4, max_seq=16))
    got = {(d.input, d.axis): (d.role, d.min, d.max) for d in plan.dims}
    assert got == {("x", 0): ("batch", 1, 4), ("x", 1): ("sequence", 1, 16),
                   ("y", 0): ("batch", 1, 4), ("y", 1): ("sequence", 1, 16)}
    assert sorted((int(r.lower), int(r.upper)) for r in ep.range_constraints.values()) == [
        (1, 4), (1, 16), (1, 16)]
    with pytest.raises(InputError, match=r"max_seq=4 is below the example size 5 of x\[1\]"):
        apply_dim_bounds(ep, ["x", "y"], dim_limits(None, max_seq=4))


def _waveform_program() -> torch.export.ExportedProgram:
    class Frames(torch.nn.Module):
        def forward(self, input_values: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return (input_values * attention_mask).unfold(-1, 400, 320).mean(-1)

    wave, mask = torch.randn(2, 3200), torch.ones(2, 3200, dtype=torch.long)
    auto = {0: Dim.AUTO, 1: Dim.AUTO}
    return torch.export.export(Frames(), (wave, mask), dynamic_shapes=(auto, auto))


def test_waveform_and_its_mask_get_the_audio_cap() -> None:
    ep = _waveform_program()
    plan = apply_dim_bounds(ep, ["input_values", "attention_mask"],
                            dim_limits(_Config(max_position_embeddings=128, sampling_rate=16000)))
    got = {(d.input, d.axis): (d.role, d.max) for d in plan.dims}
    assert got == {("input_values", 0): ("batch", 8), ("input_values", 1): ("audio", 16000),
                   ("attention_mask", 0): ("batch", 8), ("attention_mask", 1): ("sequence", 16000)}


def test_derived_cap_below_the_example_is_raised_but_an_option_is_not() -> None:
    ep = _waveform_program()
    plan = apply_dim_bounds(ep, ["input_values", "attention_mask"],
                            dim_limits(_Config(sampling_rate=1000)))  # 1 s = 1000 samples
    assert plan.limits.max_audio_samples == 3200
    assert plan.limits.sources["max_audio_samples"] == (
        "example size of input_values[1] (the cap 1000 from 1 s at config.sampling_rate=1000 is smaller)")
    assert {d.max for d in plan.dims if d.axis == 1} == {3200}
    with pytest.raises(InputError, match=r"max_audio_samples=1000 is below the example size 3200"):
        apply_dim_bounds(_waveform_program(), ["input_values", "attention_mask"],
                         dim_limits(None, max_audio_samples=1000))


def test_workarounds_are_registered_with_reason_and_upstream() -> None:
    assert workarounds.__all__ == ["EXECUTORCH_STAGES", "complex_as_real",
                                   "contiguous_resize_inputs", "dim_bounds",
                                   "dim_order_strides", "exact_quotient_bounds",
                                   "floored_remainder", "item_scalars",
                                   "list_return_validator", "long_indices", "lstm_scan",
                                   "missing_kernels", "negative_padding", "partition_sort",
                                   "partitioner_checks", "python_sym_ops", "retrace_contiguity",
                                   "scan_buffers", "sym_mod_sign", "symbolic_empty",
                                   "view_after_sdpa", "view_copy_fake_rules", "view_dynamism",
                                   "xnnpack_attention", "xnnpack_gelu_tanh",
                                   "xnnpack_max_dim", "xnnpack_partition_merge",
                                   "xnnpack_passthrough", "xnnpack_prelu_rank",
                                   "xnnpack_reshape_dims"]
    rows = {r.name: r for r in describe(["executorch"])}
    patch = rows["executorch:executorch.exir.verification.arg_validator.EdgeOpArgValidator.call_function"]
    assert patch.kind == "patch" and patch.resolvable, patch.problem
    assert patch.stage == "executorch_patches" and patch.stage_number == 3
    fix = rows["pin_attention_layout_for_views"]
    assert fix.kind == "fx_node_fix" and fix.stage == "fx_node_fixes"
    assert fix.upstream == "https://github.com/pytorch/pytorch/issues/136543"
    bounds = rows["bound_dynamic_dims"]
    assert bounds.kind == "fx_program_fix" and bounds.stage == "fx_program_fixes"
    for name in ("decompose_missing_kernels", "admit_python_sym_ops",
                 "item_as_local_scalar_dense", "complex_as_real"):
        assert rows[name].kind == "fx_program_fix" and rows[name].stage == "fx_program_fixes"
    assert rows["symbolic_empty_as_zeros"].kind == "fx_node_fix"
    attention = rows["attention_in_delegated_ops"]
    assert attention.kind == "fx_node_fix" and attention.stage == "fx_node_fixes"
    assert attention.upstream == "https://github.com/pytorch/executorch/issues/4461"
    assert rows["complex_as_real"].upstream == "https://github.com/pytorch/executorch/issues/5381"
    for name in ("python_sign_sym_mod", "crop_negative_padding"):
        assert rows[name].kind == "fx_node_fix" and rows[name].stage == "fx_node_fixes"
    sort = rows["executorch:executorch.exir.backend.backend_api._create_partitions_in_graph_module"]
    assert sort.kind == "patch" and sort.stage == "executorch_patches" and sort.resolvable
    merge = rows["executorch.xnnpack:executorch.exir.backend.canonical_partitioners"
                 ".group_partitioner.GroupBasedPartitioner._merge_partitions"]
    assert merge.kind == "patch" and merge.stage == "executorch_patches" and merge.resolvable
    retrace = rows["executorch:torch.fx.passes.shape_prop.is_contiguous_for_memory_format_or_false"]
    assert retrace.kind == "patch" and retrace.stage == "torch_patches" and retrace.resolvable
    max_dim = rows["executorch.xnnpack:executorch.backends.xnnpack.partition.config.node_configs"
                   ".MaxDimConfig.check_constraints"]
    assert max_dim.kind == "patch" and max_dim.resolvable, max_dim.problem
    assert all(r.reason and r.upstream.startswith("https://github.com/") for r in rows.values())


def test_arena_warning_only_above_one_gib() -> None:
    from export_executorch.memory import arena_warning

    assert arena_warning(354 << 20, {"max_batch": 8, "max_seq": 512}) is None
    line = arena_warning(3 << 30, {"max_batch": 8, "max_seq": 512})
    assert line is not None and line.startswith("the program plans 3.0 GiB")
    assert "--max-batch" in line
    audio = {"max_batch": 8, "max_audio_samples": 160000,
             "dims": [{"role": "batch"}, {"role": "audio"}]}
    line = arena_warning(3 << 30, audio)
    assert line is not None and "max_batch=8, max_audio_samples=160000" in line
    assert line.endswith("lower --max-batch / --max-audio-samples for a smaller arena")


def test_infinite_range_ends_are_not_bounds() -> None:
    """An unbacked size whose range is unbounded below too (``-oo``) got a bound: sympy's
    ``int(-oo)`` raised ``AttributeError`` inside to_executorch (Mimi's decoder)."""
    import sympy
    from torch.utils._sympy.numbers import int_oo

    from export_executorch.bounds import _as_int

    assert [_as_int(x) for x in (int_oo, -int_oo, sympy.oo, -sympy.oo)] == [None] * 4
    assert [_as_int(sympy.Integer(5)), _as_int(3)] == [5, 3]


def test_video_frames_are_bounded_by_the_config() -> None:
    """A tiny VideoMAE (16 frames of 32 x 32, tubelets of 2): bounded as a sequence (512
    frames), its attention over frames x patches planned 34 GB per tensor and the program did
    not load; with the frames role the cap is ``config.num_frames`` and the arena stays small."""
    import export_executorch
    from export_sweep.zoo.build import build_tiny_model

    model = build_tiny_model("videomae").model
    g = torch.Generator().manual_seed(0)
    video = [torch.randn(b, 16, 3, 32, 32, generator=g) for b in (2, 3, 1)]
    result = export_executorch.export(model, {"pixel_values": video[0]},
                                      validation_inputs=[{"pixel_values": v} for v in video[1:]])
    report = result.report
    assert report["validation"]["passed"] is True
    frames = [d for d in report["bounds"]["dims"] if d["role"] == "frames"]
    assert [(d["input"], d["axis"], d["max"]) for d in frames] == [("pixel_values", 1, 16)]
    assert report["bounds"]["sources"]["max_frames"] == "config.num_frames"
    assert report["memory"]["arena_bytes"] < 1 << 30
