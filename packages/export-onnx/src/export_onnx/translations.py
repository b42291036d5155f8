"""The ONNX translation table: custom lowerings of aten ops, passed to ``torch.onnx.export``.

Each entry is registered with :func:`register_onnx_translation` and carries its reason and the
upstream bug it exists for. The functions are onnxscript functions (or TorchLib-style Python
functions over onnxscript values) taking the aten op's arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["TranslationRecord", "register_onnx_translation", "translation_table", "translation_records"]


@dataclass(frozen=True)
class TranslationRecord:
    """One custom ONNX translation.

    Attributes:
        name: the function's name (``_aten_<op>`` by convention).
        ops: the aten ``OpOverload`` s (or sym callables such as ``operator.floordiv``) it lowers.
        fn: the translation function.
        reason: what the default translation gets wrong.
        upstream: link to the upstream bug.
    """

    name: str
    ops: tuple[Any, ...]
    fn: Callable[..., Any]
    reason: str
    upstream: str


_ONNX_TRANSLATION_TABLE: dict[Any, TranslationRecord] = {}


def register_onnx_translation(
    *ops: Any, reason: str, upstream: str
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register ``fn`` as the ONNX translation of every op in ``ops``.

    Raises:
        ValueError: an op already has a custom translation, or reason/upstream is empty.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not reason or not upstream:
            raise ValueError(f"{fn.__name__}: a translation needs a reason and an upstream link")
        rec = TranslationRecord(getattr(fn, "name", None) or fn.__name__, tuple(ops), fn, reason, upstream)
        for op in ops:
            if op in _ONNX_TRANSLATION_TABLE:
                raise ValueError(f"{op} already has a custom ONNX translation")
        for op in ops:
            _ONNX_TRANSLATION_TABLE[op] = rec
        return fn

    return decorate


def translation_table() -> dict[Any, Callable[..., Any]]:
    """``{op: fn}`` in the form ``torch.onnx.export(custom_translation_table=...)`` takes."""
    return {op: rec.fn for op, rec in _ONNX_TRANSLATION_TABLE.items()}


def translation_records() -> list[TranslationRecord]:
    """Every registered translation record, once each."""
    seen: dict[str, TranslationRecord] = {}
    for rec in _ONNX_TRANSLATION_TABLE.values():
        seen.setdefault(rec.name, rec)
    return list(seen.values())
