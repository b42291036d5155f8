"""Axes the model's code specialised below their range: a branch on a derived size (Mamba-2's
chunk count, traced with one chunk) leaves a shape guard the graph relies on. Both exporters
bound the axis where the guard stops holding and say so; ExecuTorch plans memory for that bound
(a program planned for 64 would fail past 16 at run time), ONNX reports it (the graph would
compute with the wrong branch past it)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import export_executorch
import export_onnx
from export_core import DynamoConfig, DynamoExporter, RuntimeLoadError
from export_core.guards import guard_limits
from export_executorch.runner import ExecutorchRunner


class ChunkedScan(torch.nn.Module):
    """``x`` ``(batch, seq, 4)`` float32 -> ``(batch, seq, 4)``: ``seq`` padded to a multiple of 16,
    a running sum within each chunk, and the first chunk added to the others when there are
    several (the branch that torch.export specialises to one chunk at a short example)."""

    chunk = 16

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        pad = (self.chunk - s % self.chunk) % self.chunk
        y = F.pad(x, (0, 0, 0, pad))
        n = y.shape[1] // self.chunk
        y = y.view(b, n, y.shape[1] // n, d).cumsum(2)
        if n > 1:
            y = y + y[:, :1]
        return y.reshape(b, -1, d)[:, :s]


class PadToSix(torch.nn.Module):
    """``x`` ``(batch, seq, 4)`` -> ``(batch, max(seq, 6), 4)``, zero-padded: copying into the
    slice records ``4*max(6, seq) != seq*4`` (is the slice contiguous?) at every example below
    6, a guard on strides that the graph does not depend on."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pad = x.new_zeros(x.shape[0], torch.sym_max(x.shape[1], 6), x.shape[2])
        pad[:, : x.shape[1]] = x
        return pad


class PadToBlocks(torch.nn.Module):
    """``x`` ``(batch, seq, 4)`` -> ``(batch, ceil(seq / 8), 4)``: sums of blocks of 8 positions,
    the last zero-padded when ``seq`` is not a multiple of 8. Traced at such a size, the guard
    ``seq % 8 != 0`` rejects the multiples of 8 only (the graph would pad a whole block)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] % 8 != 0:
            x = F.pad(x, (0, 0, 0, 8 - x.shape[1] % 8))
        return x.reshape(x.shape[0], -1, 8, x.shape[2]).sum(2)


def _x(batch: int, seq: int, seed: int) -> tuple[torch.Tensor]:
    return (torch.randn(batch, seq, 4, generator=torch.Generator().manual_seed(seed)),)


def _seq_dim(report: dict) -> dict:
    return next(d for d in report["bounds"]["dims"] if d["axis"] == 1)


def test_guard_limits_finds_the_largest_admitted_size() -> None:
    program = DynamoExporter(DynamoConfig(dynamic=True)).capture(ChunkedScan(), _x(2, 8, 0)).program
    placeholder = next(n for n in program.graph.nodes if n.op == "placeholder")
    batch, seq, _ = (s.node.expr for s in placeholder.meta["val"].shape)
    limits = guard_limits(program, ["x"], {batch: 8, seq: 64})
    assert set(limits) == {seq}  # the batch is not specialised
    assert (limits[seq].example, limits[seq].max, limits[seq].cap) == (8, 16, 64)
    assert "x.size(1)" in limits[seq].guard and "// 16) == 1" in limits[seq].guard
    assert guard_limits(program, ["x"], {str(seq): 16}) == {}  # admitted at its cap
    linear = DynamoExporter(DynamoConfig(dynamic=True)).capture(torch.nn.Linear(4, 2), _x(2, 8, 0))
    assert guard_limits(linear.program, ["x"], {"s0": 64, "s1": 64}) == {}


def test_guards_on_strides_leave_the_axis_alone() -> None:
    program = DynamoExporter(DynamoConfig(dynamic=True)).capture(PadToSix(), _x(2, 5, 0)).program
    placeholder = next(n for n in program.graph.nodes if n.op == "placeholder")
    shape_env = placeholder.meta["val"].shape[1].node.shape_env
    assert any("Max(6" in str(g.expr) and "Ne" in str(g.expr) for g in shape_env.guards)
    symbols = [s.node.expr for s in placeholder.meta["val"].shape]
    assert guard_limits(program, ["x"], dict.fromkeys(symbols, 64)) == {}


def test_executorch_bounds_the_axis_at_the_guard_and_rejects_larger_inputs(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    with caplog.at_level(logging.WARNING):
        result = export_executorch.export(
            ChunkedScan().eval(), _x(2, 8, 0), output=tmp_path, backend="portable", max_seq=64,
            validation_inputs=[_x(3, 12, 1), _x(1, 16, 2)],
        )
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["0"] for c in report["validation"]["checks"]] == [[2, 8, 4], [3, 12, 4],
                                                                          [1, 16, 4]]
    seq = _seq_dim(report)
    assert (seq["min"], seq["max"]) == (1, 16)
    assert seq["source"].startswith("the model's code (a shape guard of the capture fails at 17")
    assert "x[1] is bounded at 16, not 64" in caplog.text
    runner = ExecutorchRunner(result.path, ["x"])
    torch.testing.assert_close(runner(_x(1, 16, 3))[0], ChunkedScan()(*_x(1, 16, 3)))
    beyond = r"\(1, 40, 4\), beyond the program's bounds \(8, 16, 64\) \(axis 1: 40 > 16\)"
    with pytest.raises(RuntimeLoadError, match=beyond):
        runner(_x(1, 40, 3))
    # why the runner checks each axis: the runtime checks only the element count (160 <= 512)
    # and runs the one-chunk graph on 40 positions
    (silent,) = runner.method.execute(list(_x(1, 40, 3)))
    assert not torch.allclose(silent, ChunkedScan()(*_x(1, 40, 3)))


def test_onnx_reports_the_axis_the_guard_holds_for(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        report = export_onnx.export(ChunkedScan().eval(), _x(2, 8, 0),
                                    validation_inputs=[_x(3, 12, 1), _x(1, 16, 2)]).report
    assert report["validation"]["passed"] is True
    seq = _seq_dim(report)
    assert seq["max"] == 16 and "a shape guard of the capture fails at 17" in seq["source"]
    assert report["bounds"]["max_seq"] == 16
    assert "x[1] (sequence) holds only up to 16" in caplog.text


def test_a_model_without_such_a_branch_keeps_its_bounds() -> None:
    report = export_executorch.export(torch.nn.Linear(4, 2).eval(), _x(2, 8, 0), max_seq=64).report
    assert _seq_dim(report)["max"] == 64


def test_a_size_one_check_of_the_stride_bookkeeping_is_kept() -> None:
    """The contiguity check's "is this axis of size 1" may be the first to record an expression
    the model's code branches on too (one chunk); the branch then leaves no guard of its own,
    so that comparison is kept. Comparisons of sizes with each other are left out."""
    import traceback

    import sympy
    from torch._guards import ShapeGuard, SLoc

    from export_core.guards import _is_layout_guard

    s, d = sympy.symbols("s d", integer=True, positive=True)
    torch_dir = Path(torch.__file__).parent
    contiguity = SLoc(traceback.FrameSummary(str(torch_dir / "_prims_common" / "__init__.py"),
                                             285, "check_contiguous_sizes_strides"), None)
    model = SLoc(traceback.FrameSummary("/models/modeling_x.py", 10, "forward"), None)
    strides = sympy.Ne(d * sympy.Max(6, s), s * d)
    assert _is_layout_guard(ShapeGuard(strides, contiguity, False))
    assert not _is_layout_guard(ShapeGuard(sympy.Eq(s // 16, 1), contiguity, False))
    assert not _is_layout_guard(ShapeGuard(strides, model, False))


def test_a_guard_with_gaps_leaves_onnx_unbounded_and_bounds_executorch_below_its_cap(
    caplog: pytest.LogCaptureFixture,
) -> None:
    program = DynamoExporter(DynamoConfig(dynamic=True)).capture(PadToBlocks(), _x(2, 5, 0)).program
    placeholder = next(n for n in program.graph.nodes if n.op == "placeholder")
    seq = placeholder.meta["val"].shape[1].node.expr
    limit = guard_limits(program, ["x"], {seq: 64})[seq]
    assert (limit.max, limit.resumes) == (63, 65)  # 64 is a multiple of 8, 65 is not
    with caplog.at_level(logging.WARNING):
        report = export_onnx.export(PadToBlocks().eval(), _x(2, 5, 0),
                                    validation_inputs=[_x(3, 13, 1), _x(1, 30, 2)]).report
    assert report["validation"]["passed"] is True
    assert _seq_dim(report)["max"] is None
    assert "x[1] (sequence) is not admitted at 4096" in caplog.text
    assert "holds again at 4097" in caplog.text
    with caplog.at_level(logging.WARNING):
        report = export_executorch.export(PadToBlocks().eval(), _x(2, 5, 0), backend="portable",
                                          max_seq=64, validation_inputs=[_x(3, 13, 1)]).report
    assert report["validation"]["passed"] is True and _seq_dim(report)["max"] == 63
    assert "x[1] is bounded at 63, not 64" in caplog.text and "holds again at 65" in caplog.text
