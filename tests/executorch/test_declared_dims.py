"""Dynamic shapes the caller declares are honoured or said, never narrowed silently: a
``Dim(max=N)`` is the program's bound (memory planned for N rows), a ``Dim`` without ``max`` gets
a bound chosen on purpose, with a warning, and the report gives every axis's range and source."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch.export import Dim

import export_executorch
from export_core.stages import Stage
from export_executorch import ExecutorchRunner


class Rows(torch.nn.Module):
    """``x`` (rows, 4) float32 -> (rows, 4): a per-row MLP, any number of rows."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x)) + 1


class _Warnings:
    """A stage listener that keeps the warning lines."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def stage_started(self, stage: Stage) -> None: ...

    def stage_finished(self, stage: Stage, seconds: float, ok: bool) -> None: ...

    def warning(self, message: str) -> None:
        self.lines.append(message)


def _rows(n: int) -> torch.Tensor:
    return torch.randn(n, 4, generator=torch.Generator().manual_seed(n))


def test_declared_max_is_the_programs_bound(tmp_path: Path) -> None:
    model = Rows().eval()
    listener = _Warnings()
    result = export_executorch.export(model, (_rows(9),), output=tmp_path,
                                      dynamic_shapes=({0: Dim("edges", max=24)},),
                                      listener=listener)
    dims = result.report["bounds"]["dims"]
    assert [(d["input"], d["axis"], d["min"], d["max"], d["source"]) for d in dims] == [
        ("x", 0, 1, 24, "declared Dim('edges', max=24)")]
    assert listener.lines == []
    runner = ExecutorchRunner(result.path, ["x"])
    for n in (24, 1, 17):  # the declared maximum, the minimum, between
        x = _rows(n)
        with torch.no_grad():
            want = model(x).numpy()
        np.testing.assert_allclose(np.asarray(runner((x,))[0]), want, atol=1e-5, rtol=1e-4)


def test_dim_without_max_gets_a_bound_said_aloud() -> None:
    model = Rows().eval()
    listener = _Warnings()
    result = export_executorch.export(model, (_rows(5),), dynamic_shapes=({0: Dim("n")},),
                                      listener=listener)
    (dim,) = result.report["bounds"]["dims"]
    assert (dim["min"], dim["max"]) == (1, 8)
    assert dim["source"] == "declared Dim('n') without max; max_batch from default"
    assert listener.lines == [
        "warning: dynamic_shapes declares x[0] as Dim('n') without a max; ExecuTorch plans "
        "memory for a bound, so the program accepts 1 to 8 (declared Dim('n') without max; "
        "max_batch from default); give Dim('n', max=N) for another bound"
    ]


def test_auto_axes_name_their_source() -> None:
    result = export_executorch.export(Rows().eval(), (_rows(5),), max_batch=6, validate=False)
    assert [d["source"] for d in result.report["bounds"]["dims"]] == ["max_batch from option"]


@pytest.mark.parametrize("spec, match", [
    ({"y": {0: Dim("n")}}, r"\[dynamic_shapes\] dynamic_shapes names 'y', which the inputs do not have"),
    ({"x": {2: Dim("n")}}, r"\[dynamic_shapes\] dynamic_shapes\['x'\] names axis 2, but x has 2 axes"),
])
def test_dynamic_shapes_that_do_not_match_the_inputs(spec: dict, match: str) -> None:
    from export_core import InputError

    with pytest.raises(InputError, match=match):
        export_executorch.export(Rows().eval(), {"x": _rows(5)}, dynamic_shapes=spec)
