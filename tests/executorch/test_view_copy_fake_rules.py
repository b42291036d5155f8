"""Sizes read from tensor data through ExecuTorch's view-to-copy swap and its memory plan.

- ``view_rules_for_copies``: the lowering turns ``x[1:]`` / ``x[0]`` into ``slice_copy`` /
  ``select_copy`` and re-runs them on fake tensors; without the patch the copies' Python
  decomposition guards on the data-dependent row count (``u0 < 1``) and the program does not
  lower.
- ``asserted_sizes`` (in ``upper_bounds_of_exact_quotients``): a size read from data that the
  program asserts equal to an input size is bounded as that size; without it ExecuTorch finds no
  finite bound.
- Qwen2.5-VL's vision tower (the zoo's tiny one), which needs both and the window-order checks,
  compared with eager at two image layouts.

Each compared with eager in the ExecuTorch runtime at shapes and data other than the example's.
"""

from __future__ import annotations

from contextlib import ExitStack

import pytest
import torch
from torch._subclasses import fake_impls

import export_executorch
from export_core import ExportError, LoweringError
from export_core.registry import withheld
from export_executorch.workarounds.exact_quotient_bounds import UPPER_BOUND_TARGETS
from export_executorch.workarounds.view_copy_fake_rules import (
    FAKE_RULES_TARGET,
    copy_twins_of_view_rules,
)
from export_sweep.zoo.build import build_tiny_model

FAKE_RULES = f"executorch:{FAKE_RULES_TARGET}"
aten = torch.ops.aten


class AfterTheFirstKept(torch.nn.Module):
    """``x`` ``(rows, dim)`` float32 -> the differences of consecutive kept rows, those whose
    first feature is positive (``kept``, a count read from data): ``kept[1:] - kept[:-1]``
    ``(kept - 1, dim)``, as Qwen2.5-VL finds its window boundaries."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kept = x[x[:, 0] > 0]
        return kept[1:] - kept[:-1]


class WindowOrder(torch.nn.Module):
    """Patches reordered by an order built from a grid, as Qwen2.5-VL's window attention does:
    ``grid`` ``(images, 2)`` int64 ``(h, w)`` in merged tokens, ``patches`` ``(batch, 4 *
    tokens, 6)`` float32 (4 patches per merged token) -> ``(batch, 4 * tokens, 6)``,
    projected, the merged tokens reversed. The token count is read from ``grid`` and asserted
    equal to the patch axis over 4."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.proj = torch.nn.Linear(6, 6)

    def forward(self, grid: torch.Tensor, patches: torch.Tensor) -> torch.Tensor:
        tokens = grid.prod(-1).sum().item()
        torch._check(tokens >= 0)
        order = torch.arange(tokens).flip(0)
        batch, length, _ = patches.shape
        torch._check(order.size(0) == length // 4)
        merged = self.proj(patches).reshape(batch, length // 4, 4, 6)
        return merged[:, order].reshape(batch, length, 6)


def _rows(rows: int, kept: int, seed: int) -> tuple[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, 8, generator=g)
    x[:, 0] = -x[:, 0].abs() - 0.1
    x[torch.randperm(rows, generator=g)[:kept], 0] *= -1
    return (x,)


def _grid(sizes: list[tuple[int, int]], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    tokens = sum(h * w for h, w in sizes)
    return torch.tensor(sizes), torch.randn(2, 4 * tokens, 6, generator=g)


def test_the_copies_of_views_with_a_fake_rule_are_found() -> None:
    twins = copy_twins_of_view_rules(fake_impls.op_implementations_dict)
    assert twins[aten.slice_copy.Tensor] is aten.slice.Tensor
    assert twins[aten.select_copy.int] is aten.select.int
    assert aten.view_copy.default not in twins  # upstream has its own rule


@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_slices_of_a_data_dependent_row_count_lower_and_match_eager(backend) -> None:
    result = export_executorch.export(AfterTheFirstKept().eval(), _rows(8, 3, 0), backend=backend,
                                      validation_inputs=[_rows(6, 5, 1), _rows(3, 2, 2)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["0"] for c in report["validation"]["checks"]] == [[8, 8], [6, 8], [3, 8]]
    assert FAKE_RULES in report["patches"]["fired"]


def test_without_the_rules_the_copies_guard_on_the_row_count() -> None:
    with withheld("executorch", FAKE_RULES_TARGET), pytest.raises(
            LoweringError, match="data-dependent expression"):
        export_executorch.export(AfterTheFirstKept().eval(), _rows(8, 3, 0), validate=False)


def test_a_size_asserted_equal_to_an_input_size_is_bounded_by_it() -> None:
    result = export_executorch.export(
        WindowOrder().eval(), _grid([(2, 2), (1, 3)], 0),
        validation_inputs=[_grid([(3, 4), (2, 2), (1, 1)], 1), _grid([(1, 2)], 2)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["1"] for c in report["validation"]["checks"]] == [
        [2, 28, 6], [2, 68, 6], [2, 8, 6]]
    assert {f"executorch:{t}" for t in UPPER_BOUND_TARGETS} & set(report["patches"]["fired"])


def test_without_the_asserted_bound_executorch_plans_the_example() -> None:
    """ExecuTorch finds no bound for the token count: with no example value it fails, with one
    it plans that, and a larger image fails at run time."""
    with ExitStack() as stack:
        for target in UPPER_BOUND_TARGETS:
            stack.enter_context(withheld("executorch", target))
        with pytest.raises(ExportError, match="finite upper bound|bounded tensor"):
            export_executorch.export(WindowOrder().eval(), _grid([(2, 2), (1, 3)], 0),
                                     validation_inputs=[_grid([(3, 4), (2, 2), (1, 1)], 1)])


def test_qwen2_5_vl_vision_tower_lowers_and_matches_eager() -> None:
    """The zoo's tiny Qwen2.5-VL vision tower (window attention over ``grid_thw``): before,
    ``to_edge`` raised ``u38 < 1`` on the window boundaries' ``[1:]``, then ``to_executorch``
    found no bound for the window order's length."""
    built = build_tiny_model("qwen2_5_vl_vision")
    result = export_executorch.export(built.model.eval(), built.inputs.first,
                                      validation_inputs=list(built.inputs.sets[1:]))
    report = result.report
    assert report["validation"]["passed"] is True
    assert len({str(c["shapes"]) for c in report["validation"]["checks"]}) == 2
    fired = set(report["patches"]["fired"])
    assert FAKE_RULES in fired
    assert ("dynamo:transformers.models.qwen2_5_vl.modeling_qwen2_5_vl."
            "Qwen2_5_VisionTransformerPretrainedModel.permute_input_for_window_attn") in fired
