"""The capture patch ``pixtral_images_batched``: Pixtral's vision encoder over same-size images
with batched ops, not a loop over the images (which pinned the batch). Exported through the
public API and compared with eager at three batches (1 among them) and two image sizes on both
backends; the block mask equals transformers' own; one half fails without the patch."""

from __future__ import annotations

import pytest
import torch
from transformers.models.pixtral.modeling_pixtral import generate_block_attention_mask

import export_executorch
import export_onnx
from export_core import ExportError
from export_core.registry import withheld
from export_core.workarounds.pixtral_image_batch import image_block_mask
from export_sweep.zoo.build import build_tiny_model

PATCH = "dynamo:transformers.models.pixtral.modeling_pixtral.PixtralVisionModel.forward"


def _images(batch: int, size: int, seed: int) -> dict[str, torch.Tensor]:
    """``pixel_values`` ``(batch, 3, size, size)`` float32."""
    g = torch.Generator().manual_seed(seed)
    return {"pixel_values": torch.randn(batch, 3, size, size, generator=g)}


VALIDATION = [_images(3, 32, 1), _images(1, 24, 2)]  # within the config's 32 px


@pytest.mark.parametrize("exporter", [export_onnx, export_executorch], ids=["onnx", "executorch"])
def test_pixtral_takes_any_number_of_images(exporter) -> None:
    result = exporter.export(build_tiny_model("pixtral").model, _images(2, 32, 0),
                             validation_inputs=VALIDATION)
    report = result.report
    assert report["validation"]["passed"] is True
    assert [c["shapes"]["pixel_values"] for c in report["validation"]["checks"]] == [
        [2, 3, 32, 32], [3, 3, 32, 32], [1, 3, 24, 24]]
    assert PATCH in report["patches"]["fired"]


def test_without_the_patch_the_batch_is_pinned() -> None:
    """Documents the model's loop over the images: when this stops failing, the patch can go."""
    with withheld("dynamo", PATCH), pytest.raises(ExportError, match="invalid dimensions"):
        export_onnx.export(build_tiny_model("pixtral").model, _images(2, 32, 0),
                           validation_inputs=VALIDATION)


@pytest.mark.parametrize(("images", "per_image"), [(1, 4), (3, 5), (2, 1)])
def test_block_mask_equals_transformers(images: int, per_image: int) -> None:
    like = torch.zeros(1, images * per_image, 8)
    expected = generate_block_attention_mask([per_image] * images, like)
    assert torch.equal(image_block_mask(images, per_image, like), expected)
