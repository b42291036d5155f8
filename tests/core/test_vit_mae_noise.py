"""ViT-MAE's input recipe: ``forward(noise=...)``, the per-patch noise whose ``argsort`` picks
the patches it keeps, is an input (``(batch, num_patches)`` float32), so the artifact and eager
mask the same patches. Without it the forward draws ``torch.rand`` itself and no artifact can
agree with it. Compared with eager on both backends at the recipe's two input sets."""

from __future__ import annotations

import pytest
import torch

import export_executorch
import export_onnx
from export_sweep.zoo.build import build_tiny_model


def test_the_recipe_gives_vit_mae_its_noise() -> None:
    built = build_tiny_model("vit_mae", forward=True)
    first, second = built.inputs.first, built.inputs.second
    patches = (first["pixel_values"].shape[-1] // built.model.config.patch_size) ** 2
    assert first["noise"].shape == (first["pixel_values"].shape[0], patches)
    assert second["noise"].shape[0] == second["pixel_values"].shape[0] != first["noise"].shape[0]
    with torch.no_grad():  # without the noise, two calls mask different patches
        a = built.model(pixel_values=first["pixel_values"]).last_hidden_state
        b = built.model(pixel_values=first["pixel_values"]).last_hidden_state
    assert not torch.allclose(a, b)


@pytest.mark.parametrize("exporter", [export_onnx, export_executorch], ids=["onnx", "executorch"])
def test_vit_mae_matches_eager_with_its_noise(exporter) -> None:
    built = build_tiny_model("vit_mae", forward=True)
    result = exporter.export(built.model, built.inputs.first,
                             validation_inputs=[built.inputs.second])
    assert result.report["validation"]["passed"] is True
    assert len(result.report["validation"]["checks"]) == 2
