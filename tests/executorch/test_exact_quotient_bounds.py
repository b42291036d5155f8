"""Upper bounds of sizes that are exact quotients (``upper_bounds_of_exact_quotients``): the
attention of a convolved waveform views its ``(batch * heads, frames, frames)`` scores as
``(-1, heads, frames, frames)`` (SEW-D), and ExecuTorch's interval bound of the inferred ``-1``
is ~1e5 times the batch bound, so the view overruns the planned arena and the program does not
load (0x21, or ``std::bad_alloc`` for the arena itself). With the patch the program loads and matches eager at three shapes (batch 1 among
them); without it, it does not load."""

from __future__ import annotations

from contextlib import ExitStack

import pytest
import sympy
import torch
from torch.utils._sympy.functions import FloorDiv, Mod, PythonMod
from torch.utils._sympy.value_ranges import ValueRanges

import export_executorch
from export_core import RuntimeLoadError
from export_core.registry import withheld
from export_executorch.workarounds.exact_quotient_bounds import (
    UPPER_BOUND_TARGETS,
    enumerated_upper_bound,
    exact_quotients,
    independent_factors,
    tight_upper_bound,
)

FIRED = [f"executorch:{t}" for t in UPPER_BOUND_TARGETS]


class ConvolvedAttention(torch.nn.Module):
    """``waveform`` ``(batch, samples)`` float32 -> ``(batch, frames, 8)``, ``frames =
    ((samples // 10) - 4) // 2 + 1``: two strided convolutions, then 4-head self-attention whose
    scores are viewed with an inferred batch (``view(-1, heads, frames, frames)``)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv1 = torch.nn.Conv1d(1, 8, 10, stride=10)
        self.conv2 = torch.nn.Conv1d(8, 8, 4, stride=2)

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        h = self.conv2(self.conv1(waveform.unsqueeze(1))).transpose(1, 2)
        batch, frames, _ = h.shape
        q = h.reshape(batch, frames, 4, 2).transpose(1, 2).reshape(-1, frames, 2)
        scores = torch.bmm(q, q.transpose(1, 2))
        scores = scores.view(-1, 4, scores.size(-2), scores.size(-1)).softmax(-1)
        context = torch.bmm(scores.view(-1, frames, frames), q).view(-1, 4, frames, 2)
        return context.permute(0, 2, 1, 3).reshape(batch, frames, 8)


def _waveforms() -> tuple[tuple[torch.Tensor], list[tuple[torch.Tensor]]]:
    g = torch.Generator().manual_seed(0)
    return ((torch.randn(2, 400, generator=g),),
            [(torch.randn(3, 500, generator=g),), (torch.randn(1, 250, generator=g),)])


def test_exact_quotients_are_simplified():
    b, s = sympy.symbols("b s", integer=True, positive=True)
    g = FloorDiv(FloorDiv(s, 10) - 3, 2)
    frames = g + 1
    quotient = FloorDiv(4 * b * frames**2, frames * (4 * g + 4))
    assert exact_quotients(quotient) == b
    assert exact_quotients(FloorDiv(4 * b, quotient)) == 4
    assert exact_quotients(Mod(6 * b * frames, 3 * frames)) == 0
    inexact = FloorDiv(s, 10)
    assert exact_quotients(inexact) is inexact  # not a multiple of 10 for every s
    ranges = {b: ValueRanges(1, 8), s: ValueRanges(50, 16000)}
    assert tight_upper_bound(quotient, ranges) == 8
    assert tight_upper_bound(b * FloorDiv(4 * b, quotient), ranges) == 32
    assert tight_upper_bound(inexact, ranges) is None  # nothing rewritten: ExecuTorch's bound


@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_attention_over_convolved_frames_loads_and_matches_eager(backend):
    example, validation = _waveforms()
    result = export_executorch.export(ConvolvedAttention().eval(), example, backend=backend,
                                      validation_inputs=validation)
    report = result.report
    assert report["status"] == "ok" and report["validation"]["passed"] is True
    assert [c["shapes"]["0"] for c in report["validation"]["checks"]] == [[2, 400], [3, 500], [1, 250]]
    assert set(FIRED) <= set(report["patches"]["fired"])
    # the largest tensors are the (8 * 4, 799, 799) float32 scores at the bounds (82 MB)
    assert report["memory"]["arena_bytes"] < 256 << 20


def test_without_the_patch_the_view_overruns_the_arena():
    example, validation = _waveforms()
    with ExitStack() as stack:
        for target in UPPER_BOUND_TARGETS:
            stack.enter_context(withheld("executorch", target))
        with pytest.raises(RuntimeLoadError, match="0x:21|bad_alloc"):
            export_executorch.export(ConvolvedAttention().eval(), example, validation_inputs=validation)


def test_unbounded_intervals_get_the_maximum_over_the_range():
    """Mamba-2's padded length ``L = s + (256 - s % 256) % 256`` and chunk length ``L // (L //
    256)``: the interval of the quotient is unbounded (``L // 256`` reaches 0 in interval
    arithmetic), so ExecuTorch took the example's size (256 chunks of one at 12 tokens); the
    maximum over ``s`` in ``[2, 512]`` is exact."""
    s, b = sympy.symbols("s b", integer=True, positive=True)
    padded = s + PythonMod(256 - PythonMod(s, 256), 256)
    chunks = FloorDiv(padded, 256)
    ranges = {s: ValueRanges(2, 512), b: ValueRanges(1, 8)}
    assert enumerated_upper_bound(FloorDiv(padded, chunks), ranges) == 256
    assert enumerated_upper_bound(chunks * FloorDiv(padded, chunks), ranges) == 512
    assert enumerated_upper_bound(4 * b * chunks, ranges) == 64
    assert enumerated_upper_bound(chunks, ranges, limit=100) is None  # 511 points
    assert enumerated_upper_bound(s, {s: ValueRanges(2, sympy.oo)}) is None
    # a divisor that is 0 somewhere in its range (Qwen2-VL's merged tokens per image): no
    # input reaches those points, the maximum is over the rest
    assert enumerated_upper_bound(FloorDiv(64, FloorDiv(s, 4)), {s: ValueRanges(2, 16)}) == 64
    assert enumerated_upper_bound(FloorDiv(8, s - 2), {s: ValueRanges(2, 2)}) is None


def test_a_product_over_disjoint_symbols_is_maximised_factor_by_factor():
    """TimeSformer's frame-major reshape ``8*b*(p//8)*(p//(p//8))`` over patches ``p = (h//4) *
    (w//4)``: 8 x 29 x 29 points exceed the limit, so the whole grid was not enumerated and
    ExecuTorch planned the example's batch (2); the batch and the patch factor are independent,
    and their maxima multiply."""
    b, h, w = sympy.symbols("b h w", integer=True, positive=True)
    patches = FloorDiv(h, 4) * FloorDiv(w, 4)
    expr = 8 * b * FloorDiv(patches, 8) * FloorDiv(patches, FloorDiv(patches, 8))
    ranges = {b: ValueRanges(1, 8), h: ValueRanges(4, 32), w: ValueRanges(4, 32)}
    constant, factors = independent_factors(expr)
    assert constant == 8 and len(factors) == 2
    brute = max(int(expr.xreplace({b: 8, h: sympy.Integer(i), w: sympy.Integer(j)}))
                for i in range(4, 33) for j in range(4, 33) if (i // 4) * (j // 4) >= 8)
    assert enumerated_upper_bound(expr, ranges) == brute == 8 * 8 * 64
    # the product of maxima needs non-negative factors
    assert enumerated_upper_bound(b * (h - 10), ranges) is None
    assert enumerated_upper_bound(-1 * b, ranges) is None


def _hiera_window_count():
    """Hiera's window count of its unrolled tokens, as torch.export writes it: a batch ``b``
    times the windows of an ``h`` x ``w`` image, divided by the tokens per window, all read back
    from floor divisions of the image sides."""
    b, h, w = sympy.symbols("b h w", integer=True, positive=True)
    tokens = FloorDiv(h, 4) * FloorDiv(w, 4)
    windows = b * FloorDiv(h, 32) * FloorDiv(w, 32) * FloorDiv(h, 4 * FloorDiv(h, 8))
    expr = FloorDiv(windows * FloorDiv(tokens, FloorDiv(h, 4) * FloorDiv(w, 8)), FloorDiv(tokens, 16))
    return expr, (b, h, w), {b: ValueRanges(2, 8), h: ValueRanges(64, 224), w: ValueRanges(64, 224)}


def test_a_quotient_of_correlated_terms_is_maximised_over_its_grid():
    """Interval arithmetic divides the numerator's maximum by the denominator's minimum: Hiera's
    windows got ~600000 where there are 8 at most, and the program planned 1.7 TiB. The batch
    never decreases the size, so it is fixed at its maximum, and the image sides are enumerated:
    the bound is the brute-force maximum."""
    from export_executorch.workarounds.exact_quotient_bounds import _finite_upper, grid_upper_bound

    expr, (b, h, w), ranges = _hiera_window_count()
    brute = max(
        (b_ * (h_ // 32) * (w_ // 32) * (h_ // (4 * (h_ // 8))) * (((h_ // 4) * (w_ // 4))
         // ((h_ // 4) * (w_ // 8)))) // (((h_ // 4) * (w_ // 4)) // 16)
        for b_ in (2, 8) for h_ in range(64, 225) for w_ in range(64, 225))
    assert grid_upper_bound(expr, ranges) == brute
    assert _finite_upper(expr, ranges) > 100 * brute


def test_grid_bound_declines_what_it_cannot_bound():
    from torch.utils._sympy.functions import CeilDiv

    from export_executorch.workarounds.exact_quotient_bounds import grid_upper_bound

    b, h = sympy.symbols("b h", integer=True, positive=True)
    ranges = {b: ValueRanges(1, 8), h: ValueRanges(1, 64)}
    assert grid_upper_bound(b * h + 3, ranges) is None  # no division: intervals are exact
    assert grid_upper_bound(FloorDiv(h, 4), {h: ValueRanges(1, sympy.oo)}) is None
    assert grid_upper_bound(FloorDiv(h, FloorDiv(b, 2)), ranges, limit=100) is None
    assert grid_upper_bound(FloorDiv(h, FloorDiv(b, 2)), ranges) == 64  # b = 1 divides by 0
    assert grid_upper_bound(CeilDiv(h, 3) + Mod(h, 5) + PythonMod(h, 7), ranges) == max(
        -(-i // 3) + i % 5 + i % 7 for i in range(1, 65))
    assert grid_upper_bound(FloorDiv(h, 2) + sympy.sqrt(h), ranges) is None  # not compiled


def test_a_common_factor_of_a_floor_division_cancels():
    """``(g*a) // (g*b)`` is ``a // b``: the same rational, so the same floor, for any ``g``."""
    b, h, w = sympy.symbols("b h w", integer=True, positive=True)
    expr = FloorDiv(b * 3 * FloorDiv(h, 4), b * FloorDiv(w, 8))
    simplified = exact_quotients(expr)
    assert b not in simplified.free_symbols
    for point in ({b: 2, h: 64, w: 64}, {b: 7, h: 100, w: 17}):
        assert expr.xreplace(point) == simplified.xreplace(point)


@pytest.mark.slow
def test_hiera_loads_and_matches_eager():
    """The tiny Hiera (224 x 224 images, 4 x 4 patches, windows of 8 x 8 tokens): without the
    patch its planned arena is 1.7 TiB and the program does not load; with it, about 40 MiB,
    and it matches eager at three shapes, batch 1 among them."""
    from export_sweep.zoo.build import build_tiny_model

    tiny = build_tiny_model("hiera")
    result = export_executorch.export(tiny.model, tiny.inputs.first)
    assert result.report["validation"]["passed"] is True
    assert result.report["memory"]["arena_bytes"] < 1 << 30
    assert 1 in [c["shapes"]["pixel_values"][0] for c in result.report["validation"]["checks"]]
    with ExitStack() as stack:
        for target in UPPER_BOUND_TARGETS:
            stack.enter_context(withheld("executorch", target))
        with pytest.raises(RuntimeLoadError, match="bad_alloc|MemoryAllocationFailed"):
            export_executorch.export(tiny.model, tiny.inputs.first)
