"""A stand-in for ``export_onnx.export`` while the OnnxExporter is being written.

It drives the five ONNX stages with the project's registries, in the order the exporter will:

1. ``torch.export.export`` under the ``"dynamo"`` patches,
2. the ``"onnx"`` torch patches, installed for the rest of the export,
3. the ``"onnx"`` FX node fixes on the exported program, and again on the decomposed program
   ``torch.onnx`` builds internally (the ``"onnx"`` patch of
   ``ExportedProgram.run_decompositions`` in :mod:`export_onnx.patches`),
4. ``torch.onnx.export`` with the custom translation table and the optimizer on,
5. the IR fixes on the optimized ``onnx_ir.Model``,

then saves the model and runs it in ONNX Runtime (CPU). Tests switch to the public API once it
exists; keep this helper's signature simple.
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

import export_onnx.workarounds  # noqa: F401  (registers the workarounds)
from export_core.fixes import apply_fx_node_fixes
from export_core.patching import EXPORT_LOCK, PatchSession, apply_patches
from export_onnx.ir_fixes import apply_ir_fixes
from export_onnx.patches import refixed_after_decompositions
from export_onnx.translations import translation_table

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
    """Export ``model`` through stages 1-5 with every registered workaround.

    Args:
        model: the module to export (put in eval mode by the caller).
        args: positional example inputs.
        dynamic_shapes: ``torch.export`` dynamic shapes, or None for a static export.

    Returns:
        The :class:`PipelineResult`.
    """
    session = PatchSession()
    fx_fixes: list[str] = []
    with EXPORT_LOCK:
        with apply_patches("dynamo", session):
            ep = torch.export.export(model, args, dynamic_shapes=dynamic_shapes)
        with apply_patches("onnx", session):
            refixed_after_decompositions()
            fx_fixes += apply_fx_node_fixes(ep, "onnx")
            program = torch.onnx.export(
                ep,
                dynamo=True,
                custom_translation_table=translation_table(),
                optimize=True,
                verbose=False,
            )
            fx_fixes += [n for n in refixed_after_decompositions() if n not in fx_fixes]
        ir_fixes = apply_ir_fixes(program.model)
    return PipelineResult(program.model, fx_fixes, ir_fixes, session)


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
