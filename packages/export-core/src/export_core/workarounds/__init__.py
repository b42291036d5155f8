"""Registered capture-level ("dynamo") workarounds, inherited by every backend.

Importing this package registers them; registration is its only side effect. The exporter
and :func:`export_core.registry.load_backends` import it (``import export_core`` alone does not,
so the command-line tools start without torch). Model-specific
patches name their targets as strings and import ``transformers`` lazily, so this package imports
without ``transformers`` installed.

Modules, one concern each:

- :mod:`.packed_vision_attention`: packed (``cu_seqlens``) attention as one block-diagonal masked
  attention instead of a loop over data-dependent segment lengths.
- :mod:`.vision_window_index`: Qwen2.5-VL-style window order and window boundaries without a
  loop over ``grid_thw``.
- :mod:`.vision_position_ids`: vision rotary position ids without a loop over ``grid_thw``.
- :mod:`.all_true_check`: ``aten._is_all_true`` (tensor checks) rewritten in Core ATen ops at
  capture.
- :mod:`.rnn_while_loop`: models with ``nn.LSTM`` captured with torch's ``while_loop``
  decomposition (no time axis pinned, without a guard, by the unrolled one).
- :mod:`.recurrence_scan`: the recurrences run as Python loops (Mamba's selective scan,
  RecurrentGemma's RG-LRU, RWKV's WKV attention) as a ``scan`` over time (no sequence pinned by
  an unrolled loop).
- :mod:`.scan_reductions`: ``cummax`` / ``cummin`` and ``isin`` as comparisons, ``where`` and
  reductions (no op outside Core ATen, no ``searchsorted``).
- :mod:`.static_cache`: a static cache layer updated out of place (no input mutation).
- :mod:`.dbrx_experts`: DBRX's experts as per-pair weight gathers and ``bmm`` (no loop over
  the experts the routing hit).
- :mod:`.longcat_experts`: LongCat-Flash's experts, identity experts included, as per-pair weight
  gathers and ``bmm`` (no loop over the experts the routing hit).
- :mod:`.switch_experts`: Switch Transformers' experts as a fixed loop over every expert masked by
  the routing (no loop over the experts the routing hit).
- :mod:`.module_to_noop`: ``nn.Module.to`` inside ``forward`` that changes no tensor returns the
  module (no ``swap_tensors`` of export's parameters).
- :mod:`.conv_padding_ints`: the audio codecs' ``Conv1d`` paddings from the layer's ints (no
  ``.item()`` of size buffers).
- :mod:`.cpmant_position_mask`: CPM-Ant's left-padding positions from ``torch.arange`` (no
  sequence axis pinned by ``range`` over its length).
- :mod:`.deepseek_ocr2_features`: DeepSeek-OCR 2's per-image feature loop as one ``cat`` when
  there are no local views (no batch pinned by ``range(batch_size)``).
- :mod:`.pixel_shuffle_ints`: InternVL-style pixel shuffle sized with integer division (no float
  modulus of a symbolic size).
- :mod:`.pixtral_image_batch`: Pixtral's vision encoder over same-size images with batched ops
  (no batch pinned by a loop over the images).
- :mod:`.mask_broadcast`: attention masks from a custom mask function built by broadcasting the
  index grids, not ``torch.vmap`` (no functorch calls left in the program).
- :mod:`.distribution_checks`: ``torch.distributions`` objects built during an export skip their
  argument validation (no branch on a constraint check's result).
- :mod:`.erfinv_formula`: ``aten.erfinv`` (no ONNX function, not Core ATen) as a rational
  approximation.
- :mod:`.integer_pow`: integer ``pow`` as square-and-multiply in integer ops (wrapping as torch
  does, not through floating point).
- :mod:`.integer_sum`: int32 / int64 sums as the last element of a ``cumsum`` (the runtimes'
  sums go through floating point).
- :mod:`.fsmt_padding_mask`: FSMT's decoder padding mask kept as a tensor (no branch on
  whether the batch has padding).
- :mod:`.per_item_split`: the per-image ``torch.split(features, sizes.tolist())`` of Qwen-VL-style
  feature methods kept as one chunk (no image count pinned by ``.tolist()``).
- :mod:`.symbolic_range`: ``range`` over symbolic sizes whose trip count is the same for every
  size iterates over symbolic values (no length pinned by ``range``).
- :mod:`.tensor_len`: ``len(tensor)`` in the modeling modules that read their batch with it
  answers the symbolic size (no batch pinned to the example's).
- :mod:`.tensor_metadata_contiguity`: the memory format in each node's ``tensor_meta`` decided
  without guards (no shape pinned by metadata).
- :mod:`.moe_experts`: mixture-of-experts layers through the ``batched_mm`` experts
  implementation (no ``histc``, no ``grouped_mm_fallback`` custom op, no data-dependent loop).
- :mod:`.vjepa2_mask_tokens`: V-JEPA 2's predictor target tokens expanded to the masks' shapes
  (no size read from the target mask's values).
"""

from __future__ import annotations

from . import (
               all_true_check,
               conv_padding_ints,
               cpmant_position_mask,
               dbrx_experts,
               deepseek_ocr2_features,
               distribution_checks,
               erfinv_formula,
               fsmt_padding_mask,
               integer_pow,
               integer_sum,
               longcat_experts,
               mask_broadcast,
               module_to_noop,
               moe_experts,
               packed_vision_attention,
               per_item_split,
               pixel_shuffle_ints,
               pixtral_image_batch,
               recurrence_scan,
               rnn_while_loop,
               scan_reductions,
               static_cache,
               switch_experts,
               symbolic_range,
               tensor_len,
               tensor_metadata_contiguity,
               vision_position_ids,
               vision_window_index,
               vjepa2_mask_tokens,
)

__all__ = [
    "all_true_check", "conv_padding_ints", "cpmant_position_mask", "dbrx_experts", "deepseek_ocr2_features", "distribution_checks", "erfinv_formula", "fsmt_padding_mask", "integer_pow", "integer_sum", "longcat_experts", "mask_broadcast",
    "module_to_noop", "moe_experts", "packed_vision_attention", "per_item_split", "pixel_shuffle_ints", "pixtral_image_batch", "recurrence_scan",
    "rnn_while_loop", "scan_reductions", "static_cache", "switch_experts", "symbolic_range", "tensor_len", "tensor_metadata_contiguity",
    "vision_position_ids", "vision_window_index", "vjepa2_mask_tokens"]
