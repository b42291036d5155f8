"""InternVL-style pixel shuffle with integer arithmetic on the feature-map sizes.

``InternVLModel.pixel_shuffle`` (and its copy in Qianfan-OCR; transformers 5.x) downsamples a
``(batch, width, height, channels)`` feature map by a *float* ``scale_factor`` (0.5): it tests
``height % scale_factor != 0`` and sizes its views with ``int(height * scale_factor)`` and
``int(channels / scale_factor ** 2)``. On a symbolic ``height`` the float modulus makes
``torch.export``'s value-range analysis build an empty range, and the capture fails with
``ValueRangeError: Invalid ranges [0.5:-0.5]``; ``int()`` of a symbolic float would pin the size
besides. The model code is the cause.

For a scale factor whose inverse ``r`` is an integer (0.5 -> 2, 0.25 -> 4), the replacement
computes the same views with ints: ``(batch, width, height // r, channels * r)``, then
``(batch, height // r, width // r, channels * r * r)``, with the divisibility of ``height`` and
``width`` by ``r`` checked (``ValueError`` as the original for concrete sizes, a
``torch._check`` for symbolic ones). Any other scale factor runs the original.

Upstream: value-range analysis of ``%`` / division on symbolic sizes builds invalid ranges
(https://github.com/pytorch/pytorch/issues/136797).
"""

from __future__ import annotations

from typing import Any

import torch

from ..registry import register_patch

__all__ = ["PIXEL_SHUFFLE_TARGETS", "integer_pixel_shuffle", "shuffle_with_ints"]

PIXEL_SHUFFLE_TARGETS: tuple[str, ...] = (
    "transformers.models.internvl.modeling_internvl.InternVLModel.pixel_shuffle",
    "transformers.models.qianfan_ocr.modeling_qianfan_ocr.QianfanOCRModel.pixel_shuffle",
)
"""The pixel shuffles that divide by a float scale factor (transformers 5.x)."""


def shuffle_with_ints(vision_features: torch.Tensor, ratio: int) -> torch.Tensor:
    """Downsample a feature map by ``ratio`` along height and width, channels times ``ratio**2``.

    Args:
        vision_features: ``(batch, width, height, channels)``, any dtype.
        ratio: the inverse of InternVL's ``scale_factor`` (2 for 0.5).

    Returns:
        ``(batch, width // ratio, height // ratio, channels * ratio**2)``, element for element
        the original ``pixel_shuffle``'s result.

    Raises:
        ValueError: a concrete ``height`` or ``width`` is not a multiple of ``ratio``.
    """
    batch, width, height, channels = vision_features.size()
    for size in (height, width):
        if isinstance(size, int):
            if size % ratio:
                raise ValueError("Height and width must be divisible by scale_factor for "
                                 "proper downsampling.")
        else:
            torch._check(size % ratio == 0)
    features = vision_features.view(batch, width, height // ratio, channels * ratio)
    features = features.permute(0, 2, 1, 3).contiguous()
    features = features.view(batch, height // ratio, width // ratio, channels * ratio * ratio)
    return features.permute(0, 2, 1, 3).contiguous()


@register_patch(
    "dynamo",
    *PIXEL_SHUFFLE_TARGETS,
    reason=(
        "the pixel shuffle tests height % 0.5 and sizes views with int(height * 0.5) (model "
        "code): a float modulus of a symbolic size breaks torch.export's value ranges "
        "(ValueRangeError); the same views are sized with integer division"
    ),
    upstream="https://github.com/pytorch/pytorch/issues/136797",
    versions=("transformers", ">=5,<6"),
)
def integer_pixel_shuffle(original: Any) -> Any:
    """Replace ``pixel_shuffle(self, vision_features, scale_factor=0.5)``.

    Shapes: ``(batch, width, height, channels)`` -> ``(batch, width * s, height * s,
    channels / s**2)`` for ``s = scale_factor`` (the input's dtype).

    Source: the model code (``height % scale_factor`` in ``modeling_internvl.py``);
        https://github.com/pytorch/pytorch/issues/136797
    """

    def pixel_shuffle(self: Any, vision_features: torch.Tensor,
                      scale_factor: float = 0.5) -> torch.Tensor:
        ratio = round(1 / scale_factor) if scale_factor > 0 else 0
        if ratio < 1 or abs(ratio * scale_factor - 1) > 1e-9:
            return original(self, vision_features, scale_factor=scale_factor)
        return shuffle_with_ints(vision_features, ratio)

    return pixel_shuffle
