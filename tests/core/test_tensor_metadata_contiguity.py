"""The capture patch ``metadata_contiguity_without_guards``: the memory format ``torch.export``
records in each node's ``tensor_meta`` no longer guards a dynamic size at its example value.

Without it, a tensor of ``images - 1`` elements (``counts.cumsum(0)[:-1]``, as Qwen-VL-style
vision towers compute their per-image offsets) captured with two images pins the image count to
2 and ONNX Runtime rejects any other count. Compared with eager in ONNX Runtime and in the
ExecuTorch runtime at image counts other than the example's."""

from __future__ import annotations

import pytest
import torch

import export_onnx
from export_core import ExportError
from export_core.registry import withheld
from export_core.workarounds.tensor_metadata_contiguity import known_contiguous

PATCH = "dynamo:torch.fx.passes.shape_prop.is_contiguous_for_memory_format_or_false"


class ImageOffsets(torch.nn.Module):
    """Adds each image's first patch offset to its features: ``(images, 3)`` int64 grid and
    ``(images, dim)`` float features -> ``(images, dim)``."""

    def forward(self, grid: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        counts = grid.prod(-1)
        starts = torch.nn.functional.pad(counts.cumsum(0)[:-1], (1, 0))
        return features + starts.unsqueeze(-1).to(features.dtype)


def _inputs(images: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"grid": torch.randint(1, 5, (images, 3), generator=g),
            "features": torch.randn(images, 8, generator=g)}


def test_image_count_stays_dynamic_in_onnx() -> None:
    result = export_onnx.export(ImageOffsets(), _inputs(2, 0),
                                validation_inputs=[_inputs(3, 1), _inputs(1, 2), _inputs(6, 3)])
    report = result.report
    assert report["validation"]["passed"] is True
    assert {c["shapes"]["grid"][0] for c in report["validation"]["checks"]} == {2, 3, 1, 6}
    assert PATCH in report["patches"]["fired"]


def test_image_count_stays_dynamic_in_executorch() -> None:
    export_executorch = pytest.importorskip("export_executorch")
    result = export_executorch.export(ImageOffsets(), _inputs(2, 0),
                                      validation_inputs=[_inputs(3, 1), _inputs(5, 2)])
    assert result.report["validation"]["passed"] is True
    assert PATCH in result.report["patches"]["fired"]
    assert PATCH.replace("dynamo:", "executorch:") in result.report["patches"]["fired"]


def test_without_the_patch_the_image_count_is_pinned() -> None:
    """Documents torch's metadata guard: when this stops failing, the patch can go."""
    with withheld("dynamo", PATCH), pytest.raises(ExportError, match="grid"):
        export_onnx.export(ImageOffsets(), _inputs(2, 0), validation_inputs=[_inputs(3, 1)])


@pytest.mark.parametrize(
    ("make", "memory_format", "expected"),
    [
        (lambda: torch.empty(2, 3, 4), torch.contiguous_format, True),
        (lambda: torch.empty(2, 3, 4).transpose(0, 1), torch.contiguous_format, False),
        (lambda: torch.empty(1, 3, 1), torch.contiguous_format, True),
        (lambda: torch.empty(0, 3), torch.contiguous_format, True),
        (lambda: torch.empty(2, 3, 4, 5).to(memory_format=torch.channels_last),
         torch.channels_last, True),
        (lambda: torch.empty(2, 3, 4, 5), torch.channels_last, False),
        (lambda: torch.empty(2, 3, 4, 5, 6).to(memory_format=torch.channels_last_3d),
         torch.channels_last_3d, True),
        (lambda: torch.empty(2, 3, 4), torch.channels_last, False),  # wrong rank
    ],
)
def test_static_layouts_are_decided_as_torch_decides_them(make, memory_format, expected) -> None:
    tensor = make()
    assert known_contiguous(tensor, memory_format) == (expected, False)
    assert tensor.is_contiguous(memory_format=memory_format) is expected


def test_without_the_lowering_twin_executorch_plans_the_example_count() -> None:
    """The capture patch alone leaves the count dynamic, but ExecuTorch's re-trace narrows it
    again: the program's bound on the count is the example's, and the runner refuses other
    counts. When this stops failing, the ExecuTorch patch can go."""
    export_executorch = pytest.importorskip("export_executorch")
    with withheld("executorch", PATCH.replace("dynamo:", "")), \
            pytest.raises(ExportError, match=r"beyond the program's bounds .*axis 0: 3 > 2"):
        export_executorch.export(ImageOffsets(), _inputs(2, 0), validation_inputs=[_inputs(3, 1)])
