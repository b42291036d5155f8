"""``scatter_reduce`` through ONNX: ``mean`` (shared case 26, silently the last scattered value
with TorchLib's translation) and a ``src`` larger than ``index`` (rejected by ONNX Runtime), for
every reduction, with and without ``self``, float and integer, along two axes, compared with eager
in ONNX Runtime at two shapes."""

from __future__ import annotations

import pytest
import torch

import export_onnx
from _scatter import ScatterReduce
from export_core import ValidationError
from export_core.registry import withheld

TRANSLATION = "aten_scatter_reduce_with_mean"


def _inputs(g: torch.Generator, dim: int, rows: int, dtype: torch.dtype, larger_src: bool):
    base_shape = (5, 4)
    idx_shape = (rows, 3) if dim == 0 else (4, rows)
    grow = 1 if larger_src else 0
    src_shape = (rows + grow, 4 if larger_src else 3) if dim == 0 else (4 + grow, rows + grow)
    if dtype.is_floating_point:
        base, src = torch.randn(base_shape, generator=g), torch.randn(src_shape, generator=g)
    else:
        base = torch.randint(-9, 9, base_shape, generator=g, dtype=dtype)
        src = torch.randint(-9, 9, src_shape, generator=g, dtype=dtype)
    return base, src, torch.randint(0, base_shape[dim] - 1, idx_shape, generator=g)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=["float32", "int64"])
@pytest.mark.parametrize("include_self", [True, False], ids=["with-self", "without-self"])
@pytest.mark.parametrize("dim", [0, 1])
def test_mean_equals_eager(dim, include_self, dtype):
    g = torch.Generator().manual_seed(0)
    r = export_onnx.export(ScatterReduce("mean", include_self, dim).eval(),
                           _inputs(g, dim, 6, dtype, False),
                           validation_inputs=[_inputs(g, dim, 2, dtype, False)])
    assert r.report["validation"]["passed"] is True
    assert TRANSLATION in r.report["translations"]["used"]


@pytest.mark.parametrize("reduce", ["sum", "prod", "amax", "amin", "mean"])
def test_a_src_larger_than_the_index_is_cut_to_it(reduce):
    g = torch.Generator().manual_seed(1)
    r = export_onnx.export(ScatterReduce(reduce, False, 1).eval(), _inputs(g, 1, 5, torch.float32, True),
                           validation_inputs=[_inputs(g, 1, 2, torch.float32, True)])
    assert r.report["validation"]["passed"] is True


def test_without_the_translation_the_mean_is_wrong():
    g = torch.Generator().manual_seed(2)
    with withheld("onnx", TRANSLATION), pytest.raises(ValidationError, match="differs from eager"):
        export_onnx.export(ScatterReduce("mean", True).eval(), _inputs(g, 0, 6, torch.float32, False),
                           validation_inputs=[_inputs(g, 0, 2, torch.float32, False)])
