"""Mixture-of-experts layers exported through the ``batched_mm`` experts implementation.

``transformers`` dispatches the expert MLPs of every class decorated with
``@use_experts_implementation`` through ``ExpertsInterface.get_interface(config._experts_implementation)``.
The default, ``grouped_mm``, sorts the token-expert pairs by expert, counts them with
``torch.histc`` and runs the opaque custom op ``transformers::grouped_mm_fallback`` on CPU: the op
has no ONNX function (translation fails with ``DispatchError``) and ``aten.histc`` is not in the
Core ATen opset (ExecuTorch lowering fails with ``SpecViolationError``). The ``eager``
implementation loops over the experts hit by the routing (``nonzero()``), which guards on
data-dependent sizes under ``torch.export``.

``batched_mm`` computes the same sum with a gather of every selected pair's expert weights and two
``bmm`` calls: no data-dependent size, no custom op, and every op is Core ATen with an ONNX
function. It costs ``top_k`` weight gathers per token, which is what a static graph pays anyway.
During an export the interface answers ``batched_mm`` wherever ``grouped_mm`` or ``eager`` was
chosen; other choices (GPU kernels such as ``deepgemm``, FP8 implementations) are left alone.
"""

from __future__ import annotations

import functools
from typing import Any

from ..registry import register_patch

__all__ = ["EXPORTABLE_EXPERTS", "ROUTED_EXPERTS", "EXPERTS_TARGET", "batched_experts_interface"]

EXPERTS_TARGET = "transformers.integrations.moe.ExpertsInterface.get_interface"
"""The method every ``@use_experts_implementation`` forward calls to pick its implementation."""

EXPORTABLE_EXPERTS = "batched_mm"
"""The registered experts implementation that exports on every backend."""

ROUTED_EXPERTS: frozenset[str | None] = frozenset({None, "grouped_mm", "eager"})
"""Implementations routed to :data:`EXPORTABLE_EXPERTS` during an export (``None`` is a standalone
experts module, which ``transformers`` runs as ``eager``)."""


@register_patch(
    "dynamo",
    EXPERTS_TARGET,
    reason=(
        "the default grouped_mm experts implementation counts tokens per expert with aten.histc "
        "(not Core ATen: ExecuTorch lowering fails) and runs the custom op "
        "transformers::grouped_mm_fallback (no ONNX function: translation fails), and the eager "
        "one loops over nonzero() experts (GuardOnDataDependentSymNode); the export runs the "
        "batched_mm implementation, which transformers added as the exportable one"
    ),
    upstream="https://github.com/huggingface/transformers/pull/42697",
    versions=("transformers", ">=5,<6"),
)
def batched_experts_interface(original: Any) -> Any:
    """Wrap ``ExpertsInterface.get_interface`` so it returns the ``batched_mm`` forward.

    The replacement keeps the signature ``(self, experts_implementation: str | None,
    default: Callable) -> Callable``. Every routed choice (:data:`ROUTED_EXPERTS`) returns the
    interface's ``batched_mm`` entry when the interface has one (an interface without it is
    answered as before). The experts forward it returns maps ``hidden_states (tokens, hidden)``,
    ``top_k_index (tokens, top_k)`` int64 and ``top_k_weights (tokens, top_k)`` to
    ``(tokens, hidden)`` in the dtype of ``hidden_states``, as every implementation does.

    Source:
        https://github.com/huggingface/transformers/pull/42697 (``batched_mm``, "the exportable
        one"); the blocked ops: ``transformers::grouped_mm_fallback`` and ``aten.histc``.
    """

    @functools.wraps(original)
    def get_interface(self: Any, experts_implementation: str | None, default: Any) -> Any:
        if experts_implementation in ROUTED_EXPERTS and EXPORTABLE_EXPERTS in self:
            return original(self, EXPORTABLE_EXPERTS, default)
        return original(self, experts_implementation, default)

    return get_interface
