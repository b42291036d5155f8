"""``aten.randn_like`` / ``aten.rand_like`` (sampling noise) are not Core ATen: the program fix
``decompose_missing_kernels`` makes them ``randn`` / ``rand`` of the input's symbolic shape, which
the portable kernels run. The artifact's samples have the right distribution at two shapes on
both backends; without the fix lowering fails."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import export_executorch
from export_core import ExportError
from export_core.registry import withheld
from export_executorch.runner import ExecutorchRunner


class Samples(torch.nn.Module):
    """Standard normal and uniform samples shaped like ``x`` (rows, cols) float32."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randn_like(x), torch.rand_like(x)


@pytest.mark.parametrize("backend", ["xnnpack", "portable"])
def test_sampling_ops_lower_and_draw_from_their_distributions(backend: str, tmp_path) -> None:
    result = export_executorch.export(Samples().eval(), {"x": torch.zeros(2, 16)}, backend=backend,
                                      output=tmp_path, validate=False)
    assert "decompose_missing_kernels" in result.report["fixes"]["applied"]
    runner = ExecutorchRunner(result.path, ["x"])
    for shape in ((2, 500), (1, 400)):  # two shapes: the symbolic shape reaches the kernels
        normal, uniform = (np.asarray(t) for t in runner((torch.zeros(shape),)))
        assert normal.shape == uniform.shape == shape
        assert abs(normal.mean()) < 0.15 and abs(normal.std() - 1) < 0.1
        assert uniform.min() >= 0 and uniform.max() < 1 and abs(uniform.mean() - 0.5) < 0.05


def test_without_the_fix_lowering_refuses_randn_like() -> None:
    with withheld("executorch", "decompose_missing_kernels"), pytest.raises(ExportError, match="randn_like"):
        export_executorch.export(Samples().eval(), {"x": torch.zeros(4, 8)}, validate=False)
