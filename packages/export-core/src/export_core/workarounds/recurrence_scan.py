"""Linear recurrences over time captured as one ``scan``, not a Python loop over the example's
steps (Mamba's selective scan, RecurrentGemma's RG-LRU, RWKV's WKV attention).

Without their CUDA kernels, the state-space mixers of ``transformers`` run their recurrence in a
Python loop: ``for index in range(seq_len)`` (``mamba_selective_scan``: Mamba, Falcon-Mamba,
Jamba, Zamba), ``for t in range(hidden_states.shape[1])`` (``RecurrentGemmaRglru._rnn_scan``)
and ``for current_index in range(seq_length)`` (RWKV's ``rwkv_linear_attention_cpu``, the path
every non-CUDA run takes).
``torch.export`` unrolls the loop for the example's length and stacks a fixed number of steps,
so the sequence axis is pinned without a guard: ONNX Runtime rejects another length (``Got
invalid dimensions for input``), ExecuTorch fails at a view (``self.numel() == out.numel()``) or
in XNNPACK's shape propagation.

During an export the loops become ``torch.ops.higher_order.scan`` over the time axis, with the
same per-step arithmetic (float32 state, the model's dtype at the output): ``torch.onnx``
translates it to an ONNX ``Scan``, ExecuTorch emits it as a loop. These are model-code patches:
the model's own loop is the cause. The patched functions keep their signatures; the mixers'
single-step decode paths (``seq_len == 1`` with a cache) are left as they are.

Upstream: https://github.com/pytorch/pytorch/issues/115092 (a loop over a dynamic length needs
a loop construct at capture); ``transformers`` notes the missing ONNX path for its own
``associative_scan`` option in ``mamba_selective_scan``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from ..registry import register_patch

__all__ = ["MAMBA_SCAN_TARGETS", "RGLRU_SCAN_TARGET", "RWKV_SCAN_TARGET", "rg_lru_scan",
           "rglru_scan_as_scan", "rwkv_wkv_as_scan", "scan_steps", "selective_scan",
           "selective_scan_as_scan", "wkv_scan"]

_UPSTREAM = "https://github.com/pytorch/pytorch/issues/115092"

MAMBA_SCAN_TARGETS = tuple(
    f"transformers.models.{name}.modeling_{name}.mamba_selective_scan"
    for name in ("mamba", "falcon_mamba", "jamba", "zamba")
)
"""The module-level selective scans the Mamba-style mixers call (one copy per model)."""

RGLRU_SCAN_TARGET = "transformers.models.recurrent_gemma.modeling_recurrent_gemma.RecurrentGemmaRglru._rnn_scan"
"""RecurrentGemma's RG-LRU recurrence."""

RWKV_SCAN_TARGET = "transformers.models.rwkv.modeling_rwkv.rwkv_linear_attention_cpu"
"""RWKV's WKV attention without its CUDA kernel (``rwkv_linear_attention`` calls it by name)."""


def scan_steps(combine: Any, init: Any, xs: Any) -> Any:
    """``torch._higher_order_ops.scan.scan(combine, init, xs, dim=0)``, shared by the scans the
    export builds (here and in ExecuTorch's LSTM decomposition).

    ``scan`` runs through ``torch.compile`` of one inner function (``run_flattened_scan``),
    whose compiled entries live for the whole process. Once any scan has run (an eager call, an
    earlier export), the next different scan body is a *recompile* of that function, and
    dynamo's automatic dynamic shapes then turn the sizes that changed into symbols that the
    body's graph placeholders carry without a fake value: the program fails at its lowering
    with ``SpecViolationError: Node.meta ... is missing val field``. The scan therefore runs
    with ``automatic_dynamic_shapes`` off: each body is traced at the sizes it is called with
    (the export's own dynamic dims still reach it as symbols).

    Args:
        combine: ``combine(carry, x) -> (next_carry, y)`` over pytrees of tensors.
        init: the initial carry; xs: the inputs, scanned along axis 0.

    Returns:
        ``(last carry, stacked y)`` as ``scan``.
    """
    from torch._higher_order_ops.scan import scan

    with torch._dynamo.config.patch(automatic_dynamic_shapes=False):
        return scan(combine, init, xs, dim=0)


def selective_scan(
    hidden_states: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor,
    C: torch.Tensor, D: torch.Tensor | None = None, z: torch.Tensor | None = None,
    delta_bias: torch.Tensor | None = None, delta_softplus: bool = False,
    return_last_state: bool = False, **kwargs: Any,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Mamba's selective scan as a ``scan`` over time; the arguments of
    ``mamba_selective_scan``.

    Args:
        hidden_states: ``u`` ``(batch, inner, seq)``.
        dt: the time steps ``(batch, inner, seq)`` (before ``delta_bias`` / softplus).
        A: ``(inner, state)`` float32, negative.
        B, C: ``(batch, state, seq)``.
        D: ``(inner,)`` skip weights, or ``None``.
        z: the gate ``(batch, inner, seq)``, or ``None``.
        delta_bias: ``(inner,)`` added to ``dt``; ``delta_softplus``: softplus of ``dt``.
        return_last_state: also return the state after the last step.
        **kwargs: the implementation choices (``use_mambapy``, ...), ignored.

    Returns:
        ``(batch, inner, seq)`` in ``hidden_states``' dtype, and the last state ``(batch, inner,
        state)`` float32 when ``return_last_state``: equal to the sequential loop.

    Source: https://github.com/pytorch/pytorch/issues/115092
    """
    del kwargs
    input_dtype = hidden_states.dtype
    if delta_bias is not None:
        dt = dt + delta_bias.to(dt.dtype)[..., None]
    if delta_softplus:
        dt = F.softplus(dt)
    A = A.float()
    steps = (dt.permute(2, 0, 1).float(), hidden_states.permute(2, 0, 1).float(),
             B.permute(2, 0, 1).float(), C.permute(2, 0, 1).float())
    state = torch.zeros(hidden_states.shape[0], hidden_states.shape[1], A.shape[-1],
                        dtype=torch.float32, device=hidden_states.device)

    def step(carry: torch.Tensor, x: tuple[torch.Tensor, ...]):
        dt_t, u_t, b_t, c_t = x  # (batch, inner) x 2, (batch, state) x 2
        new = torch.exp(A * dt_t.unsqueeze(-1)) * carry + (dt_t * u_t).unsqueeze(-1) * b_t.unsqueeze(1)
        return new, (new * c_t.unsqueeze(1)).sum(-1)

    last, outputs = scan_steps(step, state, steps)
    out = outputs.permute(1, 2, 0).to(input_dtype)
    if D is not None:
        out = out + hidden_states * D[None, :, None]
    if z is not None:
        out = out * F.silu(z)
    return (out, last) if return_last_state else out


def rg_lru_scan(
    self: Any, hidden_states: torch.Tensor, recurrent_gate: torch.Tensor, reset: torch.Tensor,
    recurrent_states: torch.Tensor | None, acc_dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor]:
    """RecurrentGemma's ``_rnn_scan`` with a ``scan`` over time when ``seq > 1``.

    Args:
        self: the ``RecurrentGemmaRglru`` layer (unused).
        hidden_states: ``(batch, seq, width)``; recurrent_gate ``a`` the same shape; reset
            ``(batch, seq, 1)`` bool (document starts).
        recurrent_states: ``(batch, width)`` ``acc_dtype``, or ``None`` (zeros).
        acc_dtype: the accumulation dtype.

    Returns:
        ``(states (batch, seq, width) in hidden_states' dtype, last state (batch, width)
        acc_dtype)``: ``h_t = a_t * ~reset_t * h_{t-1} + x_t``.

    Source: https://github.com/pytorch/pytorch/issues/115092
    """
    del self
    gate = (recurrent_gate * ~reset).type(acc_dtype)
    if recurrent_states is None:
        recurrent_states = torch.zeros(hidden_states[:, 0].shape, dtype=acc_dtype,
                                       device=hidden_states.device)

    def step(carry: torch.Tensor, x: tuple[torch.Tensor, torch.Tensor]):
        gate_t, x_t = x
        new = gate_t * carry + x_t
        return new, new.clone()

    last, states = scan_steps(step, recurrent_states.type(acc_dtype),
                         (gate.transpose(0, 1), hidden_states.type(acc_dtype).transpose(0, 1)))
    return states.transpose(0, 1).type(hidden_states.dtype), last


def wkv_scan(
    time_decay: torch.Tensor, time_first: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
    state: list[torch.Tensor] | tuple[torch.Tensor, ...] | None = None, return_state: bool = False,
) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
    """RWKV's WKV attention (``rwkv_linear_attention_cpu``) as a ``scan`` over time.

    Args:
        time_decay, time_first: ``(hidden,)`` (the decay is ``-exp(time_decay)`` per step).
        key, value: ``(batch, seq, hidden)``.
        state: ``[numerator, denominator, max]``, each ``(batch, hidden)`` float32, or ``None``
            (zeros, zeros and -1e38).
        return_state: return the state after the last step even without an initial one.

    Returns:
        ``(output (batch, seq, hidden) in key's dtype, [numerator, denominator, max] or None)``,
        the loop's values step for step (the same log-sum-exp stabilisation).

    Source: the model code's loop; https://github.com/pytorch/pytorch/issues/115092
    """
    if state is None:
        zeros = torch.zeros_like(key[:, 0], dtype=torch.float32)
        carry = (zeros, zeros.clone(), zeros - 1e38)
    else:
        carry = tuple(state)
    decay = -torch.exp(time_decay)

    def step(carry: tuple[torch.Tensor, ...], x: tuple[torch.Tensor, torch.Tensor]):
        num_state, den_state, max_state = carry
        current_key, current_value = x
        current_key = current_key.float()
        max_for_output = torch.maximum(max_state, current_key + time_first)
        e1 = torch.exp(max_state - max_for_output)
        e2 = torch.exp(current_key + time_first - max_for_output)
        out = ((e1 * num_state + e2 * current_value) / (e1 * den_state + e2)).to(key.dtype)
        max_for_state = torch.maximum(max_state + decay, current_key)
        e1 = torch.exp(max_state + decay - max_for_state)
        e2 = torch.exp(current_key - max_for_state)
        return (e1 * num_state + e2 * current_value, e1 * den_state + e2, max_for_state), out

    last, outputs = scan_steps(step, carry, (key.transpose(0, 1), value.transpose(0, 1)))
    output = outputs.transpose(0, 1)
    return output, (list(last) if return_state or state is not None else None)


@register_patch(
    "dynamo",
    *MAMBA_SCAN_TARGETS,
    reason=(
        "without the mamba_ssm kernel the selective scan is a Python loop over the sequence, "
        "which torch.export unrolls for the example's length (the sequence axis pinned without "
        "a guard); during an export it is a scan over time (an ONNX Scan, an ExecuTorch loop)"
    ),
    upstream=_UPSTREAM,
    versions=("transformers", ">=5,<6"),
)
def selective_scan_as_scan(original: Any) -> Any:
    """Replace ``mamba_selective_scan`` with :func:`selective_scan` (same signature)."""
    del original
    return selective_scan


@register_patch(
    "dynamo",
    RGLRU_SCAN_TARGET,
    reason=(
        "RecurrentGemma's RG-LRU runs its recurrence in a Python loop over the sequence, which "
        "torch.export unrolls for the example's length (the sequence axis pinned without a "
        "guard); during an export it is a scan over time when the sequence is longer than one"
    ),
    upstream=_UPSTREAM,
    versions=("transformers", ">=5,<6"),
)
def rglru_scan_as_scan(original: Any) -> Any:
    """Wrap ``RecurrentGemmaRglru._rnn_scan``: :func:`rg_lru_scan` for ``seq > 1``, the
    original (its one-step decode branch) otherwise."""

    def _rnn_scan(self: Any, hidden_states: torch.Tensor, recurrent_gate: torch.Tensor,
                  reset: torch.Tensor, recurrent_states: torch.Tensor | None,
                  acc_dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
        if hidden_states.shape[1] == 1:
            return original(self, hidden_states, recurrent_gate, reset, recurrent_states,
                            acc_dtype)
        return rg_lru_scan(self, hidden_states, recurrent_gate, reset, recurrent_states,
                           acc_dtype)

    return _rnn_scan


@register_patch(
    "dynamo",
    RWKV_SCAN_TARGET,
    reason=(
        "without its CUDA kernel RWKV's WKV attention is a Python loop over the sequence, which "
        "torch.export unrolls for the example's length (the sequence axis pinned without a "
        "guard); during an export it is a scan over time when the sequence is longer than one"
    ),
    upstream=_UPSTREAM,
    versions=("transformers", ">=5,<6"),
)
def rwkv_wkv_as_scan(original: Any) -> Any:
    """Wrap ``rwkv_linear_attention_cpu``: :func:`wkv_scan` for ``seq > 1``, the original (one
    step, the decode path with a state) otherwise."""

    def rwkv_linear_attention_cpu(time_decay: torch.Tensor, time_first: torch.Tensor,
                                  key: torch.Tensor, value: torch.Tensor,
                                  state: Any = None, return_state: bool = False) -> Any:
        if key.shape[1] == 1:
            return original(time_decay, time_first, key, value, state=state,
                            return_state=return_state)
        return wkv_scan(time_decay, time_first, key, value, state=state,
                        return_state=return_state)

    return rwkv_linear_attention_cpu
