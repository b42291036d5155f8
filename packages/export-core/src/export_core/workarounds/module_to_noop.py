"""``nn.Module.to(...)`` inside ``forward`` that would change no tensor returns the module as is.

Some model code casts a submodule on every call (Switch Transformers' router:
``self.classifier = self.classifier.to(self.dtype)``). Under ``torch.export`` the parameters are
tensor subclasses, so ``Module._apply`` takes the ``torch.utils.swap_tensors`` path even when the
cast is a no-op, and the swap refuses a tensor that has a weakref (export's parameter tracking
holds one): capture fails with ``Cannot swap t1 because it has weakref associated with it``
(pytorch#187008). During an export, a ``to`` call whose target device and dtype every parameter
and buffer already has returns ``self``, as eager's conversion leaves every tensor unchanged;
any other call runs the original (and still fails, since it would change the weights).
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from ..registry import register_patch

__all__ = ["skip_noop_module_to"]


def _unchanged(tensor: torch.Tensor, device: torch.device | None, dtype: torch.dtype | None) -> bool:
    if device is not None and (tensor.device.type != device.type
                               or device.index not in (None, tensor.device.index)):
        return False
    # Module.to casts only floating point and complex tensors.
    return dtype is None or not (tensor.is_floating_point() or tensor.is_complex()) or tensor.dtype == dtype


@register_patch(
    "dynamo",
    "torch.nn.modules.module.Module.to",
    reason=(
        "Module.to inside forward takes the swap_tensors path for export's parameter subclasses "
        "even when nothing changes, and swap_tensors refuses tensors with weakrefs (capture fails); "
        "a no-op conversion returns the module as is"
    ),
    upstream="https://github.com/pytorch/pytorch/issues/187008",
    versions=("torch", ">=2.6"),
)
def skip_noop_module_to(original: Any) -> Any:
    """Wrap ``nn.Module.to(self, *args, **kwargs) -> Module``.

    The wrapper parses the arguments as ``Module.to`` does (device, dtype, ``non_blocking``,
    ``memory_format``). When no memory format is asked and every parameter and buffer of the
    module tree already has the target device and (floating point and complex tensors) dtype, it
    returns ``self`` without ``_apply``; otherwise it calls the original.

    Source: https://github.com/pytorch/pytorch/issues/187008 (``Module.to`` forced onto
        ``swap_tensors`` for subclass parameters, which refuses weakref'd tensors)
    """

    @functools.wraps(original)
    def to(self: torch.nn.Module, *args: Any, **kwargs: Any) -> torch.nn.Module:
        device, dtype, _, memory_format = torch._C._nn._parse_to(*args, **kwargs)
        if memory_format is None:
            device = None if device is None else torch.device(device)
            tensors = [*self.parameters(), *self.buffers()]
            if all(_unchanged(t, device, dtype) for t in tensors):
                return self
        return original(self, *args, **kwargs)

    return to
