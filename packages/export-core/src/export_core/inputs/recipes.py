"""Example inputs for a model, built from its ``forward`` signature and its configuration.

Inputs are produced by *recipes*: a recipe knows one input layout (text, pixels, flattened
vision patches, spectrogram, waveform, time series, ...) and builds it for a given batch size and
sequence length. :func:`input_recipes` lists the recipes that fit a model, most likely first;
:func:`make_example_inputs` builds two input sets of different shapes with the first recipe
that a forward pass accepts.

Multimodal models get their placeholder tokens (``image_token_id``, ``audio_token_id``) placed in
``input_ids``: the number of placeholders is measured by running the model's own
``get_image_features`` / ``get_audio_features`` on the example pixels / audio, so it matches
whatever pooling, merging or cropping the model does.

Sizes are never 0 or 1 where a second set can vary them: ``torch.export`` specialises those.
"""

from __future__ import annotations

import inspect
import logging
import math
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import first_line
from ..modality import Modality, model_modality
from .input_names import TOKENIZER_INPUTS, tokenizer_input_names
from .special_tokens import special_token_ids

__all__ = [
    "DEFAULT_SHAPES",
    "ExampleInputs",
    "InputRecipe",
    "find_config_value",
    "forward_parameters",
    "input_recipes",
    "make_example_inputs",
]

logger = logging.getLogger(__name__)

DEFAULT_SHAPES: tuple[tuple[int, int], ...] = ((2, 8), (3, 12))
"""``(batch, sequence)`` of the two example input sets."""


@dataclass(frozen=True)
class ExampleInputs:
    """Example keyword inputs of a model's ``forward``.

    Attributes:
        sets: one or two dictionaries of ``forward`` keyword arguments; the second, when
            present, differs from the first in at least one tensor shape.
        recipe: name of the recipe that built them.
        shapes: ``(batch, sequence)`` requested for each set.
    """

    sets: tuple[dict[str, Any], ...]
    recipe: str
    shapes: tuple[tuple[int, int], ...] = ()

    @property
    def first(self) -> dict[str, Any]:
        """The first input set."""
        return self.sets[0]

    @property
    def second(self) -> dict[str, Any] | None:
        """The second input set, or ``None`` when the model accepts only one shape."""
        return self.sets[1] if len(self.sets) > 1 else None

    @property
    def shapes_differ(self) -> bool:
        """Whether the two sets differ in at least one tensor shape."""
        if self.second is None:
            return False
        return _shape_signature(self.first) != _shape_signature(self.second)

    def describe(self) -> list[dict[str, list[int] | str]]:
        """Shapes (or ``repr`` of non-tensors) of each set, for reports."""
        out = []
        for s in self.sets:
            out.append(
                {
                    k: list(v.shape) if isinstance(v, torch.Tensor) else repr(v)[:40]
                    for k, v in s.items()
                }
            )
        return out


def _shape_signature(inputs: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in inputs.items() if isinstance(v, torch.Tensor)}


@dataclass(frozen=True)
class InputRecipe:
    """One way to build example inputs for a model.

    Attributes:
        name: short name, e.g. ``"text"``, ``"vision"``, ``"qwen-vl-patches"``.
        build: ``build(batch, seq, generator) -> dict`` of ``forward`` keyword arguments.
    """

    name: str
    build: Callable[[int, int, torch.Generator], dict[str, Any]]


# ── Config lookups ──────────────────────────────────────────────────────────────────────────────
_SUB_CONFIG_ORDER = (
    "vision_config",
    "image_config",
    "vision_encoder_config",
    "audio_config",
    "encoder_config",
    "text_config",
    "encoder",
    "decoder",
    "backbone_config",
    "speech_config",
    "qformer_config",
)


def _sub_configs(config: Any) -> Iterator[Any]:
    seen: set[int] = set()
    stack = [config]
    while stack:
        c = stack.pop(0)
        if c is None or id(c) in seen:
            continue
        seen.add(id(c))
        yield c
        for name in _SUB_CONFIG_ORDER:
            sub = getattr(c, name, None)
            if sub is not None and hasattr(sub, "to_dict"):
                stack.append(sub)
        for name, sub in vars(c).items():
            if not name.startswith("_") and hasattr(sub, "to_dict") and hasattr(sub, "model_type"):
                stack.append(sub)


def find_config_value(config: Any, *names: str, prefer: tuple[str, ...] = ()) -> Any:
    """First non-``None`` value of any of ``names`` in the config tree.

    Args:
        config: a ``PreTrainedConfig``.
        *names: attribute names, tried in order on each config.
        prefer: sub-config attribute names searched before the root (``"vision_config"``).

    Returns:
        The value, or ``None`` when no config in the tree has it.
    """
    roots = [getattr(config, p, None) for p in prefer]
    for root in [*[r for r in roots if r is not None], config]:
        for c in _sub_configs(root):
            for n in names:
                v = getattr(c, n, None)
                if v is not None:
                    return v
    return None


def forward_parameters(model: torch.nn.Module) -> dict[str, inspect.Parameter]:
    """Named parameters of ``model.forward`` (without ``self``, ``*args`` or ``**kwargs``)."""
    sig = inspect.signature(model.forward)
    return {
        n: p for n, p in sig.parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    }


def _required(params: Mapping[str, inspect.Parameter]) -> set[str]:
    return {n for n, p in params.items() if p.default is p.empty}


# ── Primitive tensors ───────────────────────────────────────────────────────────────────────────
@dataclass
class _Ctx:
    model: torch.nn.Module
    config: Any
    params: dict[str, inspect.Parameter]
    vocab: int
    avoid: set[int]
    extra: dict[str, Any] = field(default_factory=dict)
    input_names: frozenset[str] | None = None
    id_rows: int = 1
    """Rows of ``input_ids`` per example: the codebook count where ``forward`` documents
    ``input_ids`` as ``(batch_size * num_codebooks, sequence_length)`` (MusicGen), else 1."""

    def wants(self, name: str) -> bool:
        """Whether the optional text input ``name`` (``attention_mask``, ``token_type_ids``)
        belongs in the example: ``forward`` takes it and the tokenizer produces it (or the
        forward requires it)."""
        if name not in self.params:
            return False
        if self.input_names is None or name not in TOKENIZER_INPUTS:
            return True
        return name in self.input_names or self.params[name].default is inspect.Parameter.empty

    def tokens(
        self, batch: int, seq: int, g: torch.Generator, vocab: int | None = None
    ) -> torch.Tensor:
        vocab = vocab or self.vocab
        low = 4 if vocab > 16 else 0
        ids = torch.randint(low, max(low + 1, vocab), (batch, seq), generator=g)
        if self.avoid:
            bad = torch.tensor(sorted(self.avoid))
            mask = torch.isin(ids, bad)
            # Replace forbidden ids with the smallest allowed id above ``low``.
            allowed = next((i for i in range(low, vocab) if i not in self.avoid), low)
            ids[mask] = allowed
        return ids


def _text_vocab(config: Any) -> int:
    try:
        text = config.get_text_config(decoder=True)
    except Exception:  # noqa: BLE001 - some composite configs raise here
        text = config
    for c in (text, config):
        v = getattr(c, "vocab_size", None)
        if isinstance(v, int) and v > 0:
            return v
    v = find_config_value(config, "vocab_size")
    return v if isinstance(v, int) and v > 0 else 64


def _image_hw(config: Any) -> tuple[int, int]:
    size = find_config_value(
        config,
        "image_size",
        "img_size",
        "input_size",
        "crop_size",
        prefer=("vision_config", "backbone_config"),
    )
    if isinstance(size, list | tuple) and len(size) >= 2 and all(isinstance(s, int) for s in size):
        return int(size[-2]), int(size[-1])
    if isinstance(size, dict):
        h = size.get("height") or size.get("shortest_edge") or 32
        w = size.get("width") or h
        return int(h), int(w)
    if isinstance(size, int) and size > 1:
        return size, size
    return 32, 32


def _num_channels(config: Any) -> int:
    c = find_config_value(
        config,
        "num_channels",
        "in_channels",
        "in_chans",
        "input_channels",
        prefer=("vision_config", "backbone_config"),
    )
    return c if isinstance(c, int) and 0 < c <= 16 else 3


_CODEBOOK_MAJOR_IDS = re.compile(r"\binput_ids \(`[^`]*` of shape `\(batch_size \* num_codebooks,")


def _rows_per_example(model: torch.nn.Module, config: Any) -> int:
    """Rows of ``input_ids`` per example: ``num_codebooks`` when ``forward``'s docstring gives
    ``input_ids`` the shape ``(batch_size * num_codebooks, sequence_length)``, else 1.

    Such models (MusicGen, MusicGen Melody) fold the codebooks into the rows of ``input_ids`` and
    take ``attention_mask`` as ``(batch_size, sequence_length)``. Eager does not refuse a mask
    with one row per ``input_ids`` row (the mask functions index its first ``batch_size`` rows),
    so the layout is read from the documented shape, not found by trial.
    """
    doc = inspect.getdoc(type(model).forward) or ""
    k = find_config_value(config, "num_codebooks")
    if isinstance(k, int) and k > 1 and _CODEBOOK_MAJOR_IDS.search(doc):
        return k
    return 1


def _attention_mask(batch: int, seq: int) -> torch.Tensor:
    mask = torch.ones(batch, seq, dtype=torch.long)
    if batch > 1 and seq > 3:
        mask[-1, -2:] = 0  # one right-padded row
    return mask


# Optional in the signature, but the forward raises without them (LXMERT).
_NEEDED_OPTIONAL = frozenset({"visual_feats", "visual_pos"})


# ── Recipes ─────────────────────────────────────────────────────────────────────────────────────
def _text_part(ctx: _Ctx, batch: int, seq: int, g: torch.Generator) -> dict[str, Any]:
    p = ctx.params
    out: dict[str, Any] = {}
    if "input_ids" in p:
        out["input_ids"] = ctx.tokens(batch * ctx.id_rows, seq, g)
        if ctx.wants("attention_mask"):
            out["attention_mask"] = _attention_mask(batch, seq)
        tv = getattr(ctx.config, "type_vocab_size", None)
        if ctx.wants("token_type_ids") and isinstance(tv, int) and tv >= 1:
            tt = torch.zeros(batch, seq, dtype=torch.long)
            if tv >= 2:
                tt[:, seq // 2 :] = 1
            out["token_type_ids"] = tt
        if "bbox" in p:
            x0 = torch.randint(0, 40, (batch, seq, 1), generator=g)
            y0 = torch.randint(0, 40, (batch, seq, 1), generator=g)
            out["bbox"] = torch.cat([x0, y0, x0 + 10, y0 + 10], dim=-1)
    if "decoder_input_ids" in p and (
        "decoder_input_ids" in _required(p) or getattr(ctx.config, "is_encoder_decoder", False)
    ):
        dvocab = getattr(getattr(ctx.config, "decoder", None), "vocab_size", None) or ctx.vocab
        dec_len = max(2, seq // 2 + 1)
        out["decoder_input_ids"] = ctx.tokens(batch, dec_len, g, vocab=dvocab)
    if "qformer_input_ids" in p:
        qv = find_config_value(ctx.config, "vocab_size", prefer=("qformer_config",)) or ctx.vocab
        out["qformer_input_ids"] = ctx.tokens(batch, seq, g, vocab=min(qv, ctx.vocab))
        if "qformer_attention_mask" in p:
            out["qformer_attention_mask"] = torch.ones(batch, seq, dtype=torch.long)
    return out


def _pixels(ctx: _Ctx, batch: int, g: torch.Generator) -> torch.Tensor:
    h, w = _image_hw(ctx.config)
    c = _num_channels(ctx.config)
    return torch.randn(batch, c, h, w, generator=g)


def _video_frames(ctx: _Ctx) -> int:
    f = find_config_value(
        ctx.config,
        "num_frames",
        "frames_per_clip",
        "num_frames_per_video",
        prefer=("vision_config",),
    )
    return f if isinstance(f, int) and f > 0 else 4


def _image_part(ctx: _Ctx, batch: int, g: torch.Generator, *, video: bool) -> dict[str, Any]:
    p = ctx.params
    out: dict[str, Any] = {}
    if "pixel_values" in p:
        px = _pixels(ctx, batch, g)
        if video:
            t = _video_frames(ctx)
            px = px.unsqueeze(1).expand(batch, t, *px.shape[1:]).contiguous()
            px = px + 0.01 * torch.randn(px.shape, generator=g)
        out["pixel_values"] = px
        if "pixel_mask" in p:
            out["pixel_mask"] = torch.ones(batch, px.shape[-2], px.shape[-1], dtype=torch.long)
        if "noise" in p and _masks_patches_with_noise(ctx.config):
            out["noise"] = torch.rand(batch, _num_patches(ctx.config, px), generator=g)
    return out


def _masks_patches_with_noise(config: Any) -> bool:
    """Whether ``forward(noise=...)`` is the per-patch noise whose ``argsort`` picks the patches
    a masked autoencoder keeps (ViT-MAE: ``(batch, num_patches)``). Without it the forward draws
    ``torch.rand`` itself: the artifact and eager mask different patches and cannot agree."""
    return getattr(config, "model_type", "") == "vit_mae" and bool(getattr(config, "mask_ratio", 0))


def _num_patches(config: Any, pixels: torch.Tensor) -> int:
    """Patches of ``pixels`` ``(batch, channels, height, width)`` at the config's patch size."""
    patch = find_config_value(config, "patch_size") or 16
    ph, pw = (patch, patch) if isinstance(patch, int) else tuple(patch)
    return (pixels.shape[-2] // ph) * (pixels.shape[-1] // pw)


def _qwen_patches(
    ctx: _Ctx, batch: int, g: torch.Generator, key: str, grid_key: str, size_scale: int
) -> dict[str, Any]:
    """Flattened patches + ``(t, h, w)`` grid, as Qwen2-VL-style vision towers take them."""
    vc = getattr(ctx.config, "vision_config", None) or ctx.config
    patch = getattr(vc, "patch_size", 14) or 14
    tps = getattr(vc, "temporal_patch_size", 2) or 1
    merge = getattr(vc, "spatial_merge_size", 2) or 1
    c = getattr(vc, "in_channels", None) or getattr(vc, "num_channels", None) or 3
    side = merge * (1 + size_scale)
    grid = torch.tensor([[1, side, side]] * batch)
    n = int(grid.prod(-1).sum())
    return {
        key: torch.randn(n, c * tps * patch * patch, generator=g),
        grid_key: grid,
    }


def _mrope_position_ids(model: torch.nn.Module, inputs: dict[str, Any]) -> torch.Tensor | None:
    """The multimodal rotary position ids ``(3, batch, seq)`` int64 of a Qwen-VL-style model,
    computed in eager by its own ``get_rope_index`` (``None``: the model has none, or it failed).

    The model computes them with a Python loop over the runs of text and image tokens of each row
    (``itertools.groupby(mm_token_type_ids.tolist())``), which ``torch.export`` cannot trace
    (``GuardOnDataDependentSymNode: Eq(u6, 0)``); given as an input, as the model's own
    ``generate`` computes them before the forward, the forward skips the loop.
    """
    owner = next((m for m in (model, getattr(model, "model", None))
                  if m is not None and callable(getattr(m, "get_rope_index", None))), None)
    if owner is None:
        return None
    try:
        params = inspect.signature(owner.get_rope_index).parameters
        kwargs = {k: v for k, v in inputs.items() if k in params}
        with torch.no_grad():
            out = owner.get_rope_index(**kwargs)
    except Exception as e:  # noqa: BLE001 - a model whose helper needs more: no position ids
        logger.debug("get_rope_index failed: %s", first_line(e))
        return None
    positions = out[0] if isinstance(out, tuple) else out
    return positions if isinstance(positions, torch.Tensor) and positions.dim() == 3 else None


def _audio_len(ctx: _Ctx, seq: int) -> int:
    return 1600 * max(2, seq // 4)


def _features_len(ctx: _Ctx, seq: int) -> list[int]:
    """Candidate spectrogram lengths (frames): free lengths first, then the fixed length of
    Whisper-style encoders (``2 * max_source_positions``)."""
    out = [8 * seq]
    msp = find_config_value(ctx.config, "max_source_positions", prefer=("audio_config", "encoder"))
    if isinstance(msp, int) and 0 < msp <= 4096:
        out.append(2 * msp)
    return out


def _mel(ctx: _Ctx) -> int:
    m = find_config_value(
        ctx.config,
        "feature_projection_input_dim",
        "num_mel_bins",
        "feature_size",
        "input_feat_size",
        "n_mels",
        "input_feat_per_channel",
        prefer=("audio_config", "encoder"),
    )
    return m if isinstance(m, int) and m > 0 else 32


class _RecipeBook:
    """Build the list of candidate recipes for a model."""

    def __init__(
        self, model: torch.nn.Module, config: Any, input_names: frozenset[str] | None = None
    ) -> None:
        params = forward_parameters(model)
        vocab = _text_vocab(config)
        self.ctx = _Ctx(
            model=model,
            config=config,
            params=params,
            vocab=vocab,
            avoid={i for i in special_token_ids(config) if i < vocab},
            input_names=input_names,
            id_rows=_rows_per_example(model, config),
        )
        self.params = params
        self.required = _required(params)

    def recipes(self) -> list[InputRecipe]:
        p = self.params
        out: list[InputRecipe] = []
        has = p.__contains__
        if has("past_values"):
            out.append(InputRecipe("time-series", self.time_series))
        if has("image_grid_thw") or has("grid_thw"):
            out.append(InputRecipe("qwen-vl-patches", self.qwen_vl))
        if has("input_features") or has("input_values") or has("audio_values"):
            out.extend(self.audio_recipes())
        if has("pixel_values"):
            video = self.is_video()
            if has("spatial_shapes"):
                out.append(InputRecipe("naflex-patches", self.naflex))
            if has("input_ids"):
                out.append(
                    InputRecipe("image-text", lambda b, s, g: self.multimodal(b, s, g, video))
                )
                out.append(
                    InputRecipe(
                        "video-text" if not video else "image-text-still",
                        lambda b, s, g: self.multimodal(b, s, g, not video),
                    )
                )
            out.append(
                InputRecipe(
                    "video" if video else "vision", lambda b, s, g: self.vision(b, s, g, video)
                )
            )
            out.append(
                InputRecipe(
                    "vision" if video else "video", lambda b, s, g: self.vision(b, s, g, not video)
                )
            )
            out.append(InputRecipe("image-pairs", self.image_pairs))
            out.append(InputRecipe("vision-large", self.vision_large))
        if has("pixel_values_videos") and not has("pixel_values"):
            out.append(InputRecipe("video-only", self.video_only))
        if has("input_ids") or has("decoder_input_ids"):
            out.append(InputRecipe("text", self.text))
        if has("inputs_embeds") and not has("input_ids"):
            out.append(InputRecipe("embeds", self.embeds))
        if has("hidden_states") and "hidden_states" in self.required:
            out.append(InputRecipe("hidden-states", self.embeds_as("hidden_states")))
        if has("states") and has("actions"):
            out.append(InputRecipe("decision", self.decision))
        if (
            not out
            or self.required - {"input_ids", "pixel_values", "input_values", "input_features"}
            == self.required
        ):
            out.append(InputRecipe("required-only", self.required_only))
            out.append(
                InputRecipe(
                    "required-only-channels-first",
                    lambda b, s, g: self.required_only(b, s, g, channels_first=True),
                )
            )
        return [InputRecipe(r.name, self.with_required(r.build)) for r in out]

    def with_required(
        self,
        build: Callable[[int, int, torch.Generator], dict[str, Any]],
    ) -> Callable[[int, int, torch.Generator], dict[str, Any]]:
        """Complete a recipe's inputs with every required argument it did not set."""

        def complete(b: int, s: int, g: torch.Generator) -> dict[str, Any]:
            out = build(b, s, g)
            wanted = self.required | (_NEEDED_OPTIONAL & set(self.params))
            for name in sorted(wanted - set(out)):
                value = self.default_for(name, out, b, s, g)
                if value is not None:
                    out[name] = value
            return out

        return complete

    def default_for(
        self, name: str, out: dict[str, Any], b: int, s: int, g: torch.Generator
    ) -> Any:
        """A plausible tensor for a required argument, from its name."""
        if name.endswith("input_ids"):
            return self.ctx.tokens(b, s, g)
        if name == "input_values":
            return torch.randn(b, _audio_len(self.ctx, s), generator=g)
        if name == "input_features":
            return torch.randn(b, _mel(self.ctx), _features_len(self.ctx, s)[0], generator=g)
        if name.endswith("_padding") and "past_values" in out:
            return torch.zeros(out["past_values"].shape[:2])
        if name == "visual_feats":
            dim = find_config_value(self.ctx.config, "visual_feat_dim") or self.hidden()
            return torch.randn(b, 4, dim, generator=g)
        if name == "visual_pos":
            dim = find_config_value(self.ctx.config, "visual_pos_dim") or 4
            return torch.rand(b, 4, dim, generator=g)
        if name == "freq":
            return torch.zeros(b, 1, dtype=torch.long)
        px = out.get("pixel_values")
        if "pixel" in name or (px is not None and "mask" in name):
            return _pixels(self.ctx, b, g) if px is None else torch.randn(px.shape, generator=g)
        return None

    # ── helpers ──
    def is_video(self) -> bool:
        return model_modality(getattr(self.ctx.config, "model_type", "")) == Modality.VIDEO

    def hidden(self) -> int:
        h = find_config_value(self.ctx.config, "hidden_size", "d_model", "n_embd", "dim")
        return h if isinstance(h, int) and h > 0 else 64

    # ── recipes ──
    def text(self, b: int, s: int, g: torch.Generator) -> dict[str, Any]:
        return _text_part(self.ctx, b, s, g)

    def embeds(self, b: int, s: int, g: torch.Generator) -> dict[str, Any]:
        return {"inputs_embeds": torch.randn(b, s, self.hidden(), generator=g)}

    def embeds_as(self, name: str) -> Callable[[int, int, torch.Generator], dict[str, Any]]:
        def build(b: int, s: int, g: torch.Generator) -> dict[str, Any]:
            return {name: torch.randn(b, s, self.hidden(), generator=g)}

        return build

    def vision(self, b: int, s: int, g: torch.Generator, video: bool) -> dict[str, Any]:
        out = _image_part(self.ctx, b, g, video=video)
        for name in self.required - set(out):
            if name in ("input_ids",):
                out.update(_text_part(self.ctx, b, s, g))
        return out

    def naflex(self, b: int, s: int, g: torch.Generator) -> dict[str, Any]:
        """Patchified images with their grid (SigLIP-2 NaFlex): ``(batch, h * w, c * p * p)``."""
        vc = getattr(self.ctx.config, "vision_config", None) or self.ctx.config
        patch = getattr(vc, "patch_size", 16) or 16
        c = getattr(vc, "num_channels", 3) or 3
        side = 4
        out: dict[str, Any] = {
            "pixel_values": torch.randn(b, side * side, c * patch * patch, generator=g),
            "pixel_attention_mask": torch.ones(b, side * side, dtype=torch.long),
            "spatial_shapes": torch.tensor([[side, side]] * b),
        }
        if "input_ids" in self.params:
            out.update(_text_part(self.ctx, b, s, g))
        return out

    def vision_large(self, b: int, s: int, g: torch.Generator) -> dict[str, Any]:
        """A larger, text-line shaped image (96 x 320) for backbones that pool the deep
        feature map with a fixed window (OCR recognisers)."""
        c = _num_channels(self.ctx.config)
        return {"pixel_values": torch.randn(b, c, 96, 320, generator=g)}

    def image_pairs(self, b: int, s: int, g: torch.Generator) -> dict[str, Any]:
        """Two images per example, ``(batch, 2, channels, height, width)`` (keypoint matching)."""
        px = torch.stack([_pixels(self.ctx, b, g), _pixels(self.ctx, b, g)], dim=1)
        return {"pixel_values": px}

    def video_only(self, b: int, s: int, g: torch.Generator) -> dict[str, Any]:
        px = _pixels(self.ctx, b, g)
        t = _video_frames(self.ctx)
        px = px.unsqueeze(1).expand(b, t, *px.shape[1:]).contiguous()
        return {"pixel_values_videos": px}

    def multimodal(self, b: int, s: int, g: torch.Generator, video: bool) -> dict[str, Any]:
        out = _image_part(self.ctx, b, g, video=video)
        kind = "video" if self.token_id("image") is None and self.token_id("video") else "image"
        return self.place_tokens(out, b, s, g, kind)

    def qwen_vl(self, b: int, s: int, g: torch.Generator) -> dict[str, Any]:
        scale = 0 if s <= 8 else 1
        if "image_grid_thw" in self.params:
            out = _qwen_patches(self.ctx, b, g, "pixel_values", "image_grid_thw", scale)
            if "input_ids" in self.params:
                out = self.place_tokens(out, b, s, g, "image")
                positions = _mrope_position_ids(self.ctx.model, out) if "position_ids" in self.params else None
                if positions is not None:
                    out["position_ids"] = positions
            return out
        out = _qwen_patches(self.ctx, b, g, "pixel_values", "grid_thw", scale)
        if "hidden_states" in self.params and "pixel_values" not in self.params:
            out["hidden_states"] = out.pop("pixel_values")
        return out

    def audio_recipes(self) -> list[InputRecipe]:
        p = self.params
        recipes: list[InputRecipe] = []
        if "input_features" in p:
            for i in range(len(_features_len(self.ctx, 8))):
                suffix = "" if i == 0 else f"-fixed{i}"
                recipes.append(
                    InputRecipe(
                        f"audio-features{suffix}",
                        lambda b, s, g, i=i: self.features(b, s, g, False, i),
                    )
                )
                recipes.append(
                    InputRecipe(
                        f"audio-features-t{suffix}",
                        lambda b, s, g, i=i: self.features(b, s, g, True, i),
                    )
                )
        if "input_values" in p:
            recipes.append(InputRecipe("audio-waveform", lambda b, s, g: self.waveform(b, s, g, 0)))
            recipes.append(
                InputRecipe("audio-waveform-ch", lambda b, s, g: self.waveform(b, s, g, 1))
            )
            recipes.append(InputRecipe("audio-spectrogram", self.spectrogram_values))
        return recipes

    def finish_audio(
        self, out: dict[str, Any], b: int, s: int, g: torch.Generator
    ) -> dict[str, Any]:
        if "input_ids" in self.params and self.token_id("audio") is not None:
            return self.place_tokens(out, b, s, g, "audio")
        if "input_ids" in self.params or "decoder_input_ids" in self.params:
            out.update(_text_part(self.ctx, b, s, g))
            out.pop("attention_mask", None)
        return out

    def features(
        self, b: int, s: int, g: torch.Generator, time_major: bool, length: int = 0
    ) -> dict[str, Any]:
        mel = _mel(self.ctx)
        t = _features_len(self.ctx, s)[length]
        shape = (b, t, mel) if time_major else (b, mel, t)
        out: dict[str, Any] = {"input_features": torch.randn(*shape, generator=g)}
        for mk in ("input_features_mask", "feature_attention_mask"):
            if mk in self.params:
                out[mk] = torch.ones(b, t, dtype=torch.long)
        return self.finish_audio(out, b, s, g)

    def waveform(self, b: int, s: int, g: torch.Generator, channel_dim: int) -> dict[str, Any]:
        n = _audio_len(self.ctx, s)
        if channel_dim:
            ch = find_config_value(self.ctx.config, "audio_channels", "channels", "num_channels")
            ch = ch if isinstance(ch, int) and 0 < ch <= 8 else 1
            x = torch.randn(b, ch, n, generator=g)
        else:
            x = torch.randn(b, n, generator=g)
        out: dict[str, Any] = {"input_values": x}
        return self.finish_audio(out, b, s, g)

    def spectrogram_values(self, b: int, s: int, g: torch.Generator) -> dict[str, Any]:
        mel = _mel(self.ctx)
        t = find_config_value(self.ctx.config, "max_length")
        t = t if isinstance(t, int) and 0 < t <= 4096 else 8 * s
        return self.finish_audio({"input_values": torch.randn(b, t, mel, generator=g)}, b, s, g)

    def time_series(self, b: int, s: int, g: torch.Generator) -> dict[str, Any]:
        c = self.ctx.config
        ctx_len = getattr(c, "context_length", None) or 16
        lags = getattr(c, "lags_sequence", None) or [0]
        past = ctx_len + max(lags)
        channels = getattr(c, "num_input_channels", None)
        nv = channels or getattr(c, "input_size", 1) or 1
        shape = (b, past) if nv == 1 and channels is None else (b, past, nv)
        out: dict[str, Any] = {"past_values": torch.randn(*shape, generator=g)}
        p = self.params
        ntf = getattr(c, "num_time_features", 0) or 0
        if "past_time_features" in p:
            out["past_time_features"] = torch.randn(b, past, ntf, generator=g)
        if "past_observed_mask" in p:
            out["past_observed_mask"] = torch.ones(*shape)
        pred = getattr(c, "prediction_length", None)
        if "future_time_features" in p and pred:
            out["future_time_features"] = torch.randn(b, pred, ntf, generator=g)
        if "static_categorical_features" in p and getattr(c, "num_static_categorical_features", 0):
            out["static_categorical_features"] = torch.zeros(
                b, c.num_static_categorical_features, dtype=torch.long
            )
        if "static_real_features" in p and getattr(c, "num_static_real_features", 0):
            out["static_real_features"] = torch.randn(b, c.num_static_real_features, generator=g)
        return out

    def required_only(
        self, b: int, s: int, g: torch.Generator, channels_first: bool = False
    ) -> dict[str, Any]:
        """Every required argument as a ``(batch, seq, hidden)`` float tensor (or
        ``(batch, hidden, seq)``), for encoders and decoders fed with hidden states."""
        out: dict[str, Any] = {}
        for name in self.required:
            shape = (b, self.hidden(), s) if channels_first else (b, s, self.hidden())
            out[name] = torch.randn(*shape, generator=g)
        return out

    def decision(self, b: int, s: int, g: torch.Generator) -> dict[str, Any]:
        """Trajectories of a decision transformer: states, actions, returns, time steps."""
        c = self.ctx.config
        state_dim = getattr(c, "state_dim", 4) or 4
        act_dim = getattr(c, "act_dim", 2) or 2
        return {
            "states": torch.randn(b, s, state_dim, generator=g),
            "actions": torch.randn(b, s, act_dim, generator=g),
            "rewards": torch.randn(b, s, 1, generator=g),
            "returns_to_go": torch.randn(b, s, 1, generator=g),
            "timesteps": torch.arange(s).expand(b, s).contiguous(),
            "attention_mask": torch.ones(b, s, dtype=torch.long),
        }

    # ── multimodal placeholders ──
    def token_id(self, kind: str) -> int | None:
        for name in (f"{kind}_token_id", f"{kind}_token_index", f"{kind}_token"):
            v = find_config_value(self.ctx.config, name)
            if isinstance(v, int) and v >= 0:
                return v
        return None

    def count_features(self, kind: str, inputs: dict[str, Any]) -> int | None:
        model = self.ctx.model
        fn = None
        for owner in (model, getattr(model, "model", None)):
            for name in (f"get_{kind}_features", "get_image_features"):
                fn = fn or getattr(owner, name, None)
        if fn is None:
            return None
        sig = inspect.signature(fn)
        kwargs = {k: v for k, v in inputs.items() if k in sig.parameters}
        with torch.no_grad():
            feats = fn(**kwargs)
        if hasattr(feats, "pooler_output") and feats.pooler_output is not None:
            feats = feats.pooler_output
        elif hasattr(feats, "last_hidden_state") and not isinstance(feats, torch.Tensor):
            feats = feats.last_hidden_state
        if isinstance(feats, tuple | list):
            tensors = [f for f in feats if isinstance(f, torch.Tensor)]
        elif isinstance(feats, torch.Tensor):
            tensors = [feats]
        else:
            return None
        hidden = find_config_value(self.ctx.config, "hidden_size", prefer=("text_config",))
        total = sum(t.numel() for t in tensors)
        if isinstance(hidden, int) and hidden > 0 and total % hidden == 0:
            return total // hidden
        return sum(math.prod(t.shape[:-1]) for t in tensors)

    def place_tokens(
        self, out: dict[str, Any], b: int, s: int, g: torch.Generator, kind: str
    ) -> dict[str, Any]:
        tok = self.token_id(kind)
        text = _text_part(self.ctx, b, s, g)
        if tok is None:
            out.update(text)
            return out
        n_total = self.count_features(kind, out)
        if n_total is None:
            out.update(text)
            return out
        per_row = n_total // b
        rest = n_total - per_row * b
        start = self.token_id("vision_start") if kind == "image" else None
        start = start if start is not None else self.token_id(f"{kind}_start")
        end = self.token_id("vision_end") if kind == "image" else None
        end = end if end is not None else self.token_id(f"{kind}_end")
        rows = []
        base = text["input_ids"]
        for r in range(b):
            n = per_row + (rest if r == b - 1 else 0)
            seg = [tok] * n
            if start is not None:
                seg = [start, *seg]
            if end is not None:
                seg = [*seg, end]
            row = torch.cat([base[r, :1], torch.tensor(seg, dtype=torch.long), base[r, 1:]])
            rows.append(row)
        width = max(len(r) for r in rows)
        ids = torch.stack(
            [torch.nn.functional.pad(r, (0, width - len(r)), value=int(r[-1])) for r in rows]
        )
        text["input_ids"] = ids
        if "attention_mask" in text:
            text["attention_mask"] = _attention_mask(b, width)
        if "token_type_ids" in text:
            text["token_type_ids"] = torch.zeros_like(ids)
        if "mm_token_type_ids" in self.params:
            text["mm_token_type_ids"] = (ids == tok).long()
        out.update(text)
        return out


def input_recipes(
    model: torch.nn.Module,
    config: Any | None = None,
    *,
    input_names: Collection[str] | None = None,
    tokenizer: Any = None,
) -> list[InputRecipe]:
    """Candidate input recipes for ``model``, most likely first.

    Args:
        model: the model whose ``forward`` the inputs are for.
        config: its configuration (defaults to ``model.config``).
        input_names: the inputs the model's tokenizer produces; ``attention_mask`` and
            ``token_type_ids`` outside it are left out unless ``forward`` requires them.
            ``None``: :func:`~export_core.inputs.input_names.tokenizer_input_names` of
            ``tokenizer`` (or of the model type's tokenizer class).
        tokenizer: the model's tokenizer or processor, when one is loaded.

    Returns:
        A non-empty list of recipes.
    """
    config = config if config is not None else model.config
    names = (frozenset(input_names) if input_names is not None
             else tokenizer_input_names(config, tokenizer))
    return _RecipeBook(model, config, names).recipes()


def make_example_inputs(
    model: torch.nn.Module,
    config: Any | None = None,
    *,
    shapes: tuple[tuple[int, int], ...] = DEFAULT_SHAPES,
    seed: int = 0,
    check: Callable[[dict[str, Any]], None] | None = None,
    input_names: Collection[str] | None = None,
    tokenizer: Any = None,
) -> ExampleInputs:
    """Build example inputs with the first recipe whose inputs pass ``check``.

    Args:
        model: the model whose ``forward`` the inputs are for.
        config: its configuration (defaults to ``model.config``).
        shapes: ``(batch, sequence)`` of each input set; the second differs from the first.
        seed: seed of the random generator (inputs are deterministic for a seed).
        check: called with each candidate set (typically runs the eager forward); raising
            rejects the recipe. ``None`` accepts the first recipe.
        input_names, tokenizer: see :func:`input_recipes`.

    Returns:
        The example inputs; ``sets`` has one entry when the second shape was rejected.

    Raises:
        RuntimeError: when every recipe fails; the message gives the first (likeliest) recipe's
            error and names the others.
    """
    errors: list[str] = []
    for recipe in input_recipes(model, config, input_names=input_names, tokenizer=tokenizer):
        try:
            g = torch.Generator().manual_seed(seed)
            first = recipe.build(shapes[0][0], shapes[0][1], g)
            if not first:
                raise ValueError("recipe built no inputs")
            if check is not None:
                check(first)
        except Exception as e:  # noqa: BLE001 - try the next recipe
            logger.debug("input recipe %s rejected", recipe.name, exc_info=True)
            errors.append(f"{recipe.name}: {first_line(e)}")
            continue
        sets = [first]
        used = [shapes[0]]
        for batch, seq in shapes[1:]:
            # Fallbacks keep the sizes >= 2 and change batch or sequence alone, for models
            # that need a batch multiple of a codebook count or a fixed sequence length.
            base_b, base_s = shapes[0]
            for cand in (
                (batch, seq),
                (2 * base_b, seq),
                (base_b, seq),
                (batch, base_s),
                (2 * base_b, base_s),
            ):
                if cand in used:
                    continue
                try:
                    g = torch.Generator().manual_seed(seed + len(sets))
                    other = recipe.build(cand[0], cand[1], g)
                    if _shape_signature(other) == _shape_signature(first):
                        continue
                    if check is not None:
                        check(other)
                except Exception:  # noqa: BLE001 - try the next shape, else keep one set
                    logger.debug("second input set %s rejected", cand, exc_info=True)
                    continue
                sets.append(other)
                used.append(cand)
                break
        return ExampleInputs(sets=tuple(sets), recipe=recipe.name, shapes=tuple(used))
    if not errors:
        raise RuntimeError("no input recipe fits the model's forward")
    # the first recipe is the likeliest layout: its error leads, whole; the others by name only
    tried = ", ".join(e.split(":", 1)[0] for e in errors[1:])
    raise RuntimeError(f"no input recipe works; {errors[0]}" + (f" (also tried: {tried})" if tried else ""))

