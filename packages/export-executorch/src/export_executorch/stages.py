"""The ExecuTorch exporter's stages, declared once (see :mod:`export_core.stages`).

Importing this module registers the plan with the core registry, so the ExecuTorch workarounds
(under ``"executorch"`` and its sub-keys ``"executorch.<backend>"``) can name their stage.
"""

from __future__ import annotations

from export_core.registry import FX_NODE_FIX, FX_PROGRAM_FIX, PATCH, register_stage_plan
from export_core.stages import StagePlan

__all__ = ["BACKEND", "EXECUTORCH_STAGES"]

BACKEND = "executorch"
"""The registry key of the ExecuTorch workarounds (each backend adds ``.<name>``)."""

EXECUTORCH_STAGES: StagePlan = register_stage_plan(StagePlan.for_backend(BACKEND, (
    ("prepare", "backend preparation"),
    ("torch_patches", "torch patches", (PATCH,)),
    ("executorch_patches", "ExecuTorch patches", (PATCH,)),
    ("fx_program_fixes", "FX program fixes", (FX_PROGRAM_FIX,)),
    ("fx_node_fixes", "FX node fixes", (FX_NODE_FIX,)),
    ("lower", "edge lowering and partitioning"),
    ("to_executorch", "ExecuTorch program"),
), before_capture=("prepare",)))
"""``ExecutorchExporter``'s plan: the CLI steps, ``output``, then

1. ``prepare`` (before the capture): device, dtype and partitioner of the backend;

the capture stages, then

2. ``torch_patches``: patches of ``torch`` internals, installed until the program is emitted;
3. ``executorch_patches``: patches of ExecuTorch internals that crash on valid dynamic-shape
   graphs (the edge verifier, the XNNPACK partitioner);
4. ``fx_program_fixes``: whole-program rewrites, first the bounds of every dynamic dimension;
5. ``fx_node_fixes``: per-node rewrites;
6. ``lower``: ``to_edge_transform_and_lower`` (edge dialect, partitioning, delegate
   preprocessing);
7. ``to_executorch``: emission and memory planning;

then ``save``, ``runtime`` (``executorch.runtime``) and ``validate``."""
