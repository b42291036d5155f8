"""Ops ExecuTorch has no kernel for, decomposed before lowering (``decompose_missing_kernels``):
``scatter_reduce`` with every reduction (shared case 21: ``amax`` without ``self``) and
``bucketize`` (shared case 22) and ``conv3d`` (video patch embeddings), each compared with eager
in the ExecuTorch runtime at two or more shapes; without the fix the program does not load
(scatter_reduce), lower (bucketize) or run (conv3d)."""

from __future__ import annotations

import pytest
import torch

import export_executorch
from _scatter import ScatterReduce
from export_core import LoweringError, RuntimeLoadError
from export_core.registry import withheld
from export_executorch.workarounds.missing_kernels import bucketize, conv3d, scatter_reduce, sort

FIX = "decompose_missing_kernels"
REDUCTIONS = ("sum", "mean", "prod", "amax", "amin")


class Bucketize(torch.nn.Module):
    def __init__(self, right: bool = False, out_int32: bool = False):
        super().__init__()
        self.right, self.out_int32 = right, out_int32

    def forward(self, x, boundaries):
        return torch.bucketize(x, boundaries, right=self.right, out_int32=self.out_int32)


class Tubelets(torch.nn.Module):
    """A video patch embedding: ``pixel_values_videos`` (batch, 3, frames, 16, 16) float32 ->
    a ``Conv3d`` -> (batch, tokens, 8)."""

    def __init__(self, kernel=(2, 4, 4), stride=(2, 4, 4), padding=0, dilation=1, groups=1):
        super().__init__()
        self.conv = torch.nn.Conv3d(3 * groups, 8, kernel, stride=stride, padding=padding,
                                    dilation=dilation, groups=groups)
        self.groups = groups

    def forward(self, pixel_values_videos):
        x = pixel_values_videos.repeat(1, self.groups, 1, 1, 1)
        return self.conv(x).flatten(2).transpose(1, 2)


def _video(batch: int, frames: int, seed: int) -> tuple[torch.Tensor]:
    return (torch.randn(batch, 3, frames, 16, 16, generator=torch.Generator().manual_seed(seed)),)


def _scatter_inputs(g: torch.Generator, dim: int, rows: int, dtype: torch.dtype = torch.float32):
    """``(base (5, 4), src, index)`` scattering ``rows`` values along ``dim``; ``src`` is larger
    than ``index`` (eager reads only its ``index.shape`` corner), some slots receive nothing."""
    base_shape = (5, 4)
    idx_shape = (rows, 3) if dim == 0 else (4, rows)
    src_shape = (rows + 1, 4) if dim == 0 else (5, rows + 2)
    if dtype.is_floating_point:
        base, src = torch.randn(base_shape, generator=g), torch.randn(src_shape, generator=g)
    else:
        base = torch.randint(-9, 9, base_shape, generator=g, dtype=dtype)
        src = torch.randint(-9, 9, src_shape, generator=g, dtype=dtype)
    index = torch.randint(0, base_shape[dim] - 1, idx_shape, generator=g)  # the last slot: none
    return base, src, index


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float64])
@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_scatter_reduce_decomposition_equals_eager(reduce, dtype):
    g = torch.Generator().manual_seed(0)
    for include_self in (True, False):
        for dim in (0, 1):
            for rows in (1, 3, 7):
                base, src, index = _scatter_inputs(g, dim, rows, dtype)
                want = base.scatter_reduce(dim, index, src, reduce, include_self=include_self)
                got = scatter_reduce(base, dim, index, src, reduce, include_self=include_self)
                assert got.dtype == want.dtype
                torch.testing.assert_close(got, want)


@pytest.mark.parametrize("include_self", [True, False], ids=["with-self", "without-self"])
@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_scatter_reduce_runs_in_executorch(reduce, include_self):
    g = torch.Generator().manual_seed(1)
    model = ScatterReduce(reduce, include_self).eval()
    result = export_executorch.export(model, _scatter_inputs(g, 0, 6),
                                      validation_inputs=[_scatter_inputs(g, 0, 3)])
    report = result.report
    assert report["status"] == "ok" and report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) >= 2
    assert FIX in report["fixes"]["applied"]


def test_scatter_reduce_along_another_dim_on_portable():
    g = torch.Generator().manual_seed(2)
    result = export_executorch.export(ScatterReduce("amax", False, dim=1).eval(),
                                      _scatter_inputs(g, 1, 5), backend="portable",
                                      validation_inputs=[_scatter_inputs(g, 1, 2)])
    assert result.report["validation"]["passed"] is True


def test_bucketize_decomposition_equals_eager():
    boundaries = torch.tensor([0.0, 1.0, 2.5, 4.0, 6.5])
    x = torch.tensor([[1.5, 2.5, -3.0, 0.0, float("nan")], [7.0, 4.5, 1.0, 6.5, 4.0]])
    for right in (False, True):
        for out_int32 in (False, True):
            want = torch.bucketize(x, boundaries, right=right, out_int32=out_int32)
            got = bucketize(x, boundaries, right=right, out_int32=out_int32)
            assert got.dtype == want.dtype
            torch.testing.assert_close(got, want)
    ints = torch.tensor([[3, 0, 9], [5, 5, 1]])
    torch.testing.assert_close(bucketize(ints, torch.tensor([1, 3, 5])),
                               torch.bucketize(ints, torch.tensor([1, 3, 5])))


@pytest.mark.parametrize("right", [False, True], ids=["left", "right"])
def test_bucketize_runs_in_executorch(right):
    boundaries = torch.tensor([0.0, 1.0, 2.5, 4.0, 6.5])
    result = export_executorch.export(
        Bucketize(right=right, out_int32=right).eval(), (torch.tensor([[1.0, 2.5, 9.0]] * 2), boundaries),
        validation_inputs=[(torch.tensor([[-1.0, 0.0, 4.0, 6.5, 3.0]] * 3), boundaries)])
    report = result.report
    assert report["status"] == "ok" and report["validation"]["passed"] is True
    assert FIX in report["fixes"]["applied"]


CONV3D_VARIANTS = {
    "tubelet": dict(kernel_size=(2, 4, 4), stride=(2, 4, 4)),
    "padded-dilated-grouped": dict(kernel_size=3, stride=(1, 2, 1), padding=(1, 2, 0),
                                   dilation=(2, 1, 1), groups=2),
    "same-even-kernel": dict(kernel_size=(2, 2, 4), padding="same", dilation=(3, 1, 1)),
    "valid": dict(kernel_size=(3, 1, 1), padding="valid", groups=4),
}


@pytest.mark.parametrize("variant", CONV3D_VARIANTS)
def test_conv3d_decomposition_equals_eager(variant):
    g = torch.Generator().manual_seed(4)
    options = dict(CONV3D_VARIANTS[variant])
    kernel = options.pop("kernel_size")
    kernel = kernel if isinstance(kernel, tuple) else (kernel,) * 3
    groups = options.get("groups", 1)
    weight = torch.randn(8, 8 // groups, *kernel, generator=g)
    for bias in (torch.randn(8, generator=g), None):
        for x in (torch.randn(2, 8, 9, 12, 10, generator=g), torch.randn(8, 7, 8, 9, generator=g)):
            want = torch.nn.functional.conv3d(x, weight, bias, **options)
            got = conv3d(x, weight, bias, **options)
            assert got.shape == want.shape
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_conv3d_over_dynamic_batch_and_frames_runs_in_executorch(backend):
    torch.manual_seed(0)
    model = Tubelets().eval()
    result = export_executorch.export(model, _video(2, 8, 0), backend=backend,
                                      validation_inputs=[_video(3, 12, 1), _video(1, 4, 2)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["0"][:3] for c in report["validation"]["checks"]][:3] == [
        [2, 3, 8], [3, 3, 12], [1, 3, 4]]
    assert FIX in report["fixes"]["applied"]


@pytest.mark.slow  # about 45 s; the dynamic conv3d tests above run by default
def test_conv3d_with_padding_in_time_and_groups_runs_in_executorch():
    torch.manual_seed(0)
    model = Tubelets(kernel=3, stride=(1, 2, 2), padding=(1, 1, 1), groups=2).eval()
    result = export_executorch.export(model, _video(2, 6, 3), validation_inputs=[_video(3, 9, 4)])
    assert result.report["validation"]["passed"] is True


def test_without_the_fix_executorch_cannot_run_them():
    g = torch.Generator().manual_seed(3)
    with withheld("executorch", FIX):
        with pytest.raises(RuntimeLoadError, match="scatter_reduce"):
            export_executorch.export(ScatterReduce("amax", False).eval(), _scatter_inputs(g, 0, 4))
        with pytest.raises(LoweringError, match="bucketize"):
            export_executorch.export(Bucketize().eval(), (torch.randn(2, 3), torch.tensor([0.0, 1.0])))
        with pytest.raises(RuntimeLoadError, match="3-D or 4-D"):
            export_executorch.export(Tubelets().eval(), _video(2, 8, 0))


class Reorder(torch.nn.Module):
    """V-JEPA 2's token reordering: ``scores`` ``(batch, tokens)`` float32 (distinct values),
    ``hidden`` ``(batch, tokens, 4)`` -> the hidden states in score order and back (``argsort``
    of an ``argsort``), plus the scores sorted descending."""

    def forward(self, scores: torch.Tensor, hidden: torch.Tensor):
        order = torch.argsort(scores, dim=1)
        sorted_hidden = torch.gather(hidden, 1, order.unsqueeze(-1).expand(-1, -1, hidden.size(-1)))
        back = torch.argsort(order, dim=1)
        restored = torch.gather(sorted_hidden, 1, back.unsqueeze(-1).expand(-1, -1, hidden.size(-1)))
        values, _ = torch.sort(scores, dim=-1, descending=True)
        return sorted_hidden * 2, restored + 1, values


def _reorder_inputs(batch: int, tokens: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    scores = torch.stack([torch.randperm(tokens, generator=g).float() for _ in range(batch)])
    return scores, torch.randn(batch, tokens, 4, generator=g)


def test_sort_decomposition_equals_eager():
    scores, _ = _reorder_inputs(2, 9, 0)
    for dim, descending in ((1, False), (-1, True), (0, False)):
        want = torch.sort(scores, dim=dim, descending=descending)
        got = sort(scores, dim, descending)
        assert torch.equal(got[0], want.values) and torch.equal(got[1], want.indices)


@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_sort_runs_in_executorch(backend):
    result = export_executorch.export(Reorder().eval(), _reorder_inputs(2, 7, 0), backend=backend,
                                      validation_inputs=[_reorder_inputs(3, 11, 1), _reorder_inputs(1, 5, 2)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) == 3
    assert FIX in report["fixes"]["applied"]


def test_without_the_fix_sort_has_no_kernel():
    with withheld("executorch", FIX), pytest.raises(RuntimeLoadError, match="sort"):
        export_executorch.export(Reorder().eval(), _reorder_inputs(2, 7, 0), validate=False)
