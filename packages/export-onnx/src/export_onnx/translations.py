"""The ONNX translation table: custom lowerings of aten ops, passed to ``torch.onnx.export``.

Each entry is a ``translation`` workaround in the core registry
(:func:`export_core.registry.describe` lists it), registered with
:func:`register_onnx_translation` with its reason and the upstream bug it exists for, and runs at
the ``translate`` stage. The functions are onnxscript functions (or TorchLib-style Python
functions over onnxscript values) taking the aten op's arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from export_core.registry import Workaround, register_workaround, workarounds_for

from .stages import BACKEND, TRANSLATION

__all__ = ["register_onnx_translation", "translation_records", "translation_table"]


def register_onnx_translation(
    *ops: Any, reason: str, upstream: str
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn`` as the ONNX translation of every op in ``ops``.

    Args:
        *ops: the aten ``OpOverload`` s (or sym callables such as ``operator.floordiv``) it
            lowers.
        reason: what the default translation gets wrong.
        upstream: the upstream issue or pull request URL.

    Raises:
        ValueError: an op already has a custom translation, the reason is empty or the link is
            not an issue / pull request URL.
    """
    if not ops:
        raise ValueError("register_onnx_translation needs at least one op")

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        name = getattr(fn, "name", None) or fn.__name__
        register_workaround(Workaround(TRANSLATION, BACKEND, "translate", name, tuple(ops), fn,
                                       reason, upstream))
        return fn

    return decorate


def translation_records() -> list[Workaround]:
    """Every registered translation, once each, in registration order."""
    return workarounds_for(BACKEND, TRANSLATION)


def translation_table() -> dict[Any, Callable[..., Any]]:
    """``{op: fn}`` in the form ``torch.onnx.export(custom_translation_table=...)`` takes."""
    return {op: rec.fn for rec in translation_records() for op in rec.targets}
