"""``torch.distributions`` objects built during an export skip their argument validation.

``Distribution.__init__`` (and ``log_prob``'s sample check) reduce each parameter's constraint
check with ``torch._is_all_true`` and branch on the result in Python: under ``torch.export``
that is a guard on data (``GuardOnDataDependentSymNode: Eq(u0, 1)``; pytorch#135061). BLT's
patcher takes the entropy of ``Categorical(logits=...)`` in its forward and fails to capture.
During an export every distribution is built with ``validate_args=False``: the values it
computes are the same, only the check that raises ``ValueError`` on invalid parameters (NaN
logits, probabilities off the simplex) is left out of the program.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from ..registry import register_patch

__all__ = ["unvalidated_distributions"]


@register_patch(
    "dynamo",
    "torch.distributions.distribution.Distribution.__init__",
    reason=(
        "Distribution argument validation branches on torch._is_all_true(constraint.check(...)) "
        "in Python, a data-dependent guard under torch.export (BLT's Categorical entropy); "
        "distributions built during an export skip it (validate_args=False)"
    ),
    upstream="https://github.com/pytorch/pytorch/issues/135061",
    versions=("torch", ">=2.1"),
)
def unvalidated_distributions(original: Any) -> Any:
    """Wrap ``Distribution.__init__(self, batch_shape=Size(), event_shape=Size(),
    validate_args=None)`` so that it always gets ``validate_args=False``.

    The distribution's parameters, samples, ``log_prob`` and ``entropy`` are unchanged; its
    constructor and ``log_prob`` no longer raise ``ValueError`` for values outside the
    constraints (the exported program has no such check).

    Source: https://github.com/pytorch/pytorch/issues/135061 (distribution validation under
        ``torch.export``)
    """

    @functools.wraps(original)
    def __init__(self: Any, batch_shape: torch.Size = torch.Size(),  # noqa: B008 - torch's own default
                 event_shape: torch.Size = torch.Size(), validate_args: bool | None = None) -> None:  # noqa: B008
        del validate_args
        original(self, batch_shape, event_shape, validate_args=False)

    return __init__
