"""Several threads exporting at once get correct artifacts (exports are serialized by a lock)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnxruntime as ort
import torch

import export_onnx


class Scaled(torch.nn.Module):
    def __init__(self, k: float) -> None:
        super().__init__()
        self.k = k
        self.lin = torch.nn.Linear(6, 6)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.k + (1.0 - mask[..., None]) * -1e4


def test_threads_export_distinct_correct_models(tmp_path):
    torch.manual_seed(0)
    models = [Scaled(float(i + 1)).eval() for i in range(4)]
    x = torch.randn(3, 5, 6)
    mask = torch.ones(3, 5, dtype=torch.long)
    mask[1, 3:] = 0

    def job(i: int):
        return export_onnx.export(models[i], (x, mask), output=tmp_path / f"m{i}")

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(job, range(4)))
    x2 = torch.randn(2, 7, 6)
    mask2 = torch.ones(2, 7, dtype=torch.long)
    for i, r in enumerate(results):
        assert r.report["status"] == "ok"
        sess = ort.InferenceSession(str(r.path), providers=["CPUExecutionProvider"])
        got = sess.run(None, {"x": x2.numpy(), "mask": mask2.numpy()})[0]
        with torch.no_grad():
            np.testing.assert_allclose(got, models[i](x2, mask2).numpy(), atol=1e-4, rtol=1e-4)
