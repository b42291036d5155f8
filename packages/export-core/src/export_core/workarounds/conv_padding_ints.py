"""Audio-codec convolutions padded by sizes computed as Python ints, not tensor buffers.

The ``Conv1d`` wrappers of EnCodec, Mimi, Pocket TTS's audio tokenizer and WavTokenizer
(transformers 5.24; the latter three copy EnCodec's) keep their stride, effective kernel size and
total padding as 0-d int64 *buffers* and compute the right padding that completes the last
convolution window with tensor arithmetic, then hand those tensors to ``F.pad``. ``torch.export``
lifts buffers to graph inputs whose values are unknown while tracing, so ``F.pad`` (and the
``length <= max_pad`` test of the reflect-padding helper) reads them with ``.item()``: an unbacked
symbol, and the capture fails with ``Could not guard on data-dependent expression Eq(u0, 1)``
(reflect mode) or a sum of unbacked sizes (Mimi's causal convolutions). The model code is the
cause: the values are fixed by the layer's ``nn.Conv1d`` (``kernel_size``, ``stride``,
``dilation``), which are Python ints.

The replacement ``forward`` computes the same paddings from those ints and the (symbolic) input
length::

    kernel = (kernel_size - 1) * dilation + 1          # effective kernel size
    total = kernel - stride                            # the buffer ``padding_total``
    frames = ceil((length - kernel + total) / stride)  # windows, the last one completed
    extra = frames * stride + kernel - total - length  # right padding that completes it

then pads causally ``(total, extra)`` or symmetrically ``(total - total // 2, total // 2 +
extra)`` with the class's own ``_pad1d`` (reflect or constant, as configured), convolves, and
applies EnCodec's / WavTokenizer's time group norm where the layer has one. A call with Mimi's
streaming ``padding_cache`` runs the original ``forward`` (that path pads from the cache).

Upstream: ``F.pad`` with a padding read from a tensor is data-dependent under ``torch.export``
(https://github.com/pytorch/pytorch/issues/143222); no transformers issue tracks the buffers.
"""

from __future__ import annotations

from typing import Any

import torch

from ..registry import register_patch

__all__ = ["CONV_PADDING_TARGETS", "conv_paddings", "paddings_from_ints"]

CONV_PADDING_TARGETS: tuple[str, ...] = (
    "transformers.models.encodec.modeling_encodec.EncodecConv1d.forward",
    "transformers.models.mimi.modeling_mimi.MimiConv1d.forward",
    "transformers.models.pocket_tts_audio_tokenizer.modeling_pocket_tts_audio_tokenizer."
    "PocketTTSAudioTokenizerConv1d.forward",
    "transformers.models.wavtokenizer.modeling_wavtokenizer.WavTokenizerConv1d.forward",
)
"""The ``forward`` of each codec's padded ``Conv1d`` wrapper (transformers 5.24)."""


def conv_paddings(length: Any, kernel_size: int, stride: int, dilation: int,
                  causal: bool) -> tuple[Any, Any]:
    """The ``(left, right)`` padding the codecs apply before their ``Conv1d``.

    Args:
        length: the input's time length (an int or a ``SymInt``), in samples or frames.
        kernel_size, stride, dilation: the ``nn.Conv1d``'s (ints).
        causal: all of the fixed padding on the left (``True``) or split with the larger half
            on the left (``False``).

    Returns:
        ``(left, right)`` ints or ``SymInt`` s; ``right`` includes the extra padding that makes
        the last window complete, so the output has ``ceil(length / stride)`` frames.
    """
    kernel = (kernel_size - 1) * dilation + 1
    total = kernel - stride
    frames = -((kernel - total - length) // stride)  # ceil((length - kernel + total) / stride)
    extra = frames * stride + kernel - total - length
    if causal:
        return total, extra
    right = total // 2
    return total - right, right + extra


@register_patch(
    "dynamo",
    *CONV_PADDING_TARGETS,
    reason=(
        "the codec's Conv1d keeps stride, kernel size and padding as int64 buffers and pads "
        "with them (model code): torch.export reads the lifted buffers with .item(), an "
        "unbacked size (Eq(u0, 1)); the same paddings come from the nn.Conv1d's ints"
    ),
    upstream="https://github.com/pytorch/pytorch/issues/143222",
    versions=("transformers", ">=5,<6"),
)
def paddings_from_ints(original: Any) -> Any:
    """Replace ``forward(self, hidden_states[, padding_cache])`` of a codec's ``Conv1d``.

    Shapes: ``hidden_states`` ``(batch, in_channels, time)`` -> ``(batch, out_channels,
    ceil(time / stride))`` (float, the input's dtype).

    Source: the model code (``nn.Buffer(stride)`` / ``padding_total`` in ``modeling_encodec.py``
        and its copies); https://github.com/pytorch/pytorch/issues/143222
    """

    def forward(self: Any, hidden_states: torch.Tensor, padding_cache: Any = None,
                **kwargs: Any) -> torch.Tensor:
        if padding_cache is not None or kwargs:
            return original(self, hidden_states, padding_cache, **kwargs)
        conv = self.conv
        paddings = conv_paddings(hidden_states.shape[-1], conv.kernel_size[0], conv.stride[0],
                                 conv.dilation[0], bool(self.causal))
        hidden_states = conv(self._pad1d(hidden_states, paddings, mode=self.pad_mode))
        if getattr(self, "norm_type", None) == "time_group_norm":
            hidden_states = self.norm(hidden_states)
        return hidden_states

    return forward
