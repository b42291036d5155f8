"""ONNX-side workarounds, registered on import (registration is the only side effect).

Each module fixes one kind of fault at the lowest stage that expresses it: FX node fixes
(``export_core.registry.register_fx_node_fix("onnx", ...)``), ONNX translations
(:func:`export_onnx.translations.register_onnx_translation`) and ONNX IR fixes
(:func:`export_onnx.ir_fixes.register_ir_fix`).
"""

from __future__ import annotations

from . import (
    mixed_dtype_arith,
    sdpa_masked_rows,
    split_symbolic,
    stable_sort,
    sym_floordiv,
    where_dtypes,
)

__all__ = [
    "mixed_dtype_arith",
    "sdpa_masked_rows",
    "split_symbolic",
    "stable_sort",
    "sym_floordiv",
    "where_dtypes",
]
