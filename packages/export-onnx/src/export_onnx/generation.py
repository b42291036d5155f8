"""Text generation over an ONNX ``text-generation-with-past`` export, in ONNX Runtime.

``export_onnx.generate(out_dir, ["Once upon a time"], max_new_tokens=32)`` loads the prefill and
decode graphs named in ``generation.json`` and runs the loop of
:mod:`export_core.generation.loop`; no eager model and no torch are needed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from export_core.errors import RuntimeLoadError
from export_core.generation.generator import Generator
from export_core.generation.manifest import GraphSpec

from .ort_session import ort_session

__all__ = ["OrtGraphSession", "OnnxGenerator", "generate", "open_session"]


class OrtGraphSession:
    """One ONNX graph in an ONNX Runtime session, run on named numpy arrays.

    Raises:
        RuntimeLoadError: ONNX Runtime cannot load the graph, or its external data is not a
            plain file beside it.
    """

    def __init__(self, path: str | Path, providers: Sequence[str] = ("CPUExecutionProvider",)) -> None:
        self.session = ort_session(Path(path), providers)
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run on ``feeds`` (every graph input by name); returns every output by name.

        Raises:
            RuntimeLoadError: ONNX Runtime failed (an input beyond the graph's shapes).
        """
        try:
            values = self.session.run(None, {k: np.asarray(v, order="C") for k, v in feeds.items()})
        except Exception as e:
            msg = next((ln for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
            raise RuntimeLoadError(f"ONNX Runtime failed to run the graph: {msg}", stage="runtime") from e
        return dict(zip(self.output_names, values))


def open_session(path: Path, spec: GraphSpec | None = None) -> OrtGraphSession:
    """The :class:`OrtGraphSession` of one saved graph, on the CPU (names from the graph)."""
    return OrtGraphSession(path)


class OnnxGenerator(Generator):
    """Generation from an ONNX export directory in ONNX Runtime (see
    :class:`export_core.generation.generator.Generator`).

    Args:
        directory: a ``text-generation-with-past`` export directory written by ``export-onnx``.
        providers: ONNX Runtime execution providers.
    """

    def __init__(self, directory: str | Path, providers: Sequence[str] = ("CPUExecutionProvider",)) -> None:
        super().__init__(directory, lambda path, spec: OrtGraphSession(path, providers), backend="onnx")


def generate(directory: str | Path, prompts: Sequence[str] | Sequence[Sequence[int]], **options: Any) -> list[str]:
    """The generated text of each prompt (texts or token-id lists) from an ONNX export
    directory; options and errors as :meth:`export_core.generation.generator.Generator.stream`."""
    return OnnxGenerator(directory).generate_text(prompts, **options)
