"""The sweep's ``generate`` mode: export each generative model type with its cache, then generate.

For every model type with a generative head in ``transformers``' auto mappings (a causal LM, a
sequence-to-sequence LM or a speech sequence-to-sequence model), :func:`generate_job` builds the
zoo's tiny model with that head and runs :func:`export_core.generation.export_with_past` on each
backend: the export ``export-onnx DIR --task text-generation-with-past --max-length N`` (or the
encoder-decoder task) runs, with the prefill and decode graphs (encoder-decoders: encoder,
prefill, decode) each validated against eager, then greedy generation from the saved graphs
compared token for token with eager ``generate()`` at batch 1, at a left-padded batch of 2 and,
where the budget allows, up to the maximum length. A ``pass`` means that whole check passed.

The records have the export mode's shape (``{"status", "stage", "error", "seconds", ...}`` per
backend) plus the graphs exported, the cache layout and the tokens compared; they go to their own
results file, which ``export-sweep coverage --generate FILE`` renders as COVERAGE.md's
generation section.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from export_sweep.errors import first_line
from export_sweep.sweep.backends import BACKENDS, get_backend
from export_sweep.sweep.checkpoint import StageProgress
from export_sweep.sweep.job import (
    LoadedModel,
    SharedCapture,
    backend_record,
    failure,
    fired_workarounds,
    not_installed,
    run_job,
)
from export_sweep.sweep.skips import SkipEntry

__all__ = [
    "GENERATE_MAX_LENGTH",
    "GENERATE_TARGET",
    "GENERATIVE_MAPPINGS",
    "generate_backend",
    "generate_job",
    "generative_class",
    "generative_types",
    "load_generative",
]

GENERATE_TARGET = "export_sweep.sweep.generate:generate_job"
"""The job a worker runs in the ``generate`` mode (``run_sweep(job_target=...)``)."""

GENERATE_MAX_LENGTH = 256
"""The sweep's ``max_length`` (prompt + generated tokens): the model's position limit, at most
this. The check generates to it in its longest case, so it bounds a job's time."""

GENERATIVE_MAPPINGS: tuple[str, ...] = (
    "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
    "MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES",
    "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
)
"""The ``transformers.models.auto.modeling_auto`` mappings whose classes generate, in the order
a model type's head is looked up (an encoder-decoder's head first)."""


def generative_class(model_type: str) -> str | None:
    """The generative head class of ``model_type`` (``"LlamaForCausalLM"``), or ``None`` when
    the auto mappings list none."""
    from transformers.models.auto import modeling_auto

    for name in GENERATIVE_MAPPINGS:
        cls = getattr(modeling_auto, name, {}).get(model_type)
        if isinstance(cls, tuple | list):
            cls = cls[0] if cls else None
        if cls:
            return str(cls)
    return None


def generative_types(model_types: Iterable[str]) -> list[str]:
    """The types of ``model_types`` that have a generative head, in order."""
    return [t for t in dict.fromkeys(model_types) if generative_class(t) is not None]


def _generation_ready(config: Any, cls: type) -> None:
    """Set what ``generate()`` with a cache needs and a real checkpoint of the head carries: the
    cache on (the zoo turns it off), ``is_decoder`` for a causal-LM head of an encoder family
    (``BertLMHeadModel`` caches nothing without it), and an encoder-decoder's
    ``decoder_start_token_id`` (the pad token, as T5's checkpoints have it) when the default
    config has none."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from export_sweep.zoo.build import set_everywhere

    set_everywhere(config, "use_cache", True)
    encoder_decoder = bool(getattr(config, "is_encoder_decoder", False))
    if (not encoder_decoder and getattr(config, "is_decoder", None) is False
            and cls.__name__ in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values()):
        config.is_decoder = True
    if encoder_decoder and getattr(config, "decoder_start_token_id", None) is None:
        start = next((v for v in (getattr(config, "pad_token_id", None),
                                  getattr(config, "bos_token_id", None)) if isinstance(v, int)), 0)
        config.decoder_start_token_id = start


def load_generative(model_type: str) -> LoadedModel:
    """The zoo's tiny model of ``model_type`` with its generative head, ready to generate with a
    cache (:func:`_generation_ready`).

    Raises:
        ZooBuildError: the type has no generative head or the model cannot be built.
    """
    from export_sweep.zoo.build import ZooBuildError, build_tiny_model

    cls = generative_class(model_type)
    if cls is None:
        raise ZooBuildError("class", model_type, "no generative head class in the auto mappings")
    t0 = time.perf_counter()
    # the zoo's inputs are the base model's; generation makes its own prompts
    tiny = build_tiny_model(model_type, model_class=cls, forward=False, configure=_generation_ready)
    model = tiny.model
    gen = getattr(model, "generation_config", None)
    if gen is not None:
        gen.use_cache = True
        if getattr(gen, "decoder_start_token_id", None) is None:
            gen.decoder_start_token_id = getattr(model.config, "decoder_start_token_id", None)
    _check_eager_generate(model, model_type)
    return LoadedModel(model, None, tiny.class_name, str(tiny.modality), time.perf_counter() - t0)


def _check_eager_generate(model: Any, model_type: str) -> None:
    """Run eager ``generate()`` for 2 tokens on a left-padded batch of 2 random 6-token prompts
    (a model whose main input is token ids; a speech model's features are the exporter's to
    make): a tiny model that cannot generate in eager has no tokens to compare with, which is a
    model-side limit, not an export failure.

    Raises:
        ZooBuildError: ``stage="generate"`` with eager's error.
    """
    import torch

    from export_sweep.zoo.build import ZooBuildError

    if getattr(model, "main_input_name", "input_ids") != "input_ids":
        return
    gen = getattr(model, "generation_config", None)
    pad = getattr(gen, "pad_token_id", None)
    pad = pad if isinstance(pad, int) else 0
    vocab = int(getattr(model.config.get_text_config(), "vocab_size", 0) or 16)
    ids = torch.randint(3, max(4, vocab), (2, 6), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    ids[1, :2], mask[1, :2] = pad, 0
    try:
        with torch.no_grad():
            model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=2, do_sample=False,
                           use_cache=True, pad_token_id=pad)
    except Exception as e:
        raise ZooBuildError("generate", model_type, f"eager generate() fails on the tiny model: "
                            f"{first_line(e)}") from e


def generate_backend(
    model: Any,
    backend: str,
    *,
    class_name: str = "",
    max_length: int | None = None,
    skips: Iterable[SkipEntry] | None = None,
    optimize_off: Iterable[SkipEntry] | None = None,
) -> dict[str, Any]:
    """Export ``model``'s generation graphs to one backend and compare generation with eager.

    Args:
        model: an eager generative model (``…ForCausalLM``, or an encoder-decoder).
        backend: a backend name of :data:`~export_sweep.sweep.backends.BACKEND_TABLE`.
        class_name: the model class, looked up in the skip lists.
        max_length: prompt + generated tokens (default: the position limit, at most
            :data:`GENERATE_MAX_LENGTH`).
        skips: ``EXPORT_SKIPS`` override (tests).
        optimize_off: ``ONNX_DISABLE_OPTIMIZE`` override (tests).

    Returns:
        ``{"status", "stage", "error", "seconds", "max_length"}``, plus, when the export
        returned, ``"graphs"`` (the roles exported), ``"cache"`` (layers and their kinds),
        ``"cases"``, ``"tokens"`` (tokens compared with eager, all cases and rows), ``"ties"``
        (rows a top-2 tie ended) and ``"workarounds"`` (fired in any graph); a failed export's
        stage is that of the graph that failed, ``generate`` when the tokens differ.
    """
    from export_core.generation.export import default_max_length, export_with_past

    spec = get_backend(backend)
    options = spec.options(class_name, optimize_off)
    try:
        exporter = spec.make_exporter(options)
    except ImportError as e:
        return not_installed(spec, e)
    length = int(max_length or default_max_length(model.config, cap=GENERATE_MAX_LENGTH))
    extra: dict[str, Any] = {"max_length": length, **options}
    t0 = time.perf_counter()
    status, stage, error = "pass", None, None
    try:
        result = export_with_past(exporter, model, output=None, max_length=length)
        check = result.check
        extra.update(
            graphs=sorted(result.graphs),
            cache=result.report.get("cache", {}),
            cases=len(check.cases) if check else 0,
            tokens=sum(sum(c.compared) for c in check.cases) if check else 0,
            ties=sum(t is not None for c in check.cases for t in c.ties) if check else 0,
            workarounds=sorted({w for g in result.graphs.values()
                                for w in fired_workarounds(getattr(g, "report", {}) or {})}),
        )
        del result
    except Exception as e:  # noqa: BLE001 - an exporter bug is a failure of this model
        status, stage, error = failure(e)
    return backend_record(status, stage, error, time.perf_counter() - t0, class_name=class_name,
                          backend=spec.name, skips=skips, extra=extra)


def generate_job(
    model_type: str,
    backends: Sequence[str] = BACKENDS,
    *,
    progress_path: Any = None,
) -> dict[str, Any]:
    """Build one type's generative tiny model and run :func:`generate_backend` on each backend.

    Args:
        model_type: a ``config.model_type`` key with a generative head.
        backends: backends to export to.
        progress_path: a file to keep a :class:`~export_sweep.sweep.checkpoint.JobProgress` in.

    Returns:
        The type record, as :func:`~export_sweep.sweep.job.export_job`'s (a type without a
        generative head, or one that cannot be built, is ``skip`` on every backend).
    """

    def export_one(loaded: LoadedModel, backend: str, shared: SharedCapture | None,
                   listener: StageProgress) -> dict[str, Any]:
        return generate_backend(loaded.model, backend, class_name=loaded.class_name)

    return run_job(
        model_type,
        backends,
        load=load_generative,
        export_one=export_one,
        progress_path=progress_path,
    )
