"""Text generation over an ExecuTorch ``text-generation-with-past`` export, in
``executorch.runtime``.

``export_executorch.generate(out_dir, ["Once upon a time"], max_new_tokens=32)`` loads the
prefill and decode programs named in ``generation.json`` and runs the loop of
:mod:`export_core.generation.loop`; no eager model is needed (the runtime's Python API takes
torch tensors, so torch is the container, nothing more).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from export_core.generation.generator import Generator
from export_core.generation.manifest import GraphSpec

from .runner import ExecutorchRunner

__all__ = ["ExecutorchGraphSession", "ExecutorchGenerator", "generate", "open_session"]


class ExecutorchGraphSession:
    """One ``.pte`` program's ``forward`` method, run on named numpy arrays.

    Args:
        path: the ``.pte`` file.
        input_names: the program's input names, in order (from the manifest).
        output_names: its output names, in order.

    Raises:
        RuntimeLoadError: the runtime cannot load the program.
    """

    def __init__(self, path: str | Path, input_names: Sequence[str], output_names: Sequence[str]) -> None:
        self.runner = ExecutorchRunner(Path(path))
        self.input_names = list(input_names)
        self.output_names = list(output_names)

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run on ``feeds`` (every input by name); returns every output by name.

        Raises:
            RuntimeLoadError: ``execute`` failed (an input beyond its planned bound).
        """
        import torch

        # np.asarray keeps a 0-d array 0-d (np.ascontiguousarray makes it 1-d): a static
        # cache's cumulative_length is a 0-d input
        values = tuple(torch.from_numpy(np.asarray(feeds[n], order="C")) for n in self.input_names)
        outputs = self.runner(values)
        return {n: o.numpy() for n, o in zip(self.output_names, outputs)}


def open_session(path: Path, spec: GraphSpec) -> ExecutorchGraphSession:
    """The :class:`ExecutorchGraphSession` of one saved graph, named by its manifest entry."""
    return ExecutorchGraphSession(path, spec.inputs, spec.outputs)


class ExecutorchGenerator(Generator):
    """Generation from an ExecuTorch export directory (see
    :class:`export_core.generation.generator.Generator`).

    Args:
        directory: a ``text-generation-with-past`` export directory written by
            ``export-executorch``.
    """

    def __init__(self, directory: str | Path) -> None:
        super().__init__(directory, open_session, backend="executorch")


def generate(directory: str | Path, prompts: Sequence[str] | Sequence[Sequence[int]], **options: Any) -> list[str]:
    """The generated text of each prompt (texts or token-id lists) from an ExecuTorch export
    directory; options and errors as :meth:`export_core.generation.generator.Generator.stream`."""
    return ExecutorchGenerator(directory).generate_text(prompts, **options)
