"""Running an ONNX model in ONNX Runtime on one input set."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from export_core.errors import RuntimeLoadError
from export_core.exporter import flat_feed

from .ort_session import ort_session

__all__ = ["OrtRunner"]


class OrtRunner:
    """An ONNX Runtime session that takes the same input sets as the eager model.

    Args:
        model: a path to a ``.onnx`` file or the serialized model bytes.
        input_names: artifact input names in order (the flattened ``forward`` inputs).
        order: keys of the export input dict, in traced order (to flatten dict input sets).
        providers: ONNX Runtime execution providers (default CPU).

    Raises:
        RuntimeLoadError: ONNX Runtime cannot load the model (missing kernel, invalid graph), or
            one of its external-data locations is not a plain file name beside it.
    """

    def __init__(
        self,
        model: str | Path | bytes,
        input_names: Sequence[str],
        order: Sequence[str] = (),
        providers: Sequence[str] = ("CPUExecutionProvider",),
    ) -> None:
        self.session = ort_session(model, providers)
        self.input_names = list(input_names)
        self.order = list(order)
        self.graph_inputs = [i.name for i in self.session.get_inputs()]

    def __call__(self, inputs: dict[str, Any] | tuple[Any, ...]) -> list[np.ndarray]:
        """Run on one input set (a dict like the export inputs, or a tuple); returns outputs."""
        leaves = flat_feed(inputs, self.order)
        feeds = {}
        for name, value in zip(self.input_names, leaves):
            if name in self.graph_inputs:
                feeds[name] = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        try:
            return self.session.run(None, feeds)
        except Exception as e:
            msg = next((ln for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
            raise RuntimeLoadError(f"ONNX Runtime failed to run the model: {msg}", stage="runtime") from e
