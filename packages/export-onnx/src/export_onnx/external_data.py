"""The external-data files of a saved ONNX model: plain file names beside it, nothing else.

An ONNX tensor stored outside the model file names its file in ``external_data["location"]``;
ONNX Runtime resolves it against the model's directory. A location that is absolute or climbs out
with ``..`` (or names a subdirectory) would make the artifact read, or a later copy of it miss,
files outside its output directory. The exporter writes only plain names and checks them twice:
after saving and again when the artifact is loaded for validation.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["external_data_files", "is_plain_location"]


def is_plain_location(location: str) -> bool:
    """Whether ``location`` is a plain file name: not absolute, no ``..``, no directory part."""
    return (
        bool(location)
        and not os.path.isabs(location)
        and "/" not in location
        and "\\" not in location
        and ":" not in location
        and location not in (".", "..")
    )


def _node_tensors(nodes) -> Iterator[object]:  # NodeProto -> TensorProto
    for node in nodes:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            if attr.HasField("g"):
                yield from _tensors(attr.g)
            for sub in attr.graphs:
                yield from _tensors(sub)


def _tensors(graph) -> Iterator[object]:  # GraphProto -> TensorProto
    yield from graph.initializer
    for sparse in graph.sparse_initializer:
        yield sparse.values
        yield sparse.indices
    yield from _node_tensors(graph.node)


def external_data_files(path: str | os.PathLike[str]) -> list[str]:
    """The external-data file names the ONNX model at ``path`` refers to, in first-use order.

    Args:
        path: a ``.onnx`` file (its external data is not read).

    Returns:
        The distinct ``location`` values; empty when every tensor is stored inside the file.

    Raises:
        ValueError: a location is not a plain file name beside the model (absolute, ``..``, a
            subdirectory), or its file does not exist there. The message names the tensor.
    """
    import onnx
    from onnx import TensorProto

    model = onnx.load(str(path), load_external_data=False)
    directory = Path(path).parent
    found: dict[str, None] = {}
    every = [*_tensors(model.graph), *(t for fn in model.functions for t in _node_tensors(fn.node))]
    for tensor in every:
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        entries = {e.key: e.value for e in tensor.external_data}
        location = entries.get("location", "")
        if not is_plain_location(location):
            raise ValueError(
                f"tensor {tensor.name!r} stores its data at {location!r}, which is not a "
                "plain file name beside the model (absolute paths, '..' and subdirectories "
                "are refused)"
            )
        if not (directory / location).is_file():
            raise ValueError(f"tensor {tensor.name!r} refers to {location!r}, which is "
                             f"missing from {directory}")
        found.setdefault(location, None)
    return list(found)
