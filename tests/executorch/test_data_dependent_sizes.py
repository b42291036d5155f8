"""Sizes read from tensor data, through ExecuTorch: ``repeat_interleave`` with a tensor of
repeats (both overloads, decomposed by ``decompose_missing_kernels``: not Core ATen), ``.item()``
(retargeted to ``_local_scalar_dense`` by ``item_as_local_scalar_dense``: its Python reference
fails every re-trace), and the upper bound memory planning needs for every data-dependent size
(the report's ``bounds.data_dependent``). Each compared with eager in the ExecuTorch runtime at
image counts and sizes other than the example's; without the fixes the program does not lower.
Also the dim order of a tensor whose strides hold a data-dependent size (``dim_order_without_guards``)."""

from __future__ import annotations

from contextlib import ExitStack

import pytest
import torch

import export_executorch
from export_core import ExportError
from export_core.registry import withheld
from export_executorch.workarounds.dim_order_strides import DIM_ORDER_TARGETS
from export_executorch.workarounds.missing_kernels import repeat_interleave, repeat_interleave_self

DECOMPOSE = "decompose_missing_kernels"
ITEM = "item_as_local_scalar_dense"


class PatchesPerImage(torch.nn.Module):
    """Per-patch features of packed images, as Qwen-VL-style towers index them: ``grid_thw``
    ``(images, 3)`` int64 ``(t, h, w)`` and ``features`` ``(images, dim)`` float32 ->
    ``(sum(t * h * w), dim)``: each image's features repeated once per patch, scaled by the
    image's index + 1."""

    def forward(self, grid_thw: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        counts = grid_thw.prod(-1)
        per_patch = features.repeat_interleave(counts, dim=0)  # repeat_interleave.self_Tensor
        image_of_patch = torch.repeat_interleave(counts)  # repeat_interleave.Tensor
        return per_patch * (image_of_patch.unsqueeze(-1) + 1).to(features.dtype)


class FirstFrames(torch.nn.Module):
    """The features of the first ``grid_thw[:, 0].sum()`` rows, read with ``.item()`` from the
    last running total (a view at a symbolic offset, as vision position ids read it):
    ``grid_thw`` ``(images, 3)`` int64, ``features`` ``(rows, dim)`` float32 (packed rows, as
    beside a grid) -> ``(frames, dim)``."""

    def forward(self, grid_thw: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        frames = grid_thw[:, 0].cumsum(0)[-1].item()  # a view at a symbolic offset
        torch._check(frames >= 0)
        torch._check(frames <= features.shape[0])
        return features[:frames] * 2


def _grid(images: int, seed: int, rows: int | None = None) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    grid = torch.randint(1, 4, (images, 3), generator=g)
    return {"grid_thw": grid, "features": torch.randn(rows or images, 8, generator=g)}


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_repeat_interleave_decompositions_equal_eager(dtype) -> None:
    repeats = torch.tensor([2, 0, 3, 1], dtype=dtype)
    assert torch.equal(repeat_interleave(repeats), torch.repeat_interleave(repeats))
    assert torch.equal(repeat_interleave(repeats, output_size=6),
                       torch.repeat_interleave(repeats, output_size=6))
    x = torch.arange(24.0).reshape(4, 3, 2)
    for dim in (0, -3):
        assert torch.equal(repeat_interleave_self(x, repeats, dim),
                           x.repeat_interleave(repeats, dim=dim))
    one = torch.tensor([3], dtype=dtype)
    assert torch.equal(repeat_interleave_self(x, one, 1), x.repeat_interleave(one, dim=1))
    assert torch.equal(repeat_interleave_self(x, torch.tensor(2, dtype=dtype)),
                       x.repeat_interleave(torch.tensor(2, dtype=dtype)))
    assert repeat_interleave(torch.zeros(0, dtype=dtype)).shape == (0,)


@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_repeat_interleave_with_tensor_repeats_runs_in_executorch(backend) -> None:
    result = export_executorch.export(
        PatchesPerImage(), _grid(2, 0), backend=backend,
        validation_inputs=[_grid(3, 1), _grid(5, 2)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert {c["shapes"]["grid_thw"][0] for c in report["validation"]["checks"]} == {2, 3, 5}
    assert DECOMPOSE in report["fixes"]["applied"]
    # the patch count is read from the grid's data: planned at the largest input bound
    assert report["bounds"]["data_dependent"]


def test_item_runs_in_executorch() -> None:
    result = export_executorch.export(
        FirstFrames(), _grid(2, 0, rows=12),
        validation_inputs=[_grid(3, 1, rows=16), _grid(4, 2, rows=20)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) == 3
    assert ITEM in report["fixes"]["applied"]


def test_without_the_fixes_executorch_cannot_lower_them() -> None:
    """Documents the upstream faults: when these stop failing, the fixes can go."""
    with withheld("executorch", DECOMPOSE), pytest.raises(ExportError, match="Core ATen"):
        export_executorch.export(PatchesPerImage(), _grid(2, 0), validate=False)
    with withheld("executorch", ITEM), pytest.raises(ExportError, match="Cannot cast FakeTensor"):
        export_executorch.export(FirstFrames(), _grid(2, 0, rows=12), validate=False)


class KeptTokens(torch.nn.Module):
    """The leading tokens a mask counts, as masked encoders keep their visible tokens first:
    ``x`` ``(batch, tokens, 64)`` float32 and ``keep`` ``(tokens,)`` bool -> ``(batch, kept,
    64)`` with ``kept = keep.sum()``, whose contiguous strides ``(64*kept, 64, 1)`` hold a
    data-dependent size."""

    def forward(self, x: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        n = keep.sum().item()
        torch._check(n >= 0)
        torch._check(n <= x.shape[1])
        kept = x[:, :n]
        return torch.relu(kept) * 2.0 + 1.0


def _kept(batch: int, tokens: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, tokens, 64, generator=g), torch.rand(tokens, generator=g) > 0.4


DIM_ORDER = [f"executorch:{target}" for target in DIM_ORDER_TARGETS]


@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_dim_order_of_a_data_dependent_stride(backend: str) -> None:
    result = export_executorch.export(KeptTokens(), _kept(2, 12, 0), backend=backend,
                                      validation_inputs=[_kept(1, 10, 1), _kept(3, 7, 2)])
    assert result.report["validation"]["passed"] is True
    assert len(result.report["validation"]["checks"]) == 3
    assert DIM_ORDER[0] in result.report["patches"]["fired"]


def test_without_the_dim_order_patch_to_executorch_fails() -> None:
    """Documents executorch 1.5.1's guarding comparator; when this stops failing, the patch
    can go."""
    with ExitStack() as stack:
        for name in DIM_ORDER:
            stack.enter_context(withheld("executorch", name))
        with pytest.raises(ExportError, match="data-dependent"):
            export_executorch.export(KeptTokens(), _kept(2, 12, 0))


def test_guard_free_dim_order_keeps_undecidable_axes_in_order() -> None:
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from export_executorch.workarounds.dim_order_strides import guard_free_dim_order

    u0 = ShapeEnv().create_unbacked_symint()
    assert guard_free_dim_order((64 * u0, 64, 1)) == (0, 1, 2)
    assert guard_free_dim_order((1, u0)) == (1, 0)  # 1 divides u0: u0 is the larger stride
    assert guard_free_dim_order((6, 1, 2)) == (0, 2, 1)  # concrete strides: a plain sort
