"""The generation manifest: which graphs an export wrote, their roles, names, cache layout, bounds.

Written as ``generation.json`` beside the graphs. Reading it needs neither torch nor the model:
the generate loops of both backends start from it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ExportError

__all__ = ["MANIFEST_NAME", "MANIFEST_FORMAT", "GraphSpec", "CacheLayout", "TokenRules",
           "GenerationManifest", "GenerationError", "read_manifest"]

MANIFEST_NAME = "generation.json"
MANIFEST_FORMAT = 1


class GenerationError(ExportError):
    """Generation from exported graphs failed or was refused (bad manifest, prompt beyond the
    maximum length, a graph that returns no logits)."""

    stage = "generate"


@dataclass(frozen=True)
class GraphSpec:
    """One exported graph of a generative model.

    Attributes:
        role: ``"prefill"`` (the prompt, no cache in), ``"decode"`` (one new token per row and
            the cache of the previous step) or, for an encoder-decoder, ``"encoder"`` (the
            source, run once; its prefill is the decoder's first step on the start tokens).
        path: the artifact, relative to the export directory (``prefill/model.onnx``).
        inputs: the graph's input names, in order.
        outputs: its output names, in order; ``logits`` first.
    """

    role: str
    path: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class CacheLayout:
    """How the cache travels between steps.

    Attributes:
        num_layers: decoder layers holding a cache entry.
        feeds: ``{decode input name: output name of the previous step}``, e.g.
            ``{"past_key_values.0.key": "present.0.key"}``; an encoder-decoder's have both halves
            (``past_key_values.0.decoder.key``, ``past_key_values.0.encoder.key``).
        axes: the axis names of a cache tensor, ``("batch", "kv_heads", "past_sequence",
            "head_dim")``.
        layer_kinds: per layer, the ``transformers`` cache layer class (``DynamicLayer``,
            ``DynamicSlidingWindowLayer``, ``StaticLayer``).
        static_length: a static cache's fixed length (``max_cache_len``; ``None``: the cache
            grows by a token per step). The decode graph then takes and returns
            ``(batch, kv_heads, static_length, head_dim)`` tensors and each layer's
            ``cumulative_length`` (0-d int64, the positions written), and a 4-D boolean
            ``attention_mask`` ``(batch, 1, 1, static_length)``; the loop copies the prefill's
            ``present`` tensors into zero buffers of that length.
    """

    num_layers: int
    feeds: dict[str, str]
    axes: tuple[str, ...] = ("batch", "kv_heads", "past_sequence", "head_dim")
    layer_kinds: tuple[str, ...] = ()
    static_length: int | None = None


@dataclass(frozen=True)
class TokenRules:
    """The token rules of the model's generation config that ``generate`` applies to the
    scores, applied by the loop in the same way.

    Attributes:
        forced_bos_token_id: the first new token (mBART's language token).
        forced_eos_token_id: the token at the last step of the budget (BART).
        suppress_tokens: never chosen (Whisper).
        begin_suppress_tokens: not chosen as the first new token (Whisper).
    """

    forced_bos_token_id: int | None = None
    forced_eos_token_id: tuple[int, ...] = ()
    suppress_tokens: tuple[int, ...] = ()
    begin_suppress_tokens: tuple[int, ...] = ()

    @classmethod
    def from_generation_config(cls, config: Any, vocab: int) -> TokenRules:
        """The rules of a ``transformers`` ``GenerationConfig`` (ids outside ``[0, vocab)``
        dropped: a tiny model's config may keep the full model's ids)."""
        def ids(value: Any) -> tuple[int, ...]:
            if value is None:
                return ()
            values = value if isinstance(value, list | tuple) else [value]
            return tuple(int(v) for v in values if isinstance(v, int) and 0 <= v < vocab)

        bos = ids(getattr(config, "forced_bos_token_id", None))
        return cls(bos[0] if bos else None, ids(getattr(config, "forced_eos_token_id", None)),
                   ids(getattr(config, "suppress_tokens", None)),
                   ids(getattr(config, "begin_suppress_tokens", None)))


@dataclass(frozen=True)
class GenerationManifest:
    """What a generate loop needs to know about an export (``generation.json``).

    Attributes:
        task: ``text-generation-with-past``, ``text2text-generation-with-past`` or
            ``automatic-speech-recognition-with-past``.
        architecture: the model class, e.g. ``LlamaForCausalLM``.
        backend: ``onnx`` or ``executorch``.
        graphs: the graphs by role.
        cache: the cache layout.
        max_length: the longest sequence (prompt + generated tokens, in tokens) the graphs
            accept; the loop refuses a request beyond it.
        max_batch: the largest batch the graphs accept.
        pad_token_id, eos_token_ids, bos_token_id: special tokens (from the generation config,
            else the tokenizer).
        position_ids: how the loop builds ``position_ids`` when a graph takes them:
            ``"mask_cumsum"`` (``cumsum(attention_mask) - 1``, 1 at padding, as ``generate``).
        decoder_prompt: an encoder-decoder's decoder start tokens (empty for a decoder-only
            model); ``max_length`` counts them.
        encoder_outputs: ``{decoder graph input: encoder graph output}``
            (``{"encoder_outputs.last_hidden_state": "last_hidden_state"}``).
        encoder_inputs: the encoder graph's inputs the caller provides (``input_ids`` and
            ``attention_mask``, right-padded; or ``input_features``).
        max_source_length: the longest encoder input, in tokens (or frames).
        token_rules: the generation config's :class:`TokenRules`.
        format: the manifest format version.
    """

    task: str
    architecture: str
    backend: str
    graphs: dict[str, GraphSpec]
    cache: CacheLayout
    max_length: int
    max_batch: int
    pad_token_id: int
    eos_token_ids: tuple[int, ...] = ()
    bos_token_id: int | None = None
    position_ids: str = "mask_cumsum"
    decoder_prompt: tuple[int, ...] = ()
    encoder_outputs: dict[str, str] = field(default_factory=dict)
    encoder_inputs: tuple[str, ...] = ()
    max_source_length: int | None = None
    token_rules: TokenRules = field(default_factory=TokenRules)
    format: int = MANIFEST_FORMAT
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_encoder_decoder(self) -> bool:
        """The export has an encoder graph (its prefill is the decoder's first step)."""
        return "encoder" in self.graphs

    def graph(self, role: str) -> GraphSpec:
        """The graph of ``role``.

        Raises:
            GenerationError: the export has no graph of that role.
        """
        try:
            return self.graphs[role]
        except KeyError:
            raise GenerationError(f"the export has no {role!r} graph (it has {sorted(self.graphs)})") from None

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return data

    def write(self, directory: Path) -> Path:
        """Write ``generation.json`` into ``directory``; returns its path."""
        path = Path(directory) / MANIFEST_NAME
        path.write_text(json.dumps(self.as_dict(), indent=2) + "\n")
        return path


def _token_rules(data: dict[str, Any]) -> TokenRules:
    bos = data.get("forced_bos_token_id")
    return TokenRules(int(bos) if bos is not None else None,
                      *(tuple(int(t) for t in data.get(k, ())) for k in
                        ("forced_eos_token_id", "suppress_tokens", "begin_suppress_tokens")))


def read_manifest(directory: str | Path) -> GenerationManifest:
    """Read ``generation.json`` from an export directory.

    Raises:
        GenerationError: no manifest (not a ``*-with-past`` export), an unknown format, or a
            manifest whose graphs are missing on disk.
    """
    directory = Path(directory)
    path = directory / MANIFEST_NAME
    if not path.is_file():
        raise GenerationError(
            f"{directory} has no {MANIFEST_NAME}: export the model with --task "
            "text-generation-with-past (text2text-generation-with-past, "
            "automatic-speech-recognition-with-past) first")
    try:
        data = json.loads(path.read_text())
        if data.get("format") != MANIFEST_FORMAT:
            raise GenerationError(f"{path}: manifest format {data.get('format')!r} is not "
                                  f"{MANIFEST_FORMAT}; re-export with this version")
        graphs = {role: GraphSpec(g["role"], g["path"], tuple(g["inputs"]), tuple(g["outputs"]))
                  for role, g in data["graphs"].items()}
        c = data["cache"]
        cache = CacheLayout(int(c["num_layers"]), dict(c["feeds"]), tuple(c["axes"]),
                            tuple(c.get("layer_kinds", ())), c.get("static_length"))
        manifest = GenerationManifest(
            task=data["task"], architecture=data["architecture"], backend=data["backend"],
            graphs=graphs, cache=cache, max_length=int(data["max_length"]),
            max_batch=int(data["max_batch"]), pad_token_id=int(data["pad_token_id"]),
            eos_token_ids=tuple(int(t) for t in data.get("eos_token_ids", ())),
            bos_token_id=data.get("bos_token_id"), position_ids=data.get("position_ids", "mask_cumsum"),
            decoder_prompt=tuple(int(t) for t in data.get("decoder_prompt", ())),
            encoder_outputs=dict(data.get("encoder_outputs", {})),
            encoder_inputs=tuple(data.get("encoder_inputs", ())),
            max_source_length=data.get("max_source_length"),
            token_rules=_token_rules(data.get("token_rules", {})),
            extra=dict(data.get("extra", {})),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise GenerationError(f"{path} is not a valid generation manifest: {e}") from e
    for g in manifest.graphs.values():
        if not (directory / g.path).is_file():
            raise GenerationError(f"{path} names {g.path}, which is missing")
    return manifest
