"""Sliding-window layers cached in full while the generation graphs are traced.

``transformers`` caches a sliding-window layer (``sliding_attention``, ``chunked_attention``) in a
``DynamicSlidingWindowLayer``: it keeps only the last ``sliding_window - 1`` key/value positions
and counts the positions seen in ``cumulative_length``, a Python ``int``. The mask reads that int
(``get_mask_sizes``: ``kv_offset = cumulative_length - sliding_window + 1`` once the window is
full; ``get_query_offset``), and the pytree registration of the layer puts it in the context,
so a decode graph traced on the example cache bakes the example's length in: a later step gets
the offsets of the capture's step, and its tokens differ from eager once the window fills.

The generation contract here does not need the trimmed cache. The sliding-window mask functions
(``sliding_window_causal_mask_function``, the chunked one) work on absolute query and key
positions, with the window taken from the config, not from the cache. With every layer a
``DynamicLayer`` holding the whole past (``(batch, kv_heads, past_sequence, head_dim)``, the
same layout as a full-attention layer), the past length is the tensor's axis 2, a symbol, and
the mask masks exactly the positions the sliding cache would have dropped: the same attention,
hence the same tokens as eager ``generate()`` with its sliding cache. The cost is memory: a
sliding layer's cache grows to ``max_length`` positions instead of ``sliding_window - 1``.

:func:`full_sliding_layers` swaps the layer classes ``DynamicCache(config=...)`` builds, for the
recording of ``generate()``'s calls and the two graph exports; the comparison with eager runs
outside it, against the model's own sliding cache.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["SLIDING_LAYER_TYPES", "full_sliding_layers", "sliding_layers"]

SLIDING_LAYER_TYPES = ("sliding_attention", "chunked_attention")
"""Layer types whose cache ``transformers`` trims to a window (``DYNAMIC_LAYER_TYPE_MAPPING``)."""

_LOCK = threading.RLock()


@contextmanager
def full_sliding_layers() -> Iterator[tuple[str, ...]]:
    """Within the block, ``DynamicCache(config=...)`` builds a ``DynamicLayer`` for every sliding
    or chunked layer type (see the module docstring).

    Yields:
        The layer types that were swapped (empty when ``transformers`` has no such mapping, or
        its sliding types already map to ``DynamicLayer``).

    The swap is of a module-level mapping of ``transformers.cache_utils``: it holds a lock for the
    block, and another thread that builds a cache meanwhile gets the full layers too.
    """
    from transformers import cache_utils

    mapping = getattr(cache_utils, "DYNAMIC_LAYER_TYPE_MAPPING", None)
    full = getattr(cache_utils, "DynamicLayer", None)
    with _LOCK:
        if not isinstance(mapping, dict) or full is None:
            yield ()
            return
        saved = {t: mapping[t] for t in SLIDING_LAYER_TYPES if t in mapping and mapping[t] is not full}
        mapping.update({t: full for t in saved})
        try:
            yield tuple(saved)
        finally:
            mapping.update(saved)


def sliding_layers(config: Any) -> list[int]:
    """Indices of the decoder layers ``DynamicCache(config=config)`` would trim to a window.

    Uses ``transformers``' own ``get_layer_types_and_kwargs`` (``layer_types``, else a
    ``sliding_window`` / ``attention_chunk_size`` on the config); ``[]`` when it is missing.
    """
    from transformers import cache_utils

    infer = getattr(cache_utils, "get_layer_types_and_kwargs", None)
    if infer is None:
        return []
    try:
        layer_types, _ = infer(config.get_text_config(decoder=True))
    except Exception:  # a config transformers cannot read layer types from: nothing is swapped
        return []
    return [i for i, t in enumerate(layer_types) if t in SLIDING_LAYER_TYPES]
