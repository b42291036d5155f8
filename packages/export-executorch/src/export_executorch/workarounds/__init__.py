"""Registered ExecuTorch workarounds; importing this package registers them.

Registration is the only side effect. This package is the ``executorch`` entry of the
``export_core.backends`` entry-point group: importing it registers the ExecuTorch stage plan
(:mod:`export_executorch.stages`) and each workaround, under ``"executorch"`` (every ExecuTorch
backend) or a backend sub-key (``"executorch.xnnpack"``), with its stage, the reason it exists
and the upstream bug:

- :mod:`.list_return_validator` — ExecuTorch patch (``executorch_patches``): the edge verifier
  specialises the batch of ``split`` / ``chunk`` outputs.
- :mod:`.xnnpack_reshape_dims` — ExecuTorch patches (``executorch_patches``, XNNPACK): the
  partitioner delegates 1-d convolutions and ``unsqueeze`` nodes that need a reshape with two
  dynamic dimensions, which XNNPACK cannot serialize (wav2vec2-style audio encoders).
- :mod:`.xnnpack_passthrough` — ExecuTorch patches (``executorch_patches``, XNNPACK): the
  partitioner delegates no-op clones whose removal leaves the delegate an output twice or an
  input as an output (a permuted tensor that a ``reshape`` and another op both read).
- :mod:`.xnnpack_max_dim` — ExecuTorch patch (``executorch_patches``, XNNPACK): the partitioner
  delegates ``max.dim`` reductions the XNNPACK serializer rejects (any axis but 2 / 3, or
  ``keepdim=False``).
- :mod:`.xnnpack_attention` — FX node fix (``fx_node_fixes``, XNNPACK): attention becomes ops
  XNNPACK delegates, instead of torch's math decomposition, whose fully-masked-row guard and
  operand expands run score-sized on portable kernels.
- :mod:`.xnnpack_partition_merge` — ExecuTorch patch (``executorch_patches``, XNNPACK): the
  partitioner's merge step runs a full-graph cycle check per pair of partitions, so a graph of a
  few thousand nodes does not lower; the same merges are decided on reachability bitmasks.
- :mod:`.negative_padding` — FX node fix (``fx_node_fixes``): the ``constant_pad_nd`` kernel
  refuses negative padding (a crop in PyTorch: RWKV's token shift); it becomes a slice and a
  non-negative pad.
- :mod:`.sym_mod_sign` — FX node fix (``fx_node_fixes``): the runtime computes ``%`` of
  symbolic sizes with C++'s sign, so ``(-seq) % block`` (padding to a multiple) comes out
  negative; each remainder becomes ``((a % b) + b) % b``.
- :mod:`.xnnpack_gelu_tanh` — FX node fix (``fx_node_fixes``, XNNPACK): XNNPACK runs
  ``gelu(approximate="tanh")`` as the exact GELU (a silent error); the tanh form is decomposed.
- :mod:`.partition_sort` — ExecuTorch patch (``executorch_patches``): ``to_backend``
  re-copies and re-compiles the whole graph after each partition it creates; each partition's
  topological sort is done in place and the code regenerated once (hundreds of partitions).
- :mod:`.partitioner_checks` — not a workaround: the rejecting ``check_constraints`` wrapper the
  XNNPACK partitioner patches share.
- :mod:`.complex_as_real` — FX program fix (``fx_program_fixes``): complex tensors (rotary
  embeddings written with ``polar`` / ``view_as_complex``), which ExecuTorch cannot lower or run,
  are carried as real ``(..., 2)`` pairs.
- :mod:`.dim_bounds` — FX program fix (``fx_program_fixes``): a finite range for every dynamic
  dimension, so ExecuTorch plans memory for the inputs the program must accept.
- :mod:`.dim_order_strides` — ExecuTorch patch (``executorch_patches``): ``to_executorch``
  derives dim orders from strides with a data-dependent size without guarding (the contiguous
  order where the symbolic facts cannot decide).
- :mod:`.exact_quotient_bounds` — ExecuTorch patch (``executorch_patches``): sizes that are exact
  quotients (a view's inferred ``-1``) are simplified before ``to_executorch`` bounds them (a
  view overran the arena, or an unbounded size fell back to the example's).
- :mod:`.item_scalars` — FX program fix (``fx_program_fixes``): ``aten.item`` nodes, which fail
  every re-trace with symbolic sizes, become ``aten._local_scalar_dense`` (ExecuTorch's prim op).
- :mod:`.missing_kernels` — FX program fix (``fx_program_fixes``): ``scatter_reduce.two``,
  ``bucketize.Tensor``, ``repeat_interleave.Tensor`` (no kernel, or not Core ATen) and
  ``conv3d`` decomposed into ops ExecuTorch runs.
- :mod:`.python_sym_ops` — FX program fix (``fx_program_fixes``): the edge verifier rejects the
  Python symbolic-size functions (``torch.sym_max``, ...) that ExecuTorch runs as prim ops; the
  lowering admits the ones the program calls.
- :mod:`.view_copy_fake_rules` — ExecuTorch patch (``executorch_patches``): the ``_copy`` twins
  the lowering swaps views for (``slice_copy``, ``select_copy``) get their view's fake rule, which
  does not guard on sizes read from tensor data (``x[1:]`` on Qwen2.5-VL's window index).
- :mod:`.contiguous_resize_inputs` — FX node fix (``fx_node_fixes``): a resize of a
  channels-last strided tensor (permuted position embeddings) reads a contiguous copy, so no
  channels-last tensor reaches a portable kernel that refuses mixed dim orders.
- :mod:`.floored_remainder` — FX node fix (``fx_node_fixes``): integer ``remainder`` as
  ``a - floor_divide(a, b) * b`` (the portable kernels return C's truncated remainder).
- :mod:`.long_indices` — FX node fix (``fx_node_fixes``): the edge dialect takes
  ``scatter_add``'s index as int64 only; an int32 index is cast.
- :mod:`.lstm_scan` — FX program fix (``fx_program_fixes``): ``lstm``, which the edge lowering
  unrolls over the example's time steps (a pinned time axis), becomes a ``scan``
  over time that ExecuTorch emits as a loop.
- :mod:`.scan_buffers` — ExecuTorch patch (``executorch_patches``): the emitted ``scan``
  loop neither resizes its carries nor gives its stacked outputs the step's shape, so a dynamic
  dimension besides the scanned one (the batch) fails at run time.
- :mod:`.retrace_contiguity` — torch patch (``torch_patches``): the edge lowering's re-trace
  records node memory formats without guarding sizes (as the capture does).
- :mod:`.symbolic_empty` — FX node fix (``fx_node_fixes``): ``new_empty`` / ``empty`` of a
  symbolic size, which the dim-order pass specialises to the example's size (multi-head latent
  attention), becomes ``full(size, 0)``.
- :mod:`.view_dynamism` — ExecuTorch patch (``executorch_patches``): a ``view_copy`` whose
  shape dynamism differs from its base's (``_ViewSpec is incompatible with its base``) stays a
  copy instead of becoming a memory view.
- :mod:`.xnnpack_prelu_rank` — FX node fix (``fx_node_fixes``, XNNPACK): the layout pass
  converts every delegated ``prelu``'s input to NHWC but only 4-D tensors convert; ``prelu`` of
  another rank (DAB-DETR's decoder MLPs) becomes ``clamp`` / ``mul`` / ``add``.
- :mod:`.view_after_sdpa` — FX node fix (``fx_node_fixes``): views of an attention output that
  the SDPA decomposition would make non-viewable (GPT-2, ViViT): the captured layout is pinned.
"""

from __future__ import annotations

from ..stages import EXECUTORCH_STAGES
from . import (
    complex_as_real,
    contiguous_resize_inputs,
    dim_bounds,
    dim_order_strides,
    exact_quotient_bounds,
    floored_remainder,
    item_scalars,
    list_return_validator,
    long_indices,
    lstm_scan,
    missing_kernels,
    negative_padding,
    partition_sort,
    partitioner_checks,
    python_sym_ops,
    retrace_contiguity,
    scan_buffers,
    sym_mod_sign,
    symbolic_empty,
    view_after_sdpa,
    view_copy_fake_rules,
    view_dynamism,
    xnnpack_attention,
    xnnpack_gelu_tanh,
    xnnpack_max_dim,
    xnnpack_partition_merge,
    xnnpack_passthrough,
    xnnpack_prelu_rank,
    xnnpack_reshape_dims,
)

__all__ = [
    "EXECUTORCH_STAGES",
    "complex_as_real",
    "contiguous_resize_inputs",
    "dim_bounds",
    "dim_order_strides",
    "exact_quotient_bounds",
    "floored_remainder",
    "item_scalars",
    "list_return_validator",
    "long_indices",
    "lstm_scan",
    "missing_kernels",
    "negative_padding",
    "partition_sort",
    "partitioner_checks",
    "python_sym_ops",
    "retrace_contiguity",
    "scan_buffers",
    "sym_mod_sign",
    "symbolic_empty",
    "view_after_sdpa",
    "view_copy_fake_rules",
    "view_dynamism",
    "xnnpack_attention",
    "xnnpack_gelu_tanh",
    "xnnpack_max_dim",
    "xnnpack_partition_merge",
    "xnnpack_passthrough",
    "xnnpack_prelu_rank",
    "xnnpack_reshape_dims",
]
