"""ONNX-side workarounds, registered on import (registration is the only side effect).

This package is the ``onnx`` entry of the ``export_core.backends`` entry-point group: importing
it registers the ONNX stage plan (:mod:`export_onnx.stages`) and every ONNX workaround, each at
the lowest stage that expresses it: the ONNX patch (``onnx_patches``), FX node fixes
(``fx_node_fixes``), ONNX translations (``translate``) and ONNX IR fixes (``ir_fixes``).
"""

from __future__ import annotations

from ..stages import ONNX_STAGES
from . import (
    complex_shape_ops,
    constant_outputs,
    contiguous_clone,
    grad_free_type_promotion,
    identity_constants,
    mixed_dtype_arith,
    orphan_initializers,
    refix_after_decompositions,
    rnn_decompositions,
    scatter_reduce_mean,
    sdpa_masked_rows,
    split_symbolic,
    squeeze_unit_dims,
    stable_sort,
    sym_floordiv,
    where_dtypes,
)

__all__ = [
    "ONNX_STAGES",
    "complex_shape_ops",
    "constant_outputs",
    "contiguous_clone",
    "grad_free_type_promotion",
    "identity_constants",
    "mixed_dtype_arith",
    "orphan_initializers",
    "refix_after_decompositions",
    "rnn_decompositions",
    "scatter_reduce_mean",
    "sdpa_masked_rows",
    "split_symbolic",
    "squeeze_unit_dims",
    "stable_sort",
    "sym_floordiv",
    "where_dtypes",
]
