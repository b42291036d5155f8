"""Shrink a default ``transformers`` configuration into a tiny, consistent one.

The rules work on the configuration's dictionary form (``config.to_dict()``), walking every nested
sub-configuration (``text_config``, ``vision_config``, ``audio_config``, ``encoder``/``decoder``,
``backbone_config``, ...), so that the result can be rebuilt with ``config_class.from_dict`` and
every ``__post_init__`` default that depends on a shrunk value is derived again.

Each integer field is classified by its name into a *dimension family* (hidden size, heads, layers,
vocabulary, image size, ...) and mapped to ``min(value, target)``. The map is monotone, so values that
were equal stay equal (a projection sized like another module's hidden size still matches it), and
fields that were already small are left alone. A few derived relations are restored afterwards
(``hidden % heads == 0``, ``heads % kv_heads == 0``, ``head_dim``, RoPE sections, per-layer lists).

Per-family overrides are kept as data in :data:`FAMILY_OVERRIDES`, each with the reason the generic
rule cannot work.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from export_core.inputs.special_tokens import NOT_TOKEN_ID_KEYS, TOKEN_ID_KEY, special_token_ids

__all__ = [
    "FAMILY_OVERRIDES",
    "ShrinkTargets",
    "TARGETS",
    "config_tree",
    "is_sub_config",
    "shrink_config",
    "shrink_config_dict",
    "fix_modeling_defaults",
    "special_token_ids",
]


@dataclass(frozen=True)
class ShrinkTargets:
    """Upper bounds of the tiny configuration, by dimension family.

    Attributes:
        hidden: hidden / embedding / model width.
        heads: attention heads.
        kv_heads: key-value heads when the original model uses grouped-query attention.
        head_dim: per-head width.
        intermediate: feed-forward width.
        layers: transformer layers per stack.
        stage_depth: blocks per stage of a hierarchical (multi-stage) backbone.
        vocab: vocabulary size.
        positions: learned position-embedding table size.
        source_positions: encoder positions of audio encoders (frames after subsampling).
        image: image side in pixels.
        patch: patch side in pixels.
        experts: routed experts of a mixture-of-experts layer.
        experts_per_token: experts activated per token.
        window: sliding attention window (tokens).
        codebook: vector-quantizer codebook size.
        codebooks: number of codebooks / quantizers.
        mel_bins: mel filter-bank bins of spectrogram inputs.
        queries: learned queries (DETR-style detectors, Q-Formers, perceiver latents).
    """

    hidden: int = 64
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 16
    intermediate: int = 128
    layers: int = 2
    stage_depth: int = 1
    vocab: int = 1024
    positions: int = 512
    source_positions: int = 64
    image: int = 32
    patch: int = 4
    experts: int = 4
    experts_per_token: int = 2
    window: int = 8
    codebook: int = 64
    codebooks: int = 2
    mel_bins: int = 32
    queries: int = 16


TARGETS = ShrinkTargets()
"""The default targets used by :func:`shrink_config`."""


# ── Per-family overrides ────────────────────────────────────────────────────────────────────────
# Dotted paths into the shrunk config dict (``"vision_config.image_size"``), applied after the
# generic rules. Only where the generic rule cannot work; each entry says why.
FAMILY_OVERRIDES: dict[str, dict[str, Any]] = {
    # The encoder merges at ``merge_index`` and reads ``intermediate_hidden_state_indices``
    # after it: with two layers only ``0 < 1`` remains.
    "seggpt": {"merge_index": 0, "intermediate_hidden_state_indices": [1]},
    # The layout stream splits ``hidden_size // channel_shrink_ratio`` into six coordinate
    # embeddings: the width must be a multiple of 6 * 4.
    "lilt": {"hidden_size": 96},
    # The 2-D box embedding is projected to the per-head width (``hidden / heads``).
    "bros": {
        "dim_bbox_projection": lambda _v, root: root["hidden_size"] // root["num_attention_heads"]
    },
    # BLIP-2 style models splice the Q-Former outputs at ``image_token_index``, unset by
    # default (the checkpoints' processors add the token).
    "blip-2": {"image_token_index": 1000},
    "instructblip": {"image_token_index": 1000},
    "instructblipvideo": {"video_token_index": 1000},
    # Defaults that leave a field the model reads unset (the checkpoints set it):
    "dbrx": {"attn_config.rope_theta": 500000.0, "attn_config.clip_qkv": 8.0},
    # X-MOD routes every layer through a language adapter: pick one by default.
    "xmod": {"default_language": lambda _v, root: (root.get("languages") or ["en_XX"])[0]},
    "esm": {"vocab_size": 33, "pad_token_id": 1, "mask_token_id": 32},
    "lfm2_moe": {"layer_types": ["conv", "full_attention"]},
    "diffusion_gemma": {
        "text_config.num_experts": 4,
        "text_config.top_k_experts": 2,
        "text_config.moe_intermediate_size": 64,
    },
    "deepseek_ocr2": {
        "text_config.mlp_layer_types": ["dense", "sparse"],
        "text_config.num_experts_per_tok": 2,
        "text_config.n_group": 1,
        "text_config.topk_group": 1,
    },
    # The default leaves ``num_experts_per_tok`` unset although the router reads it.
    "deepseek_v2": {"num_experts_per_tok": 2},
    # The adaptor width is tied to the text width (``text_hidden // 4``), across sub-configs.
    "fun_asr_nano": {
        "adaptor_config.intermediate_size": lambda _v, root: (
            root["text_config"]["hidden_size"] // 4
        ),
    },
    # Token ranges laid end to end: image codes then audio codes.
    "apertus1p5": {
        "image_token_offset": 512,
        "audio_token_offset": lambda _v, root: (
            root["image_token_offset"] + root["vision_config"]["codebook_size"]
        ),
    },
}


# ── Field classification ────────────────────────────────────────────────────────────────────────
# A field name is matched against these patterns in order; the first family wins.
_FAMILY_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    *(("skip", p) for p in NOT_TOKEN_ID_KEYS),
    ("token_id", TOKEN_ID_KEY),
    *(
        (family, re.compile(pattern))
        for family, pattern in (
        (
            "kv_heads",
            r"(num_key_value_heads|num_kv_heads|n_kv_heads|kv_heads|multi_query_group_num|"
            r"num_key_value_groups)$",
        ),
        (
            "heads",
            r"(attention_heads|num_heads|(^|_)n_heads?$|_heads$|^heads$|"
            r"num_attention_heads_per_stage|_heads_per_layer$)",
        ),
        (
            "head_dim",
            r"(^head_dim$|^d_kv$|^d_head$|^dim_head$|^attention_head_size$|"
            r"^kv_channels$|_head_dim$|^head_size$)",
        ),
        ("lora_rank", r"(lora_rank|^laurel_rank$)"),
        (
            "experts_per_token",
            r"(experts_per_tok|experts_per_token|^moe_k$|^moe_topk$|"
            r"^num_selected_experts$|^top_k$|^router_top_k$|topk_experts)",
        ),
        (
            "experts",
            r"(num_experts|num_local_experts|n_routed_experts|moe_num_experts|"
            r"^num_routed_experts$|^n_experts$)",
        ),
        ("expert_groups", r"(^n_group$|^num_expert_group$|^topk_group$)"),
        ("vocab", r"(vocab_size|_vocab$)"),
        (
            "intermediate",
            r"(intermediate|ffn_dim|ffn_hidden|^d_ff$|^d_inner$|^mlp_dim$|"
            r"linear_units|^ff_dim$|feed_forward|^dim_feedforward$|^ffn_size$|"
            r"^n_inner$|mlp_hidden|^inner_dim$|_ffn$)",
        ),
        (
            "layers_list",
            r"^(depths|stage_num_blocks|blocks_per_stage|num_block_repeats|"
            r"stage_numb_of_layers|num_blocks_per_stage|num_layers_per_stage|"
            r"layers_per_stage|depth_per_stage)$",
        ),
        (
            "layers",
            r"(num_hidden_layers|^num_layers$|^n_layers?$|_layers$|^depth$|"
            r"^encoder_depth$|^decoder_depth$|^num_decoder_layers$|"
            r"^num_encoder_layers$|^layers$|^n_layers_\w+$|^num_hidden_blocks$|"
            r"^num_self_attends_per_block$)",
        ),
        ("source_positions", r"(max_source_positions)$"),
        (
            "positions",
            r"(max_position_embeddings|^n_positions$|"
            r"max_target_positions|^max_seq_len$|^max_sequence_length$|"
            r"^max_length$|^n_ctx$|^max_seq_length$|^seq_length$|^block_size$|"
            r"^context_length$)",
        ),
        (
            "window",
            r"(^sliding_window$|^sliding_window_size$|^attention_window$|"
            r"^local_attention$|^attention_chunk_size$|^window_size$)",
        ),
        (
            "image",
            r"(^image_size$|^img_size$|^input_size$|^image_resolution$|^crop_size$|"
            r"^pretrain_image_size$|^max_image_size$)",
        ),
        ("patch", r"(^patch_size$|^patch_sizes$)"),
        (
            "codebook",
            r"(^codebook_size$|^num_embeddings$|^num_codevectors_per_group$|"
            r"^n_embed$|^vq_vocab_size$)",
        ),
        ("codebooks", r"(^num_codebooks$|^n_codebooks$|^num_quantizers$|^n_q$)"),
        ("mel_bins", r"(^num_mel_bins$|^n_mels$|^mel_bins$|^input_feat_size$)"),
        (
            "channels_list",
            r"(hidden_sizes|channels|^conv_dim$|^embed_dims?$|_dims$|"
            r"^neck_hidden_sizes$|_channel_list$|^out_channels$|^in_channels$|"
            r"^embedding_dimension$|^hidden_dims$|^tdnn_dim$|^out_features$)",
        ),
        (
            "hidden",
            r"(hidden_size|hidden_dim|embed_dim|^d_model$|^n_embd$|^emb_dim$|"
            r"embedding_dim|embedding_size|projection_dim|^proj_dim$|^dim$|^width$|"
            r"^model_dim$|^n_embed$|^d_embed$|_embed_dim$|^output_dim$|^latent_dim$|"
            r"codevector_dim$|_hidden$|^query_dim$|^encoder_dim$|^decoder_dim$|"
            r"^text_dim$|^vision_dim$|^audio_dim$|^channels$|^num_filters$|"
            r"^base_channels$|^hidden$|^d_latent$|^codebook_dim$|"
            r"^vector_quantization_hidden_dimension$|^condition_dim$|^d_latents$|"
            r"^pooler_output_size$|^pooler_hidden_size$|^projection_size$|_output_dim$|"
            r"^projector_input_dim$|bottleneck_size$|^true_hidden_size$|"
            r"^adapter_in_dim$)",
        ),
        ("rotary_dim", r"(^rotary_dim$|^rope_dim$)"),
        ("windows_count", r"^num_windows$"),
        ("queries", r"(^num_queries$|^num_query_tokens$|^num_latents$|^num_object_queries$)"),
        ("groups", r"(^upsample_groups$|^groups$|^conv_groups$)"),
        ("norm_groups", r"(^num_groups$|^norm_groups$|^num_norm_groups$)"),
        )
    ),
)


def _family(key: Any) -> str | None:
    if not isinstance(key, str):
        return None
    for family, pattern in _FAMILY_PATTERNS:
        if pattern.search(key):
            return family
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_int_list(value: Any) -> bool:
    return isinstance(value, list | tuple) and len(value) > 0 and all(_is_int(v) for v in value)


def _largest_divisor_at_most(n: int, bound: int) -> int:
    for d in range(max(1, min(n, bound)), 0, -1):
        if n % d == 0:
            return d
    return 1


def _split_proportionally(parts: list[int], total: int) -> list[int]:
    """Split ``total`` into ``len(parts)`` positive integers in the proportions of ``parts``."""
    weight = sum(parts) or 1
    raw = [p * total / weight for p in parts]
    out = [max(1, int(r)) for r in raw]
    i = 0
    while sum(out) < total:
        out[i % len(out)] += 1
        i += 1
    while sum(out) > total:
        j = max(range(len(out)), key=lambda k: out[k])
        out[j] -= 1
    return out


# ── The generic walk ────────────────────────────────────────────────────────────────────────────
_RATIOS_RE = re.compile(r"(upsampling_ratios|downsampling_ratios|upsample_rates|downsample_rates)$")
_SHARED_LAYERS_RE = re.compile(r"^num_\w*shared\w*_layers$")
"""Counts of trailing layers that reuse an earlier layer's key/value cache (Gemma-3n)."""
_LAYER_LIST_HINTS = ("layer", "block", "no_rope", "sliding", "mlp_only", "moe", "types", "pattern")
_INDEX_LIST_RE = re.compile(
    r"(indexes|indices|index_list|_idx|_layers_ids|out_indices|"
    r"feature_layers?$|global_attn_indexes|layer_ids$|_layer_ids$|"
    r"insert_layer_id|feature_layer$)"
)


# Boolean switches forced everywhere they appear: random weights, no timm dependency.
_FORCED_FLAGS: dict[str, Any] = {
    "use_timm_backbone": False,
    "use_pretrained_backbone": False,
}


# Sub-configurations replaced when the library they need is not installed: ``timm`` is an
# optional dependency, and a ``transformers`` ResNet backbone has the same interface (stage
# feature maps selected by ``out_indices``).
def _timm_backbone_substitute(sub: dict[str, Any]) -> dict[str, Any]:
    out_indices = sub.get("out_indices") or [1, 2, 3, 4]
    return {
        "model_type": "resnet",
        "num_channels": sub.get("num_channels", 3),
        "embedding_size": 64,
        "hidden_sizes": [64, 64, 64, 64],
        "depths": [1, 1, 1, 1],
        "layer_type": "basic",
        "out_indices": [i for i in out_indices if 0 <= i <= 4] or [4],
    }


_SUBSTITUTES: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "timm_backbone": ("timm", _timm_backbone_substitute),
}


def _module_missing(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is None


class _Shrinker:
    def __init__(self, targets: ShrinkTargets) -> None:
        self.t = targets
        self.original_lists: dict[str, list[int]] = {}
        self.token_map: dict[int, int] = {}
        self.kept_token_ids: set[int] = set()

    # ── per-field rules ──
    def scalar(self, key: str, value: int, family: str | None) -> int:
        t = self.t
        bounds: dict[str, int] = {
            "kv_heads": t.heads,
            "heads": t.heads,
            "head_dim": t.head_dim,
            "lora_rank": 32,
            "experts_per_token": t.experts_per_token,
            "experts": t.experts,
            "expert_groups": 2,
            "vocab": t.vocab,
            "intermediate": t.intermediate,
            "layers": t.layers,
            "positions": t.positions,
            "source_positions": t.source_positions,
            "window": t.window,
            "image": t.image,
            "patch": t.patch,
            "codebook": t.codebook,
            "codebooks": t.codebooks,
            "mel_bins": t.mel_bins,
            "hidden": t.hidden,
            "channels_list": t.hidden,
            "groups": t.hidden,
            "norm_groups": 8,
            "rotary_dim": t.head_dim // 2,
            "queries": t.queries,
            "windows_count": 4,
        }
        if family not in bounds or value <= 0:
            return value
        return min(value, bounds[family])

    def walk(self, d: dict[str, Any], path: str = "") -> None:
        old_layers: dict[int, int] = {}
        original = {k: v for k, v in d.items() if isinstance(k, str) and _is_int(v)}
        self.original_lists = {k: v for k, v in d.items() if isinstance(k, str) and _is_int_list(v)}
        # First pass: nested configs, then scalar fields.
        for key in list(d):
            value = d[key]
            if not isinstance(key, str) or key.startswith("_"):
                continue
            if isinstance(value, dict):
                if key in ("rope_parameters", "rope_scaling"):
                    continue
                if key in ("id2label", "label2id"):
                    continue
                sub = _SUBSTITUTES.get(str(value.get("model_type")))
                if sub is not None and _module_missing(sub[0]):
                    d[key] = value = sub[1](value)
                self.walk(value, f"{path}{key}.")
                continue
            if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
                for i, item in enumerate(value):
                    if "model_type" in item or any(_is_int(v) for v in item.values()):
                        self.walk(item, f"{path}{key}.{i}.")
                continue
            family = _family(key)
            if family is None or family == "skip":
                continue
            if family == "token_id":
                d[key] = self.token_id(value)
                continue
            if _is_int(value):
                new = self.scalar(key, value, family)
                if (
                    family == "layers"
                    and key in ("num_layers", "num_stages")
                    and any(_family(k) == "layers_list" for k in d)
                ):
                    new = value  # the number of stages of a hierarchical backbone
                if family == "layers" and new != value:
                    old_layers[value] = new
                d[key] = new
            elif _is_int_list(value):
                d[key] = self.int_list(key, list(value), family)
        for key, value in _FORCED_FLAGS.items():
            if key in d:
                d[key] = value
        self.fix_head_dim_sums(d, original)
        self.fix_codec_widths(d)
        self.fix_layer_lists(d, old_layers)
        self.fix_backbone(d, old_layers)
        self.fix_per_layer_dicts(d, old_layers)
        self.fix_shared_layers(d, old_layers, original)
        self.fix_consistency(d, original)

    def int_list(self, key: str, values: list[int], family: str) -> list[int]:
        t = self.t
        if family == "layers_list":
            return [min(v, t.stage_depth) if v > 0 else v for v in values]
        if family in ("channels_list", "hidden"):
            # The same map as scalar widths, so a list entry equal to a scalar width (a
            # backbone's output channels and a neck's input) stays equal to it.
            return [min(v, t.hidden) for v in values]
        if family == "intermediate":
            return [min(v, t.intermediate) for v in values]
        if family == "heads" and len(set(values)) == 1:
            return [self.scalar(key, v, family) for v in values]  # per-layer, uniform
        if family == "heads":
            g = math.gcd(*values) or 1
            scaled = [v // g for v in values]
            while max(scaled) > 8:
                scaled = [max(1, v // 2) for v in scaled]
            return scaled
        if family in ("image", "patch"):
            return [self.scalar(key, v, family) for v in values]
        if family in ("window",):
            return [min(v, t.window) for v in values]
        if family == "layers":
            return [min(v, t.layers) for v in values]
        return values

    def token_id(self, value: Any) -> Any:
        if _is_int(value):
            if value < self.t.vocab:
                return value
            if value not in self.token_map:
                candidate = self.t.vocab - 1 - len(self.token_map)
                while candidate in self.kept_token_ids:
                    candidate -= 1
                self.token_map[value] = candidate
            return self.token_map[value]
        if _is_int_list(value):
            return [self.token_id(v) for v in value]
        return value

    def fix_layer_lists(self, d: dict[str, Any], old_layers: Mapping[int, int]) -> None:
        """Truncate per-layer lists (``layer_types``, ...) and clip layer-index lists."""
        if not old_layers:
            return
        for key, value in list(d.items()):
            if key.startswith("_") or not isinstance(value, list | tuple) or not value:
                continue
            n = len(value)
            if n in old_layers and (
                any(h in key for h in _LAYER_LIST_HINTS) or not _INDEX_LIST_RE.search(key)
            ):
                new_n = old_layers[n]
                d[key] = _pick_layers(list(value), new_n)
                continue
            if _INDEX_LIST_RE.search(key) and _is_int_list(value):
                top = max(old_layers.values())
                d[key] = _clip_indices(list(value), max(old_layers), top)
        for key, value in list(d.items()):
            if _is_int(value) and _INDEX_LIST_RE.search(key) and not key.startswith("_"):
                top = max(old_layers.values())
                if value >= top:
                    d[key] = top - 1

    def fix_shared_layers(self, d: dict[str, Any], old_layers: Mapping[int, int],
                          original: Mapping[str, int]) -> None:
        """Counts of layers that reuse an earlier layer's state (``num_kv_shared_layers``: the
        last k layers read the key/value cache of the last earlier layer of their type): scaled
        with the stack, not clamped to it, and kept small enough that the producing layers
        (``layer_types[:n - k]``) still hold every layer type. A stack that shared all its
        layers keeps sharing all of them."""
        if not old_layers:
            return
        old_n = max(old_layers)
        new_n = old_layers[old_n]
        types = d.get("layer_types")
        for key in list(d):
            if not (isinstance(key, str) and _SHARED_LAYERS_RE.search(key) and _is_int(d[key])):
                continue
            old_k = original.get(key, d[key])
            if old_k <= 0:
                continue
            if old_k >= old_n:
                d[key] = new_n
                continue
            k = min(round(old_k * new_n / old_n), new_n - 1)
            if isinstance(types, list) and len(types) == new_n:
                while k > 0 and set(types[: new_n - k]) != set(types):
                    k -= 1
            d[key] = max(k, 0)

    def fix_head_dim_sums(self, d: dict[str, Any], original: Mapping[str, int]) -> None:
        """Keep ``a == b + c`` among head widths (MLA: ``qk_head_dim = nope + rope``)."""
        keys = [k for k in original if _family(k) == "head_dim" and _is_int(d.get(k))]
        for a in keys:
            for i, b in enumerate(keys):
                for c in keys[i + 1 :]:
                    if a not in (b, c) and original[a] == original[b] + original[c]:
                        d[a] = d[b] + d[c]

    def fix_codec_widths(self, d: dict[str, Any]) -> None:
        """Convolutional codecs double the width at every down-sampling stage: start narrow so
        the bottleneck (``base * 2**stages``) lands near the hidden width."""
        ratios = next(
            (d[k] for k in d if isinstance(k, str) and _RATIOS_RE.search(k) and _is_int_list(d[k])),
            None,
        )
        if not ratios:
            return
        base = max(2, self.t.hidden // 2 ** len(ratios))
        for key in ("num_filters", "n_filters", "encoder_hidden_size", "base_channels"):
            if _is_int(d.get(key)):
                d[key] = min(d[key], base)

    def fix_backbone(self, d: dict[str, Any], old_layers: Mapping[int, int]) -> None:
        """Backbone outputs: re-derive ``stage_names`` and keep ``out_indices`` in range."""
        if "stage_names" not in d and "out_indices" not in d:
            return
        if not old_layers:
            return
        old_n = max(old_layers)
        new_n = old_layers[old_n]
        d.pop("stage_names", None)
        if "out_features" in d:
            d["out_features"] = None
        idx = d.get("out_indices")
        if _is_int_list(idx):
            mapped = []
            for v in idx:
                m = max(v, -(new_n + 1)) if v < 0 else min(v, new_n)
                if m not in mapped:
                    mapped.append(m)
            d["out_indices"] = sorted(mapped, key=lambda v: v % (new_n + 1))

    def fix_per_layer_dicts(self, d: dict[str, Any], old_layers: Mapping[int, int]) -> None:
        """Dicts keyed by layer index (``per_layer_config``): keep keys inside the new stack."""
        if not old_layers:
            return
        new_n = old_layers[max(old_layers)]
        for key, value in list(d.items()):
            if not isinstance(value, dict) or not value:
                continue
            if not all(isinstance(k, int) or (isinstance(k, str) and k.isdigit()) for k in value):
                continue
            out: dict[Any, Any] = {}
            for k, v in value.items():
                i = int(k)
                m = min(i, new_n - 1)
                nk: Any = m if isinstance(k, int) else str(m).zfill(len(k))
                if nk not in out:
                    out[nk] = v
            d[key] = out

    def fix_consistency(self, d: dict[str, Any], original: Mapping[str, int]) -> None:
        """Restore divisibility relations between the shrunk fields of one config."""
        hidden_key = next(
            (
                k
                for k in ("hidden_size", "d_model", "n_embd", "embed_dim", "dim", "hidden_dim")
                if _is_int(d.get(k))
            ),
            None,
        )
        heads_key = next(
            (
                k
                for k in (
                    "num_attention_heads",
                    "n_head",
                    "num_heads",
                    "n_heads",
                    "encoder_attention_heads",
                    "attention_heads",
                )
                if _is_int(d.get(k))
            ),
            None,
        )
        if hidden_key and heads_key:
            hidden, heads = d[hidden_key], d[heads_key]
            if hidden % heads:
                d[heads_key] = _largest_divisor_at_most(hidden, heads)
        for hk in ("decoder_attention_heads", "encoder_attention_heads"):
            if _is_int(d.get(hk)) and hidden_key and d[hidden_key] % d[hk]:
                d[hk] = _largest_divisor_at_most(d[hidden_key], d[hk])
        if hidden_key and heads_key and "head_dim" in d and d["head_dim"] is None:
            # Some defaults leave ``head_dim`` unset although the model reads it.
            d["head_dim"] = d[hidden_key] // d[heads_key]
        if heads_key and "num_key_value_heads" in d and d["num_key_value_heads"] is None:
            d["num_key_value_heads"] = d[heads_key]
        # Mamba-2 heads: n_heads * d_head == expand * hidden.
        for nh, dh, ex in (
            ("mamba_n_heads", "mamba_d_head", "mamba_expand"),
            ("num_heads", "head_dim", "expand"),
        ):
            if (
                all(_is_int(d.get(k)) for k in (nh, dh, ex))
                and hidden_key
                and d.get("model_type", "").find("mamba") + ("mamba_n_heads" in d) >= 0
            ):
                inner = d[ex] * d[hidden_key]
                if d[nh] * d[dh] != inner and inner % d[nh] == 0:
                    d[dh] = inner // d[nh]
        if _is_int(d.get("mamba_d_ssm")) and _is_int(d.get("mamba_expand")) and hidden_key:
            d["mamba_d_ssm"] = d["mamba_expand"] * d[hidden_key]
            if _is_int(d.get("mamba_n_heads")) and _is_int(d.get("mamba_d_head")):
                d["mamba_d_head"] = d["mamba_d_ssm"] // d["mamba_n_heads"]
        if all(_is_int(d.get(k)) for k in ("mamba_headdim", "n_mamba_heads", "mamba_expand")) and (
            hidden_key
        ):
            d["mamba_headdim"] = d["mamba_expand"] * d[hidden_key] // d["n_mamba_heads"]
        # EfficientNet-style widths: ``round_filters(width_coefficient * base)`` of fixed base
        # widths, with the head checked against ``hidden_dim``: shrink the coefficient instead
        # of the widths (0.05 * 1280 = 64).
        if _is_int(d.get("depth_divisor")) and isinstance(d.get("width_coefficient"), float):
            d["width_coefficient"] = 0.05
            d["depth_coefficient"] = 1.0
            if _is_int(d.get("hidden_dim")):
                d["hidden_dim"] = self.t.hidden
            for key in ("in_channels", "out_channels"):
                if _is_int_list(self.original_lists.get(key)):
                    d[key] = list(self.original_lists[key])
        # Axial position embeddings split the width: their dims must sum to ``hidden``.
        axial = d.get("axial_pos_embds_dim")
        if _is_int_list(axial) and hidden_key:
            d["axial_pos_embds_dim"] = _split_proportionally(
                list(self.original_lists.get("axial_pos_embds_dim", axial)), d[hidden_key]
            )
        # Prompt encoders sized by the vision grid (SAM): ``image_size // patch_size``.
        if all(_is_int(d.get(k)) for k in ("image_embedding_size", "image_size", "patch_size")):
            d["image_embedding_size"] = d["image_size"] // d["patch_size"]
        # Time-series transformers leave the horizon unset by default.
        if "prediction_length" in d and d["prediction_length"] is None:
            d["prediction_length"] = 4
        # Mamba-2 groups must divide the heads.
        for gk, hk in (("n_groups", "num_heads"), ("mamba_n_groups", "mamba_n_heads")):
            if _is_int(d.get(gk)) and _is_int(d.get(hk)) and d[hk] % d[gk]:
                d[gk] = _largest_divisor_at_most(d[hk], d[gk])
        # Hierarchical window attention (Swin-like): every stage's resolution must be a
        # multiple of the window, so pick a window of 2 and the patch that makes it so.
        depths = next((d[k] for k in d if _family(k) == "layers_list" and _is_int_list(d[k])), None)
        if (
            depths
            and _is_int(d.get("window_size"))
            and _is_int(d.get("patch_size"))
            and _is_int(d.get("image_size"))
        ):
            window = min(d["window_size"], 2)
            span = window * 2 ** (len(depths) - 1)
            d["window_size"] = window
            d["patch_size"] = max(1, d["image_size"] // span)
            d["image_size"] = d["patch_size"] * span
        # Hierarchical backbones double the width at every stage: start narrow.
        if depths and len(depths) > 2:
            for wk in ("embed_dim", "hidden_size"):
                if _is_int(d.get(wk)):
                    d[wk] = min(d[wk], self.t.head_dim)
        # Per-stage widths divisible by per-stage heads.
        for wk in ("embed_dim", "hidden_sizes", "embed_dims", "hidden_size"):
            w, h = d.get(wk), d.get("num_heads") or d.get("num_attention_heads")
            if _is_int_list(w) and _is_int_list(h) and len(w) == len(h):
                d[wk] = [hh * self.t.head_dim for hh in h]
        if heads_key:
            heads = d[heads_key]
            orig_heads = original.get(heads_key, heads)
            for kk in (
                "num_key_value_heads",
                "num_kv_heads",
                "n_kv_heads",
                "multi_query_group_num",
            ):
                kv = d.get(kk)
                if _is_int(kv) and kv > 0:
                    orig_kv = original.get(kk, kv)
                    if orig_kv >= orig_heads:
                        d[kk] = heads  # multi-head attention stays multi-head
                    else:  # grouped / multi-query attention stays grouped
                        d[kk] = _largest_divisor_at_most(heads, min(orig_kv, self.t.kv_heads))
        # MLA (DeepSeek-style) head dims: qk_head_dim = nope + rope.
        if _is_int(d.get("qk_nope_head_dim")) and _is_int(d.get("qk_rope_head_dim")):
            if "qk_head_dim" in d:
                d["qk_head_dim"] = d["qk_nope_head_dim"] + d["qk_rope_head_dim"]
        # Intermediate size must not exceed what is sane relative to hidden; keep as is otherwise.
        self.fix_rope(d)

    def fix_rope(self, d: dict[str, Any]) -> None:
        rope = d.get("rope_parameters")
        if rope is None:
            rope = d.get("rope_scaling")
        if not isinstance(rope, dict):
            return
        head_dim = d.get("head_dim")
        if not _is_int(head_dim):
            hidden = d.get("hidden_size")
            heads = d.get("num_attention_heads")
            head_dim = hidden // heads if _is_int(hidden) and _is_int(heads) and heads else None
        if _is_int(d.get("qk_rope_head_dim")):
            head_dim = d["qk_rope_head_dim"]
        prf = rope.get("partial_rotary_factor", d.get("partial_rotary_factor", 1.0)) or 1.0
        rotary = int(head_dim * prf) if head_dim else None
        if _is_int(d.get("rotary_dim")):
            rotary = d["rotary_dim"]
        for sub in [rope, *[v for v in rope.values() if isinstance(v, dict)]]:
            for key in ("mrope_section", "mrope_sections"):
                sec = sub.get(key)
                if _is_int_list(sec) and rotary:
                    sub[key] = _split_proportionally(list(sec), rotary // 2)
            for key in ("short_factor", "long_factor"):
                fac = sub.get(key)
                if isinstance(fac, list) and rotary and len(fac) > rotary // 2:
                    sub[key] = fac[: rotary // 2]
            for key in ("original_max_position_embeddings",):
                if _is_int(sub.get(key)):
                    sub[key] = min(sub[key], self.t.positions)


def _pick_layers(values: list[Any], n: int) -> list[Any]:
    """Pick ``n`` entries of a per-layer list, keeping distinct kinds when there are several."""
    if n >= len(values):
        return values
    picked: list[Any] = [values[0]]
    for v in values[1:]:
        if len(picked) >= n:
            break
        if v not in picked:
            picked.append(v)
    i = 1
    while len(picked) < n:
        picked.append(values[i])
        i += 1
    # Keep the original order of first appearance.
    return picked[:n]


def _clip_indices(values: list[int], old_n: int, new_n: int) -> list[int]:
    """Map layer indices from an ``old_n``-layer stack onto a ``new_n``-layer one."""
    out: list[int] = []
    for v in values:
        if v < 0:
            mapped = max(v, -new_n)
        else:
            mapped = min(new_n - 1, v * new_n // max(old_n, 1))
        out.append(mapped)
    # Indices must usually stay distinct and sorted.
    uniq = sorted(set(out), key=out.index)
    return uniq


def _apply_override(d: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node: Any = d
    for p in parts[:-1]:
        node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
    if callable(value):
        node[parts[-1]] = value(node.get(parts[-1]), d)
    else:
        node[parts[-1]] = copy.deepcopy(value)


def shrink_config_dict(
    config_dict: Mapping[str, Any],
    *,
    model_type: str | None = None,
    targets: ShrinkTargets = TARGETS,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Return a shrunk copy of a configuration dictionary.

    Args:
        config_dict: ``config.to_dict()`` of a default configuration (nested sub-configurations
            as nested dictionaries).
        model_type: the ``model_type`` used to look up per-family overrides; defaults to
            ``config_dict["model_type"]``.
        targets: upper bounds of each dimension family.
        overrides: per-family overrides, ``model_type -> {dotted.path: value}``; a callable value
            receives ``(current_value, root_dict)``. Defaults to :data:`FAMILY_OVERRIDES`.

    Returns:
        A new dictionary; the input is not modified.
    """
    d = copy.deepcopy(dict(config_dict))
    shrinker = _Shrinker(targets)
    shrinker.kept_token_ids = {v for v in special_token_ids(d) if v < targets.vocab}
    shrinker.walk(d)
    model_type = model_type or d.get("model_type")
    table = FAMILY_OVERRIDES if overrides is None else overrides
    for dotted, value in (table.get(model_type or "", {}) or {}).items():
        _apply_override(d, dotted, value)
    return d


def shrink_config(config: Any, *, targets: ShrinkTargets = TARGETS) -> Any:
    """Return a tiny copy of a ``transformers`` configuration.

    Args:
        config: a ``PreTrainedConfig`` instance (usually the class default).
        targets: upper bounds of each dimension family.

    Returns:
        A new configuration of the same class, rebuilt with ``from_dict`` so that derived fields
        are recomputed.

    Raises:
        ValueError: when the shrunk dictionary is rejected by the configuration class.
    """
    model_type = getattr(config, "model_type", None)
    d = shrink_config_dict(config.to_dict(), model_type=model_type, targets=targets)
    d.pop("transformers_version", None)
    return type(config).from_dict(d)


_MROPE_DEFAULT_RE = re.compile(r"""get\(\s*["']mrope_section["']\s*,\s*\[([\d,\s]+)\]""")


def is_sub_config(value: Any) -> bool:
    """Whether ``value`` is a nested ``transformers`` config (``text_config``, ...)."""
    return hasattr(value, "to_dict") and hasattr(value, "model_type")


def config_tree(config: Any) -> Iterator[tuple[str, Any]]:
    """``config`` and every sub-config it holds, each once, with its dotted prefix (``""``,
    ``"vision_config."``, ``"vision_config.sam_config."``, ...), depth first."""
    stack: list[tuple[str, Any]] = [("", config)]
    seen: set[int] = set()
    while stack:
        path, c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        yield path, c
        stack.extend((f"{path}{k}.", v) for k, v in vars(c).items()
                     if not k.startswith("_") and is_sub_config(v))


def fix_modeling_defaults(config: Any, modeling_source: str) -> list[str]:
    """Make explicit the size defaults a modeling file hard-codes for absent config fields.

    Some models read a field with a default sized for the full model, e.g.
    ``config.rope_parameters.get("mrope_section", [16, 24, 24])`` (Qwen2-VL family). When the
    shrunk config lacks the field, the default no longer fits; this writes a proportionally
    shrunk value into the config instead.

    Args:
        config: the shrunk configuration (modified in place, including sub-configs).
        modeling_source: source text of the model's modeling module.

    Returns:
        Dotted names of the fields that were set.
    """
    fixed: list[str] = []
    m = _MROPE_DEFAULT_RE.search(modeling_source)
    if not m:
        return fixed
    default = [int(x) for x in m.group(1).split(",") if x.strip()]
    for path, c in config_tree(config):
        rope = getattr(c, "rope_parameters", None)
        heads = getattr(c, "num_attention_heads", None)
        hidden = getattr(c, "hidden_size", None)
        head_dim = getattr(c, "head_dim", None) or (
            hidden // heads if _is_int(hidden) and _is_int(heads) and heads else None
        )
        if isinstance(rope, dict) and "mrope_section" not in rope and _is_int(head_dim):
            prf = rope.get("partial_rotary_factor", 1.0) or 1.0
            rope["mrope_section"] = _split_proportionally(default, int(head_dim * prf) // 2)
            fixed.append(f"{path}rope_parameters.mrope_section")
    return fixed
