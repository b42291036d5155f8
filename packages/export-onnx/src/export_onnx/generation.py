"""Text generation over an ONNX ``text-generation-with-past`` export, in ONNX Runtime.

``export_onnx.generate(out_dir, ["Once upon a time"], max_new_tokens=32)`` loads the prefill and
decode graphs named in ``generation.json`` and runs the loop of
:mod:`export_core.generation.loop`; no eager model and no torch are needed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from export_core.errors import RuntimeLoadError
from export_core.generation import (
    GenerationLoop,
    GenerationOutput,
    GenerationStep,
    SamplingOptions,
    load_tokenizer,
    read_manifest,
)

from .external_data import external_data_files

__all__ = ["OrtGraphSession", "OnnxGenerator", "generate", "open_session"]


class OrtGraphSession:
    """One ONNX graph in an ONNX Runtime session, run on named numpy arrays.

    Raises:
        RuntimeLoadError: ONNX Runtime cannot load the graph, or its external data is not a
            plain file beside it.
    """

    def __init__(self, path: str | Path, providers: Sequence[str] = ("CPUExecutionProvider",)) -> None:
        import onnxruntime as ort

        try:
            external_data_files(path)
        except ValueError as e:
            raise RuntimeLoadError(f"refusing to load {path}: {e}", stage="runtime") from e
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(str(path), opts, providers=list(providers))
        except Exception as e:
            msg = next((ln for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
            raise RuntimeLoadError(f"ONNX Runtime cannot load {path}: {msg}", stage="runtime") from e
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run on ``feeds`` (every graph input by name); returns every output by name."""
        values = self.session.run(None, {k: np.ascontiguousarray(v) for k, v in feeds.items()})
        return dict(zip(self.output_names, values))


def open_session(path: Path) -> OrtGraphSession:
    """The :class:`OrtGraphSession` of one saved graph (for the export's generation check)."""
    return OrtGraphSession(path)


class OnnxGenerator:
    """Generation from an export directory: the graphs in ONNX Runtime and the tokenizer saved
    beside them.

    Args:
        directory: a ``text-generation-with-past`` export directory.
        providers: ONNX Runtime execution providers.

    Raises:
        GenerationError: the directory has no manifest (not a with-past export).
        RuntimeLoadError: a graph cannot be loaded.
    """

    def __init__(self, directory: str | Path, providers: Sequence[str] = ("CPUExecutionProvider",)) -> None:
        self.directory = Path(directory)
        self.manifest = read_manifest(self.directory)
        sessions = {role: OrtGraphSession(self.directory / g.path, providers)
                    for role, g in self.manifest.graphs.items()}
        self.loop = GenerationLoop(self.manifest, sessions)
        self._tokenizer: Any = None

    @property
    def tokenizer(self) -> Any:
        """The saved tokenizer (loaded on first use)."""
        if self._tokenizer is None:
            self._tokenizer = load_tokenizer(self.directory)
        return self._tokenizer

    def stream(self, prompts: Sequence[str] | Sequence[Sequence[int]], **options: Any) -> Iterator[GenerationStep]:
        """Yield each step's tokens as they are chosen (options: ``max_new_tokens``,
        ``do_sample``, ``temperature``, ``top_k``, ``top_p``, ``seed``, ``stop_on_eos``)."""
        ids, loop_options = self._prepare(prompts, options)
        return self.loop.stream(ids, **loop_options)

    def generate(self, prompts: Sequence[str] | Sequence[Sequence[int]], **options: Any) -> GenerationOutput:
        """Generate to the end; token ids per row (options as :meth:`stream`)."""
        ids, loop_options = self._prepare(prompts, options)
        return self.loop.generate(ids, **loop_options)

    def _prepare(self, prompts: Sequence[Any], options: dict[str, Any]) -> tuple[list[list[int]], dict[str, Any]]:
        ids = [self.tokenizer.encode(p) if isinstance(p, str) else list(p) for p in prompts]
        sampling = SamplingOptions(
            do_sample=bool(options.pop("do_sample", False)), temperature=float(options.pop("temperature", 1.0)),
            top_k=int(options.pop("top_k", 0)), top_p=float(options.pop("top_p", 1.0)),
            seed=options.pop("seed", None))
        return ids, {"sampling": sampling, **options}


def generate(directory: str | Path, prompts: Sequence[str] | Sequence[Sequence[int]], **options: Any) -> list[str]:
    """Generate text for each prompt from an ONNX export directory.

    Args:
        directory: a ``text-generation-with-past`` export.
        prompts: texts (tokenized with the saved tokenizer) or token-id lists.
        options: see :meth:`OnnxGenerator.stream`.

    Returns:
        The generated text of each prompt (without the prompt).
    """
    gen = OnnxGenerator(directory)
    out = gen.generate(prompts, **options)
    return [gen.tokenizer.decode(row) for row in out.sequences]
