"""``range`` over symbolic sizes whose trip count does not depend on them.

EnCodec's ``encode`` cuts its input into chunks with ``for offset in range(0, input_length,
stride)``; when the config has no ``chunk_length`` (the default), ``stride`` *is*
``input_length``, so the loop runs once whatever the length. Python's ``range`` needs ``int``
arguments, though, so under ``torch.export`` it turns the dynamic length into its example value
and guards on it (``Eq(s2, 3200)``): the capture succeeds, and the artifact rejects every other
length (ONNX Runtime: ``Got invalid dimensions for input: input_values``). The model code is the
cause.

The patch shadows the builtin ``range`` in the listed modeling modules while an export runs.
When an argument is a ``SymInt`` and the number of iterations is the same for every value the
symbols may take (decided with ``statically_known_true``, which adds no guard), it yields
``start, start + step, ...`` with the symbolic values; otherwise (or for plain ints) it is the
builtin, which pins as before.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from typing import Any

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ..patching import MARKS_OWN_FIRING, PatchSession
from ..registry import register_patch

__all__ = ["MAX_STATIC_TRIPS", "RANGE_MODULES", "static_trip_count"]

RANGE_MODULES = ("transformers.models.encodec.modeling_encodec",)
"""Modeling modules that loop with ``range`` over a symbolic length and a step that is the same
length (transformers 5.24)."""

MAX_STATIC_TRIPS = 64
"""The largest trip count looked for: a loop that long is unrolled in the graph."""

_UPSTREAM = "https://github.com/pytorch/pytorch/issues/140011"
_REASON = (
    "EnCodec chunks its input with range(0, input_length, stride) and stride is the input "
    "length without a chunk_length (model code): range() pins the length to the example's; "
    "the loop runs once for every length, so it iterates over the symbolic offsets"
)


def static_trip_count(start: Any, stop: Any, step: Any) -> int | None:
    """The number of iterations of ``range(start, stop, step)`` if it is the same for every value
    of the symbols involved, else ``None`` (ints, ``SymInt`` s; ``step`` > 0 only).

    Decided without guards: ``count`` is the answer when ``stop - start <= count * step`` and
    ``stop - start > (count - 1) * step`` are both statically known, for a ``count`` up to
    :data:`MAX_STATIC_TRIPS`.
    """
    if not (isinstance(step, int) and step > 0) and not statically_known_true(step > 0):
        return None
    span = stop - start
    if statically_known_true(span <= 0):
        return 0
    for count in builtins.range(1, MAX_STATIC_TRIPS + 1):
        if statically_known_true(span <= count * step):
            return count if statically_known_true(span > (count - 1) * step) else None
    return None


def _symbolic_range(name: str, session: PatchSession) -> Any:
    def range(*args: Any) -> Iterable[Any]:  # noqa: A001 - shadows the builtin on purpose
        if not any(isinstance(a, torch.SymInt) for a in args) or not 1 <= len(args) <= 3:
            return builtins.range(*args)
        if len(args) == 1:
            start, stop, step = 0, args[0], 1
        elif len(args) == 2:
            start, stop, step = args[0], args[1], 1
        else:
            start, stop, step = args
        count = static_trip_count(start, stop, step)
        if count is None:
            return builtins.range(*args)
        session.mark_fired(name)
        return [start + i * step for i in builtins.range(count)]

    setattr(range, MARKS_OWN_FIRING, True)
    return range


def _register(module: str) -> Any:
    target = f"{module}.range"

    @register_patch("dynamo", target, reason=_REASON, upstream=_UPSTREAM,
                    versions=("transformers", ">=5,<6"))
    def range_with_static_trip_count(original: Any, session: PatchSession) -> Any:
        """Replace ``range`` in one modeling module with ``range(*args) -> iterable``: the
        symbolic offsets when an argument is a ``SymInt`` and the trip count is static (marked
        fired), the builtin otherwise.

        Source: the model code (``for offset in range(0, input_length, stride)`` in
            ``modeling_encodec.py``); torch.export pins sizes turned into ints:
            https://github.com/pytorch/pytorch/issues/140011
        """
        del original
        return _symbolic_range(f"dynamo:{target}", session)

    return range_with_static_trip_count


for _module in RANGE_MODULES:
    _register(_module)
