"""``len(tensor)`` in model code, answered with the symbolic size instead of an ``int``.

Some models read their batch size as ``batch_size = len(source_flatten)`` (RT-DETR and the
detectors built on its code: RT-DETRv2, D-FINE, DEIMv2, PP-DocLayout) or ``len(pixel_values)``
(LayoutLMv3). Python's ``len`` must return an ``int``, so under ``torch.export`` it turns the
dynamic batch into its example value and guards on it (``Eq(s99, 2)``): the artifact accepts
only the example's batch (ONNX Runtime: ``Got invalid dimensions for input: pixel_values``;
ExecuTorch: ``set_input`` fails). The model code is the cause: ``tensor.shape[0]`` says the same
and stays symbolic.

The patch shadows the builtin ``len`` in those modeling modules only, while an export runs:
a tensor answers ``tensor.shape[0]`` (a ``SymInt`` under export, the same number in eager);
anything else goes to the builtin.
"""

from __future__ import annotations

import builtins
from typing import Any

import torch

from ..patching import MARKS_OWN_FIRING, PatchSession
from ..registry import register_patch

__all__ = ["LEN_OF_TENSOR_MODULES"]

LEN_OF_TENSOR_MODULES = (
    "transformers.models.rt_detr.modeling_rt_detr",
    "transformers.models.rt_detr_v2.modeling_rt_detr_v2",
    "transformers.models.d_fine.modeling_d_fine",
    "transformers.models.deimv2.modeling_deimv2",
    "transformers.models.pp_doclayout_v2.modeling_pp_doclayout_v2",
    "transformers.models.pp_doclayout_v3.modeling_pp_doclayout_v3",
    "transformers.models.layoutlmv3.modeling_layoutlmv3",
)
"""Modeling modules whose forward takes ``len()`` of a batched input tensor (transformers
5.24)."""

_UPSTREAM = "https://github.com/ultralytics/ultralytics/issues/3403"
"""RT-DETR exported with a dynamic batch runs only at the export's batch size: the batch read
as a Python int became a constant."""

_REASON = (
    "the model takes its batch size as len(tensor) (model code: RT-DETR-style detectors, "
    "LayoutLMv3); len() must return an int, so torch.export pins the batch to the example's "
    "and the artifact rejects other batch sizes; in those modules len(tensor) answers "
    "tensor.shape[0]"
)


def _symbolic_len(name: str, session: PatchSession) -> Any:
    def len(obj: Any) -> Any:  # noqa: A001 - shadows the builtin on purpose
        if isinstance(obj, torch.Tensor) and obj.dim() > 0:
            size = obj.shape[0]
            if isinstance(size, torch.SymInt):
                session.mark_fired(name)
            return size
        return builtins.len(obj)

    setattr(len, MARKS_OWN_FIRING, True)
    return len


def _register(module: str) -> Any:
    target = f"{module}.len"

    @register_patch("dynamo", target, reason=_REASON, upstream=_UPSTREAM,
                    versions=("transformers", ">=5,<6"))
    def tensor_len_stays_symbolic(original: Any, session: PatchSession) -> Any:
        """Replace ``len`` in one modeling module with ``len(obj) -> int | SymInt``:
        ``obj.shape[0]`` for a tensor of rank >= 1 (marked fired when that size is symbolic),
        the builtin otherwise.

        Source: the model code (``batch_size = len(source_flatten)``); RT-DETR's batch
            pinned on export: https://github.com/ultralytics/ultralytics/issues/3403
        """
        del original
        return _symbolic_len(f"dynamo:{target}", session)

    return tensor_len_stays_symbolic


for _module in LEN_OF_TENSOR_MODULES:
    _register(_module)
