"""The ONNX opset versions an export can target, without importing torch (``--opset`` is checked
when the command line is parsed)."""

from __future__ import annotations

from export_core.errors import InputError

__all__ = ["MAX_OPSET", "MIN_OPSET", "SUPPORTED_OPSETS", "check_opset"]

MIN_OPSET = 18
"""The lowest opset torch.onnx's translation library implements (``TORCHLIB_OPSET``); below it
torch.onnx exports at 18 and only tries a version conversion."""
MAX_OPSET = 23
"""The highest opset torch.onnx 2.13 exports (``torch.onnx._constants.ONNX_MAX_OPSET``); a test
checks both ends against the installed torch."""
SUPPORTED_OPSETS = range(MIN_OPSET, MAX_OPSET + 1)
"""``MIN_OPSET`` to ``MAX_OPSET``, inclusive."""


def check_opset(opset: int | None) -> int | None:
    """Return ``opset`` when it is ``None`` (torch.onnx's default) or in :data:`SUPPORTED_OPSETS`.

    Raises:
        InputError: another value; the message gives the supported range.
    """
    if opset is not None and opset not in SUPPORTED_OPSETS:
        raise InputError(
            f"opset {opset} is not supported; choose one from {MIN_OPSET} to {MAX_OPSET}",
            stage="inputs",
        )
    return opset
