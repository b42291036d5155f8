"""Tiny-model zoo: representative builds, shrink rules, isolation, and the full sweep."""

from __future__ import annotations

import json
import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from export_sweep.results import load_results  # noqa: E402
from export_sweep.zoo import (  # noqa: E402
    Job,
    Modality,
    WorkerPool,
    base_model_types,
    build_tiny_model,
    build_zoo,
    load_tiny_model,
    model_modality,
    run_isolated,
    save_tiny_model,
    shrink_config_dict,
    summarize,
    zoo_cache_root,
)

REPRESENTATIVE = [
    "bert",
    "gpt2",
    "llama",
    "vit",
    "whisper",
    "t5",
    "clip",
    "wav2vec2",
    "resnet",
    "qwen2_vl",
]
MAX_TINY_PARAMETERS = 2_000_000  # 8 MB of float32


def _leaves(out: object) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for v in out.values() for t in _leaves(v)]
    if isinstance(out, list | tuple):
        return [t for v in out for t in _leaves(v)]
    if hasattr(out, "to_tuple"):
        return _leaves(out.to_tuple())
    return []


# ── Representative builds ────────────────────────────────────────────────────────────────────
@pytest.mark.parametrize("model_type", REPRESENTATIVE)
def test_representative_model_builds_and_forwards(model_type: str) -> None:
    tiny = build_tiny_model(model_type)
    assert not tiny.model.training
    assert tiny.num_parameters < MAX_TINY_PARAMETERS, tiny.num_parameters
    assert len(tiny.outputs) == len(tiny.inputs.sets) == 2
    for out in tiny.outputs:
        leaves = _leaves(out)
        assert leaves, "forward returned no tensor"
        assert all(torch.isfinite(t).all() for t in leaves if t.is_floating_point())


@pytest.mark.parametrize("model_type", ["bert", "llama", "vit", "whisper", "qwen2_vl"])
def test_two_input_sets_differ_in_shape_and_avoid_size_one(model_type: str) -> None:
    tiny = build_tiny_model(model_type, forward=False)
    first, second = tiny.inputs.sets
    assert tiny.inputs.shapes_differ
    assert first.keys() == second.keys()
    for name, value in first.items():
        if isinstance(value, torch.Tensor) and value.dim() > 0:
            assert value.shape[0] >= 2, (name, value.shape)  # torch.export specialises 0 / 1


def test_text_inputs_have_padded_row_and_token_types() -> None:
    tiny = build_tiny_model("bert", forward=False)
    inputs = tiny.inputs.first
    mask = inputs["attention_mask"]
    assert mask[0].all() and not mask[-1].all()
    assert inputs["token_type_ids"].max() == 1
    vocab = tiny.config.vocab_size
    assert int(inputs["input_ids"].max()) < vocab


def test_multimodal_image_tokens_match_features() -> None:
    tiny = build_tiny_model("qwen2_vl", forward=False)
    ids = tiny.inputs.first["input_ids"]
    n_tokens = int((ids == tiny.config.image_token_id).sum())
    grid = tiny.inputs.first["image_grid_thw"]
    merge = tiny.config.vision_config.spatial_merge_size
    assert n_tokens == int(grid.prod(-1).sum()) // merge**2 > 0


def test_encoder_decoder_gets_decoder_input_ids() -> None:
    tiny = build_tiny_model("t5", forward=False)
    assert "decoder_input_ids" in tiny.inputs.first


def test_model_class_builds_a_head_instead_of_the_base_model() -> None:
    tiny = build_tiny_model("electra", model_class="ElectraForSequenceClassification")
    assert tiny.class_name == type(tiny.model).__name__ == "ElectraForSequenceClassification"
    assert tiny.outputs and tiny.outputs[0].logits.shape[-1] == tiny.config.num_labels
    assert build_tiny_model("electra", forward=False).class_name == "ElectraModel"


def test_cache_root_reads_the_new_then_the_old_variable(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("EXPORT_SWEEP_ZOO_CACHE", raising=False)
    monkeypatch.setenv("EXPORT_CORE_ZOO_CACHE", str(tmp_path / "old"))
    assert zoo_cache_root() == tmp_path / "old"
    monkeypatch.setenv("EXPORT_SWEEP_ZOO_CACHE", str(tmp_path / "new"))
    assert zoo_cache_root() == tmp_path / "new"
    monkeypatch.delenv("EXPORT_SWEEP_ZOO_CACHE")
    monkeypatch.delenv("EXPORT_CORE_ZOO_CACHE")
    assert zoo_cache_root().parts[-2:] == ("export_sweep", "zoo")


def test_save_and_reload_round_trip(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EXPORT_SWEEP_ZOO_CACHE", str(tmp_path / "cache"))
    directory = save_tiny_model("llama", tmp_path / "llama")
    assert (directory / "config.json").is_file()
    assert (directory / "model.safetensors").is_file()
    assert (directory / "model.safetensors").stat().st_size < 4 * MAX_TINY_PARAMETERS
    model, inputs = load_tiny_model(directory)
    assert len(inputs.sets) == 2
    with torch.no_grad():
        out = model(**inputs.first)
    assert out.last_hidden_state.shape[:2] == inputs.first["input_ids"].shape
    # The second call reuses the cache instead of rebuilding.
    cached = save_tiny_model("llama")
    assert cached.is_relative_to(tmp_path / "cache") and cached.name == "llama"
    assert (cached / "zoo.json").is_file()


# ── Catalog and shrink rules ─────────────────────────────────────────────────────────────────
def test_catalog_covers_base_mapping_with_modalities() -> None:
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    types = base_model_types()
    assert set(types) == set(MODEL_MAPPING_NAMES)
    assert model_modality("bert") == Modality.TEXT
    assert model_modality("vit") == Modality.VISION
    assert model_modality("whisper") == Modality.AUDIO
    assert model_modality("clip") == Modality.MULTIMODAL
    assert model_modality("t5") == Modality.ENCODER_DECODER
    assert model_modality("videomae") == Modality.VIDEO


def test_shrink_keeps_divisibility_and_equalities() -> None:
    d = {
        "model_type": "demo",
        "hidden_size": 4096,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "layer_types": ["sliding_attention"] * 5 + ["full_attention"] + ["sliding_attention"] * 26,
        "vocab_size": 128256,
        "bos_token_id": 128000,
        "eos_token_id": [128001, 128009],
        "pad_token_id": 0,
        "rope_parameters": {"rope_type": "default", "mrope_section": [16, 24, 24]},
        "vision_config": {
            "hidden_size": 1280,
            "out_hidden_size": 4096,
            "image_size": 336,
            "patch_size": 14,
            "num_heads": 16,
        },
    }
    s = shrink_config_dict(d)
    assert s["hidden_size"] % s["num_attention_heads"] == 0
    assert s["num_attention_heads"] % s["num_key_value_heads"] == 0
    assert s["num_key_value_heads"] < s["num_attention_heads"]  # GQA stays GQA
    assert s["head_dim"] * s["num_attention_heads"] == s["hidden_size"]
    assert s["num_hidden_layers"] == len(s["layer_types"]) == 2
    assert set(s["layer_types"]) == {"sliding_attention", "full_attention"}
    assert all(0 <= t < s["vocab_size"] for t in [s["bos_token_id"], *s["eos_token_id"]])
    assert len({s["bos_token_id"], *s["eos_token_id"], s["pad_token_id"]}) == 4
    assert sum(s["rope_parameters"]["mrope_section"]) == s["head_dim"] // 2
    # Equal originals stay equal: the projector output matches the text width.
    assert s["vision_config"]["out_hidden_size"] == s["hidden_size"]
    assert s["vision_config"]["image_size"] % s["vision_config"]["patch_size"] == 0
    assert d["hidden_size"] == 4096  # input untouched


@pytest.mark.parametrize("layers", [2, 4])
def test_shrink_scales_kv_shared_layers_with_the_stack(layers: int) -> None:
    """Gemma-3n's last 15 of 35 layers reuse the cache of an earlier layer of their type; a count
    clamped to the new stack (15 -> 2) left no layer producing a cache, the config raised and the
    zoo fell back to all 35 layers."""
    from dataclasses import replace

    from transformers import CONFIG_MAPPING

    from export_sweep.zoo.shrink import TARGETS

    config_class = CONFIG_MAPPING["gemma3n_text"]
    s = shrink_config_dict(config_class().to_dict(), model_type="gemma3n_text",
                           targets=replace(TARGETS, layers=layers))
    assert s["num_hidden_layers"] == layers
    shared = s["num_kv_shared_layers"]
    assert 0 <= shared < layers
    assert set(s["layer_types"][: layers - shared]) == set(s["layer_types"])
    modes = config_class.from_dict(s).kv_sharing_modes  # raised before
    assert modes.count("reuse") == shared
    if layers == 4:
        assert shared > 0  # the sharing is still exercised where the stack allows it


def test_gemma3n_text_builds_on_the_default_rung() -> None:
    tiny = build_tiny_model("gemma3n_text")
    assert tiny.shrink == "default"
    assert tiny.model.config.num_hidden_layers == 2


# ── Isolation ────────────────────────────────────────────────────────────────────────────────
def test_isolated_job_ok_and_raising() -> None:
    ok = run_isolated("math:sqrt", 16.0, timeout_s=60)
    assert ok.status == "ok" and ok.value == 4.0
    assert ok.peak_rss_mb is None or ok.peak_rss_mb > 0
    bad = run_isolated("math:sqrt", -1.0, timeout_s=60)
    assert bad.status == "fail"
    assert bad.error is not None and bad.error.startswith("ValueError")


def test_isolation_catches_over_memory_job() -> None:
    result = run_isolated("builtins:bytearray", 8 * 1024**3, memory_mb=256, timeout_s=60)
    assert result.status == "oom", result


def test_isolation_catches_crash_and_timeout() -> None:
    crash = run_isolated("os:abort", timeout_s=60)
    assert crash.status == "fail" and crash.error_type == "WorkerCrash", crash
    slow = run_isolated("time:sleep", 60, timeout_s=2)
    assert slow.status == "timeout", slow
    assert slow.seconds < 30


def test_pool_survives_bad_jobs() -> None:
    jobs = [
        Job("os:abort", key="crash"),
        Job("builtins:bytearray", (8 * 1024**3,), key="oom"),
        Job("math:sqrt", (9.0,), key="ok1"),
        Job("math:factorial", (5,), key="ok2"),
    ]
    pool = WorkerPool(2, memory_mb=256, timeout_s=60, preload=())
    results = {job.key: res for job, res in pool.imap_unordered(jobs)}
    assert results["crash"].status == "fail"
    assert results["oom"].status == "oom"
    assert results["ok1"].value == 3.0 and results["ok2"].value == 120


@pytest.mark.slow
def test_build_zoo_records_and_resumes(tmp_path) -> None:
    out = tmp_path / "results.json"
    lines: list[str] = []
    build_zoo(["bert", "resnet"], out, workers=1, progress=lines.append)
    data = load_results(out)
    assert set(data["results"]) == {"bert", "resnet"}
    assert all(r["status"] == "ok" and r["forward_ok"] for r in data["results"].values())
    lines.clear()
    build_zoo(["bert", "resnet"], out, workers=1, progress=lines.append)
    assert lines[0].startswith("zoo: 0 to build")


# ── The whole zoo ────────────────────────────────────────────────────────────────────────────
@pytest.mark.slow
@pytest.mark.sweep
def test_full_zoo_build_rate(tmp_path) -> None:
    out = os.environ.get("ZOO_RESULTS") or str(tmp_path / "zoo-results.json")
    types = base_model_types()
    data = build_zoo(types, out, workers=2)
    summary = summarize(data, types)
    print(summary.format())
    failed = {t: r.get("reason") for t, r in data["results"].items() if r.get("status") != "ok"}
    assert all(reason for reason in failed.values()), "every failure must carry a reason"
    assert summary.rate >= 0.85, json.dumps(summary.failures, indent=1)[:4000]


# ── The zoo's command line (export-sweep zoo = python -m export_sweep.zoo) ──────────────────────
def test_zoo_commands_share_the_sweep_cli(tmp_path, capsys) -> None:
    import subprocess
    import sys

    from export_sweep.cli import main
    from export_sweep.results import write_results

    results = tmp_path / "zoo-results.json"
    write_results(results, {"versions": {}, "results": {
        "bert": {"status": "ok", "forward_ok": True, "modality": "text", "seconds": 1.0},
        "nope": {"status": "fail", "forward_ok": False, "modality": "vision", "seconds": 0.5,
                 "error": "ZooBuildError: [config] nope: default config: KeyError: 'nope'"},
    }})
    assert main(["zoo", "report", str(results)]) == 0
    out = capsys.readouterr().out
    assert "built (eager forward ok): 1/2 = 50.0%" in out
    assert "(1) config: default config: KeyError: '…'\n      nope" in out
    assert main(["zoo", "build"]) == 2
    assert "nothing to build" in capsys.readouterr().err
    proc = subprocess.run([sys.executable, "-m", "export_sweep.zoo", "list", "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {row["model_type"]: row for row in json.loads(proc.stdout)}
    assert rows["bert"]["model_class"] == "BertModel" and rows["bert"]["modality"] == "text"


def test_zero_initialised_linears_get_random_weights() -> None:
    from export_sweep.zoo.build import _randomize_zero_linears

    router, proj = torch.nn.Linear(8, 4, bias=False), torch.nn.Linear(8, 8)
    torch.nn.init.zeros_(router.weight)
    before = proj.weight.clone()
    model = torch.nn.ModuleDict({"router": router, "proj": proj})
    model.register_parameter("cls_token", torch.nn.Parameter(torch.zeros(1, 8)))
    assert _randomize_zero_linears(model, seed=0) == ["router.weight"]
    assert router.weight.any() and 0 < router.weight.std() < 0.05
    assert torch.equal(proj.weight, before) and not model.cls_token.any()
    again = torch.nn.Linear(8, 4, bias=False)
    torch.nn.init.zeros_(again.weight)
    _randomize_zero_linears(torch.nn.ModuleDict({"router": again}), seed=0)
    assert torch.equal(again.weight, router.weight)  # seeded


def test_norms_initialised_near_zero_get_unit_scales() -> None:
    from export_sweep.zoo.build import _unit_scale_norms

    degenerate, sound = torch.nn.BatchNorm2d(4), torch.nn.LayerNorm(8)
    group, zero_centred = torch.nn.GroupNorm(2, 4), torch.nn.Linear(4, 4)
    torch.nn.init.normal_(degenerate.weight, std=0.01)  # RT-DETR's encoder initialisation
    torch.nn.init.normal_(sound.weight, mean=1.0, std=0.02)
    torch.nn.init.zeros_(group.weight)
    before = sound.weight.clone()
    bias = degenerate.bias.clone()
    model = torch.nn.ModuleDict({"bn": degenerate, "ln": sound, "gn": group, "proj": zero_centred})
    assert _unit_scale_norms(model) == ["bn.weight", "gn.weight"]
    assert torch.equal(degenerate.weight, torch.ones(4)) and torch.equal(group.weight, torch.ones(4))
    assert torch.equal(degenerate.bias, bias) and torch.equal(degenerate.running_var, torch.ones(4))
    assert torch.equal(sound.weight, before)
    assert _unit_scale_norms(model) == []  # idempotent


class _FrozenBatchNorm2d(torch.nn.Module):
    """A DETR-style frozen batch norm: statistics as buffers, no ``torch.nn`` base class."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.register_buffer("weight", torch.ones(channels))
        self.register_buffer("bias", torch.zeros(channels))
        self.register_buffer("running_mean", torch.zeros(channels))
        self.register_buffer("running_var", torch.ones(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.weight * (self.running_var + 1e-5).rsqrt()
        shift = self.bias - self.running_mean * scale
        return x * scale.view(1, -1, 1, 1) + shift.view(1, -1, 1, 1)


def _shrinking_backbone() -> torch.nn.Sequential:
    """Convolutions initialised like projections (N(0, 0.01)), each followed by a batch norm,
    down to a 1x1 feature map: the features shrink about tenfold per layer."""
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for i in range(6):
        conv = torch.nn.Conv2d(3 if i == 0 else 16, 16, 3, stride=2 if i % 2 else 1, padding=1)
        torch.nn.init.normal_(conv.weight, std=0.01)
        torch.nn.init.zeros_(conv.bias)
        norm = _FrozenBatchNorm2d(16) if i % 2 else torch.nn.BatchNorm2d(16)
        layers += [conv, norm, torch.nn.ReLU()]
    layers += [torch.nn.AdaptiveAvgPool2d(1), torch.nn.BatchNorm2d(16)]
    return torch.nn.Sequential(*layers).eval()


def test_batch_norms_are_calibrated_to_order_one_features() -> None:
    import copy

    from export_sweep.zoo.build import _calibrate_batch_norms

    class Wrapper(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = _shrinking_backbone()

        def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
            return self.body(pixel_values)

    model = Wrapper().eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        before = model(x)
    assert before.abs().max() < 1e-6  # the degenerate regime: six tenfold shrinks
    names = _calibrate_batch_norms(model, {"pixel_values": x})
    assert names == [f"body.{i}" for i in (1, 4, 7, 10, 13, 16, 19)]  # in the order they ran
    with torch.no_grad():
        after = model(x)
        again = model(torch.randn(3, 3, 16, 16))
    assert 0.1 < after.abs().max() < 10 and 0.01 < again.abs().max() < 100
    for name in names:  # one scale per module, means kept
        norm = model.get_submodule(name)
        assert torch.equal(norm.running_mean, torch.zeros(16))
        assert norm.running_var.unique().numel() == 1 and norm.running_var[0] > 0
    # Well-conditioned: float32 agrees with float64 to float32 rounding, 1x1 maps included.
    wide = copy.deepcopy(model).double()
    with torch.no_grad():
        assert (wide(x.double()) - after.double()).abs().max() < 1e-5


def test_batch_norm_calibration_leaves_other_modules_alone() -> None:
    from export_sweep.zoo.build import _calibrate_batch_norms

    class LastAxisNorm(torch.nn.Module):  # statistics over the last axis, not axis 1
        def __init__(self, channels: int) -> None:
            super().__init__()
            self.register_buffer("running_mean", torch.zeros(channels))
            self.register_buffer("running_var", torch.ones(channels))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x - self.running_mean) * (self.running_var + 1e-5).rsqrt()

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.dead = torch.nn.BatchNorm1d(4)  # sees zeros only
            self.last_axis = LastAxisNorm(5)
            self.untracked = torch.nn.BatchNorm1d(4, track_running_stats=False)
            self.ln = torch.nn.LayerNorm(4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.dead(torch.zeros_like(x)) + self.untracked(x)
            z = self.last_axis(x.unsqueeze(-1).expand(3, 4, 5)).mean(-1)  # (N, L, C=5)
            return self.ln(x) + y + z

    model = Model().eval()
    assert _calibrate_batch_norms(model, {"x": torch.randn(3, 4)}) == []
    assert torch.equal(model.dead.running_var, torch.ones(4))
    assert torch.equal(model.last_axis.running_var, torch.ones(5))
    assert not model.dead._forward_pre_hooks and not model.last_axis._forward_pre_hooks
    assert _calibrate_batch_norms(torch.nn.Linear(2, 2), {"input": torch.randn(1, 2)}) == []


def test_tiny_dfine_query_scores_have_no_ties(monkeypatch: pytest.MonkeyPatch) -> None:
    """D-FINE's encoder keeps its ``num_queries`` best anchors by ``top-k``; with its HGNetV2
    backbone's features at 1e-12 every score was the head's bias, and ONNX Runtime kept other
    queries than eager (the artifact "differed"). Calibrated, the scores are distinct."""
    import export_sweep.zoo.build as build

    def scores(model_type: str) -> torch.Tensor:
        tiny = build.build_tiny_model(model_type)
        seen: list[torch.Tensor] = []
        hook = tiny.model.enc_score_head.register_forward_hook(
            lambda module, args, out: seen.append(out.max(-1).values))
        with torch.no_grad():
            tiny.model(**tiny.inputs.first)
        hook.remove()
        return seen[0]

    calibrated = scores("d_fine")
    assert all(row.unique().numel() == row.numel() for row in calibrated), calibrated
    monkeypatch.setattr(build, "_calibrate_batch_norms", lambda model, inputs: [])
    degenerate = scores("d_fine")
    assert all(row.unique().numel() == 1 for row in degenerate), degenerate


def test_degenerate_initial_scales_are_raised_in_every_sub_config() -> None:
    """SAM's vision encoder defaults to ``initializer_range=1e-10`` (also inside BLIP's and
    DeepSeek-VL-Hybrid's composites) and ConvNeXt to ``layer_scale_init_value=1e-6``: raised to
    a checkpoint's order; zero (a disabled scale) and ordinary values stay."""
    from export_sweep.zoo.build import (
        CHECKPOINT_INIT_STD,
        CHECKPOINT_LAYER_SCALE,
        _checkpoint_like_init,
        tiny_config,
    )

    hybrid = tiny_config("deepseek_vl_hybrid")
    assert hybrid.high_res_vision_config.initializer_range == 1e-10
    assert "high_res_vision_config.initializer_range" in _checkpoint_like_init(hybrid)
    assert hybrid.high_res_vision_config.initializer_range == CHECKPOINT_INIT_STD
    assert hybrid.text_config.initializer_range == 0.02

    convnext = tiny_config("convnext")
    assert _checkpoint_like_init(convnext) == ["layer_scale_init_value"]
    assert convnext.layer_scale_init_value == CHECKPOINT_LAYER_SCALE
    convnext.layer_scale_init_value = 0.0
    bert = tiny_config("bert")
    assert _checkpoint_like_init(convnext) == [] and _checkpoint_like_init(bert) == []
    assert convnext.layer_scale_init_value == 0.0 and bert.initializer_range == 0.02


def test_tiny_sam_vision_encoder_outputs_are_of_order_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """With its default ``initializer_range`` the tiny SAM vision encoder outputs about 1e-21,
    which zeros match within any tolerance (its ONNX and ExecuTorch passes checked nothing)."""
    import export_sweep.zoo.build as build

    def largest(tiny) -> float:  # noqa: ANN001
        return max(float(t.abs().max()) for t in torch.utils._pytree.tree_leaves(tiny.outputs)
                   if isinstance(t, torch.Tensor) and t.is_floating_point())

    assert largest(build.build_tiny_model("sam_vision_model")) > 0.1
    monkeypatch.setattr(build, "_checkpoint_like_init", lambda config: [])
    monkeypatch.setattr(build, "_fan_in_init_if_vacuous", lambda model, inputs, seed, **kwargs: [])
    assert largest(build.build_tiny_model("sam_vision_model")) < 1e-8


def test_degenerate_outputs_get_fan_in_scaled_layers(monkeypatch: pytest.MonkeyPatch) -> None:
    """VibeVoice's acoustic decoder shrunk to a few channels (seven transposed convolutions from
    N(0, 0.01), no normalisation) outputs 1e-9; its layers re-initialised by their fan-ins, 0.3.
    A model with outputs of order one is left as it was."""
    import export_sweep.zoo.build as build

    def largest(tiny) -> float:  # noqa: ANN001
        return max(build._largest_output(out) for out in tiny.outputs)

    assert largest(build.build_tiny_model("vibevoice_acoustic_tokenizer_decoder")) > 0.1
    monkeypatch.setattr(build, "_fan_in_init_if_vacuous", lambda model, inputs, seed, **kwargs: [])
    assert largest(build.build_tiny_model("vibevoice_acoustic_tokenizer_decoder")) < 1e-8
    monkeypatch.undo()

    torch.manual_seed(0)
    linear = torch.nn.Linear(4, 3)
    before = linear.weight.clone()
    assert build._fan_in_init_if_vacuous(linear, {"input": torch.randn(2, 4)}, seed=0) == []
    assert torch.equal(linear.weight, before)
    with torch.no_grad():
        linear.weight.mul_(1e-9)
        linear.bias.zero_()
    assert build._fan_in_init_if_vacuous(linear, {"input": torch.randn(2, 4)}, seed=0) == [""]
    assert linear.weight.abs().max() > 0.01
