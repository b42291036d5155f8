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
        self.input_shapes = {i.name: i.shape for i in self.session.get_inputs()}

    def _check_static_axes(self, feeds: dict[str, np.ndarray]) -> None:
        """Refuse an input whose rank, or size on an axis the artifact fixed, differs from the
        artifact's (ONNX Runtime's own message names neither the axis nor the sizes on its
        first line).

        Raises:
            RuntimeLoadError: the input's rank differs, or a static axis has another size.
        """
        for name, value in feeds.items():
            shape = self.input_shapes.get(name)
            if shape is None:
                continue
            if len(shape) != value.ndim:
                raise RuntimeLoadError(
                    f"invalid dimensions for input {name}: {value.ndim} axes, the artifact "
                    f"takes {len(shape)} ({tuple(shape)})", stage="runtime")
            fixed = [(axis, want, got) for axis, (want, got) in enumerate(zip(shape, value.shape))
                     if isinstance(want, int) and want != got]
            if fixed:
                axes = ", ".join(f"axis {a} is {got}, the artifact fixes it to {want}"
                                 for a, want, got in fixed)
                raise RuntimeLoadError(
                    f"invalid dimensions for input {name} of shape {tuple(value.shape)}: {axes} "
                    "(an axis not declared dynamic, or one the capture made static because the "
                    "model's code depends on its size)", stage="runtime")

    def __call__(self, inputs: dict[str, Any] | tuple[Any, ...]) -> list[np.ndarray]:
        """Run on one input set (a dict like the export inputs, or a tuple); returns outputs.

        Raises:
            RuntimeLoadError: an input does not fit the artifact's fixed axes, or ONNX Runtime
                failed to run (its whole message).
        """
        leaves = flat_feed(inputs, self.order)
        feeds = {}
        for name, value in zip(self.input_names, leaves):
            if name in self.graph_inputs:
                feeds[name] = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
        self._check_static_axes(feeds)
        try:
            return self.session.run(None, feeds)
        except Exception as e:
            msg = " ".join(ln.strip() for ln in str(e).splitlines() if ln.strip()) or type(e).__name__
            raise RuntimeLoadError(f"ONNX Runtime failed to run the model: {msg}", stage="runtime") from e
