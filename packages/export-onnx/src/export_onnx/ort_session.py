"""Opening an ONNX Runtime session on a saved or serialized model (no torch imported)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from export_core.errors import RuntimeLoadError

from .external_data import external_data_files

__all__ = ["ort_session"]


def ort_session(model: str | Path | bytes, providers: Sequence[str] = ("CPUExecutionProvider",)) -> Any:
    """An ``onnxruntime.InferenceSession`` on ``model`` (a ``.onnx`` path or the model bytes),
    quiet below errors.

    Raises:
        RuntimeLoadError: ONNX Runtime cannot load the model (missing kernel, invalid graph), or
            one of its external-data locations is not a plain file name beside it.
    """
    import onnxruntime as ort

    if not isinstance(model, bytes):
        try:
            external_data_files(model)
        except ValueError as e:
            raise RuntimeLoadError(f"refusing to load {model}: {e}", stage="runtime") from e
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    try:
        return ort.InferenceSession(model if isinstance(model, bytes) else str(model), opts,
                                    providers=list(providers))
    except Exception as e:
        msg = next((ln for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        raise RuntimeLoadError(f"ONNX Runtime cannot load the model: {msg}", stage="runtime") from e
