"""The ONNX exporter's stages, declared once (see :mod:`export_core.stages`).

Importing this module registers the plan with the core registry, so the ONNX workarounds can
name their stage; it also names ONNX's own workaround kinds.
"""

from __future__ import annotations

from export_core.registry import FX_NODE_FIX, PATCH, register_stage_plan
from export_core.stages import StagePlan

__all__ = ["BACKEND", "IR_FIX", "ONNX_STAGES", "TRANSLATION"]

BACKEND = "onnx"
"""The registry key of the ONNX workarounds."""

TRANSLATION = "translation"
"""Workaround kind: a custom ONNX lowering of an aten op, given to ``torch.onnx.export``."""

IR_FIX = "ir_fix"
"""Workaround kind: a rewrite of the finished ONNX model (``fn(model, context) -> FixResult``)."""

ONNX_STAGES: StagePlan = register_stage_plan(StagePlan.for_backend(BACKEND, (
    ("torch_patches", "torch patches", (PATCH,)),
    ("onnx_patches", "ONNX patches", (PATCH,)),
    ("fx_node_fixes", "FX node fixes", (FX_NODE_FIX,)),
    ("translate", "ONNX translation", (TRANSLATION,)),
    ("ir_fixes", "ONNX IR fixes", (IR_FIX,)),
)))
"""``OnnxExporter``'s plan: the CLI steps, ``output``, the capture stages, then

1. ``torch_patches``: patches of ``torch`` internals, installed until translation ends;
2. ``onnx_patches``: patches of the ONNX pipeline itself (the node fixes re-run after
   ``torch.onnx``'s own ``run_decompositions``);
3. ``fx_node_fixes``: FX node fixes on the captured program;
4. ``translate``: ``torch.onnx.export`` with the custom translations;
5. ``ir_fixes``: rewrites of the finished ONNX model;

then ``save``, ``runtime`` (ONNX Runtime) and ``validate``."""
