"""Generation from an export directory: the manifest's graphs, the saved tokenizer, the loop.

Backends subclass :class:`Generator` with their runtime's session (ONNX Runtime, the ExecuTorch
runtime); prompts may be texts (tokenized with the tokenizer saved beside the graphs) or token
ids.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from .loop import GenerationLoop, GenerationOutput, GenerationStep, GraphSession
from .manifest import GenerationError, GraphSpec, read_manifest
from .sampling import SamplingOptions
from .tokenizer import TextTokenizer, load_tokenizer

__all__ = ["Generator", "LOOP_OPTIONS"]

LOOP_OPTIONS = ("max_new_tokens", "min_new_tokens", "stop_on_eos", "logits_callback", "encoder_inputs")
_SAMPLING_OPTIONS = ("do_sample", "temperature", "top_k", "top_p", "seed")


class Generator:
    """The graphs of one export loaded in a runtime, ready to generate.

    Args:
        directory: a ``-with-past`` export directory (``text-generation-with-past``,
            ``text2text-generation-with-past``, ``automatic-speech-recognition-with-past``).
        open_session: loads one graph file (with its manifest entry: input and output names)
            as a :class:`~export_core.generation.loop.GraphSession`.
        backend: the backend the export must have been made for (``"onnx"``, ``"executorch"``;
            an export of a sub-key, ``"executorch.xnnpack"``, is one of ``"executorch"``).

    Raises:
        GenerationError: no manifest, or a manifest of another backend.
        RuntimeLoadError: a graph cannot be loaded.
    """

    def __init__(self, directory: str | Path, open_session: Callable[[Path, GraphSpec], GraphSession], backend: str) -> None:
        self.directory = Path(directory)
        self.manifest = read_manifest(self.directory)
        # a backend key may name a delegate below it ("executorch.xnnpack" for "executorch")
        made_by = self.manifest.backend
        if made_by != backend and not made_by.startswith(backend + "."):
            raise GenerationError(f"{self.directory} holds a {made_by} export; "
                                  f"use export-{made_by.split('.')[0]} generate")
        sessions = {role: open_session(self.directory / g.path, g) for role, g in self.manifest.graphs.items()}
        self.loop = GenerationLoop(self.manifest, sessions)
        self._tokenizer: TextTokenizer | None = None

    @property
    def tokenizer(self) -> TextTokenizer:
        """The saved tokenizer (loaded on first use).

        Raises:
            GenerationError: the export has no ``tokenizer.json``.
        """
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.directory)
        return self._tokenizer

    def encode(self, prompts: Sequence[str] | Sequence[Sequence[int]] | None) -> list[list[int]] | None:
        """Token ids of each prompt (texts through the tokenizer, id lists as they are);
        ``None`` stays ``None`` (an encoder-decoder given ``encoder_inputs``)."""
        if prompts is None:
            return None
        return [self.tokenizer.encode(p) if isinstance(p, str) else [int(t) for t in p] for p in prompts]

    def stream(self, prompts: Sequence[str] | Sequence[Sequence[int]] | None = None,
               **options: Any) -> Iterator[GenerationStep]:
        """Yield each step's tokens as they are chosen.

        ``prompts`` are a decoder-only model's prompts or an encoder-decoder's sources (T5,
        BART); a speech model (Whisper) takes ``encoder_inputs={"input_features": array}``
        (float32 ``(batch, mel_bins, frames)``, from its feature extractor) instead.

        Options: ``max_new_tokens`` (default 32), ``min_new_tokens`` (default 0: EOS is not
        chosen before), ``stop_on_eos`` (default ``True``), ``encoder_inputs``,
        ``do_sample``, ``temperature``, ``top_k``, ``top_p``, ``seed`` (see
        :class:`~export_core.generation.sampling.SamplingOptions`).

        Raises:
            GenerationError: an unknown option, or a request beyond the export's bounds.
        """
        return self.loop.stream(self.encode(prompts), **_loop_options(options))

    def generate(self, prompts: Sequence[str] | Sequence[Sequence[int]] | None = None,
                 **options: Any) -> GenerationOutput:
        """Generate to the end (options as :meth:`stream`); token ids per row."""
        return self.loop.generate(self.encode(prompts), **_loop_options(options))

    def generate_text(self, prompts: Sequence[str] | Sequence[Sequence[int]] | None = None,
                      **options: Any) -> list[str]:
        """The generated text of each prompt, without the prompt (options as :meth:`stream`).

        Raises:
            GenerationError: see :meth:`stream`; the export has no tokenizer.
        """
        return [self.tokenizer.decode(row) for row in self.generate(prompts, **options).sequences]


def _loop_options(options: dict[str, Any]) -> dict[str, Any]:
    unknown = set(options) - set(LOOP_OPTIONS) - set(_SAMPLING_OPTIONS)
    if unknown:
        raise GenerationError(f"unknown generation option(s) {sorted(unknown)}; known: "
                              f"{sorted((*LOOP_OPTIONS, *_SAMPLING_OPTIONS))}")
    sampling = {k: options[k] for k in _SAMPLING_OPTIONS if k in options}
    try:
        loop = {k: options[k] for k in LOOP_OPTIONS if k in options}
        loop["sampling"] = SamplingOptions(**sampling)
    except ValueError as e:
        raise GenerationError(str(e)) from e
    return loop
