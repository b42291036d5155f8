"""Test helpers over the public API: ``export_onnx.export`` and ONNX Runtime.

``export_with_workarounds`` runs ``export_onnx.export`` (capture under the ``"dynamo"`` patches,
the ``"onnx"`` torch patches, node fixes on the captured and on the decomposed program, the
translation table, IR fixes) and returns the finished model with what fired, so the tests can
check both the numbers and that the workaround under test was the one that did the work.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import torch

import export_onnx
from export_core.patching import PatchSession
from export_onnx.ir_fixes import ir_fix_records

__all__ = ["PipelineResult", "export_with_workarounds", "run_model", "run_onnx_pipeline"]


@dataclass
class PipelineResult:
    """What one pipeline export produced.

    Attributes:
        model: the optimized, IR-fixed ONNX model.
        fx_fixes: names of the FX node fixes that changed a graph (either pass).
        ir_fixes: names of the IR fixes that rewrote a node.
        patches: the patch session of the ``"dynamo"`` and ``"onnx"`` patches.
    """

    model: ir.Model
    fx_fixes: list[str] = field(default_factory=list)
    ir_fixes: list[str] = field(default_factory=list)
    patches: PatchSession = field(default_factory=PatchSession)

    def op_types(self) -> set[str]:
        """Every op type in the main graph and its functions."""
        graphs = [self.model.graph, *self.model.functions.values()]
        return {
            node.op_type for graph in graphs for node in ir.traversal.RecursiveGraphIterator(graph)
        }


def _flat(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _flat(v)]
    return []


def export_with_workarounds(
    model: torch.nn.Module, args: tuple, dynamic_shapes: Any = None
) -> PipelineResult:
    """Export ``model`` with ``export_onnx.export`` (every registered workaround active).

    Args:
        model: the module to export (put in eval mode by the caller).
        args: positional example inputs.
        dynamic_shapes: ``torch.export`` dynamic shapes, or None for a static export.

    Returns:
        The :class:`PipelineResult`.
    """
    result = export_onnx.export(
        model, args, dynamic=dynamic_shapes is not None, dynamic_shapes=dynamic_shapes,
        validate=False,
    )
    report = result.report
    ir_names = {rec.name for rec in ir_fix_records()}
    applied = report["fixes"]["applied"]
    session = PatchSession(
        installed=list(report["patches"]["installed"]), fired=list(report["patches"]["fired"])
    )
    return PipelineResult(
        result.program.model,
        [n for n in applied if n not in ir_names],
        [n for n in applied if n in ir_names],
        session,
    )


def run_model(model: ir.Model, test_inputs: list[tuple]) -> list[list[np.ndarray]]:
    """Save ``model`` and run it in ONNX Runtime (CPU) on each input tuple."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.onnx")
        ir.save(model, path)
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    outputs = []
    for inputs in test_inputs:
        feeds = {n: t.detach().numpy() for n, t in zip(names, _flat(inputs), strict=True)}
        outputs.append(session.run(None, feeds))
    return outputs


def run_onnx_pipeline(
    model: torch.nn.Module,
    args: tuple,
    dynamic_shapes: Any = None,
    test_inputs: list[tuple] | None = None,
) -> list[list[np.ndarray]]:
    """Export ``model`` with every workaround and return ORT's outputs for each test input.

    Args:
        model: the module to export.
        args: positional example inputs.
        dynamic_shapes: ``torch.export`` dynamic shapes, or None.
        test_inputs: input tuples to run; ``[args]`` when omitted.

    Returns:
        One list of output arrays per test input.
    """
    result = export_with_workarounds(model, args, dynamic_shapes)
    return run_model(result.model, test_inputs or [args])
