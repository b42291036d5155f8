"""A static cache layer updated out of place during an export, so the graph has no input mutation.

``transformers``' ``StaticLayer.update`` writes each step's keys and values into its
preallocated ``(batch, kv_heads, max_cache_len, head_dim)`` tensors with ``index_copy_`` at
``cumulative_length`` and advances that 0-d counter with ``add_``: in place, to keep a static
address for ``torch.compile``. Traced with the cache as a graph input, the writes are mutations
of user inputs: ExecuTorch's ``to_executorch`` fails on them ("a leaf Variable that requires grad
is being used in an in-place operation"), and the contract of a generate loop is "cache in, cache
out" anyway. During an export the layer computes the same values with ``index_copy`` and ``+``
and rebinds its attributes, so the updated tensors are the graph's ``present.<i>.*`` outputs.

Source: https://github.com/pytorch/executorch/pull/10921 (to_executorch's handling of in-place
ops; general mutation support was still to come).
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from ..registry import register_patch

__all__ = ["STATIC_UPDATE_TARGET", "functional_static_update"]

STATIC_UPDATE_TARGET = "transformers.cache_utils.StaticLayer.update"


@register_patch(
    "dynamo",
    STATIC_UPDATE_TARGET,
    reason=(
        "StaticLayer.update writes the cache with index_copy_ and add_ on the graph's inputs (a "
        "mutation of user inputs ExecuTorch's to_executorch rejects); the export computes the "
        "same tensors out of place and returns them as the graph's present.* outputs"
    ),
    upstream="https://github.com/pytorch/executorch/pull/10921",
    versions=("transformers", ">=5,<6"),
)
def functional_static_update(original: Any) -> Any:
    """Wrap ``StaticLayer.update(key_states, value_states)`` out of place.

    ``key_states`` / ``value_states``: float ``(batch, kv_heads, q, head_dim)``, written at
    positions ``cumulative_length .. cumulative_length + q - 1`` of the layer's
    ``(batch, kv_heads, max_cache_len, head_dim)`` tensors; ``cumulative_length`` (0-d int64)
    grows by ``q``. Returns the whole updated keys and values, as the original does.

    Source: https://github.com/pytorch/executorch/pull/10921
    """

    @functools.wraps(original)
    def update(self: Any, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        length = key_states.shape[-2]
        position = torch.arange(length, device=self.keys.device) + self.cumulative_length
        self.cumulative_length = self.cumulative_length + length
        self.keys = self.keys.index_copy(2, position, key_states)
        self.values = self.values.index_copy(2, position, value_states)
        return self.keys, self.values

    return update
