"""Comparing an artifact's outputs with eager PyTorch, leaf by leaf, at several input shapes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree

__all__ = ["LeafCheck", "ShapeCheck", "ValidationResult", "compare_leaves", "eager_leaves", "validate"]


@dataclass(frozen=True)
class LeafCheck:
    """One output leaf at one input shape: max absolute and relative error (float64)."""

    name: str
    shape: tuple[int, ...]
    max_abs: float
    max_rel: float
    passed: bool
    problem: str = ""


@dataclass(frozen=True)
class ShapeCheck:
    """Every output leaf at one input set. ``shapes`` maps input name -> shape."""

    shapes: dict[str, list[int]]
    leaves: tuple[LeafCheck, ...]

    @property
    def passed(self) -> bool:
        return all(leaf.passed for leaf in self.leaves)

    @property
    def max_abs(self) -> float:
        return max((leaf.max_abs for leaf in self.leaves), default=0.0)

    @property
    def max_rel(self) -> float:
        return max((leaf.max_rel for leaf in self.leaves), default=0.0)

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "shapes": self.shapes,
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "passed": self.passed,
        }
        bad = [f"{leaf.name}: {leaf.problem}" for leaf in self.leaves if not leaf.passed]
        if bad:
            d["problems"] = bad
        return d


@dataclass
class ValidationResult:
    """The verdict over all input sets."""

    checks: list[ShapeCheck] = field(default_factory=list)
    atol: float = 1e-4
    rtol: float = 1e-3

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    def first_problem(self) -> str:
        for c in self.checks:
            for leaf in c.leaves:
                if not leaf.passed:
                    return f"output {leaf.name} at input shapes {c.shapes}: {leaf.problem}"
        return ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "atol": self.atol,
            "rtol": self.rtol,
            "checks": [c.as_dict() for c in self.checks],
        }


def eager_leaves(model: torch.nn.Module, inputs: dict[str, Any] | tuple[Any, ...]) -> list[torch.Tensor]:
    """Run ``model`` eagerly under ``torch.no_grad`` and return its tensor output leaves."""
    with torch.no_grad():
        out = model(**inputs) if isinstance(inputs, dict) else model(*inputs)
    return [x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]


def compare_leaves(
    names: Sequence[str],
    got: Sequence[Any],
    expected: Sequence[torch.Tensor],
    *,
    atol: float,
    rtol: float,
) -> tuple[LeafCheck, ...]:
    """Compare artifact outputs with eager outputs: shape, dtype family, NaN pattern and values.

    A leaf passes when ``|got - expected| <= atol + rtol * |expected|`` everywhere.
    """
    checks = []
    if len(got) != len(expected):
        return (LeafCheck("outputs", (), float("inf"), float("inf"), False,
                          f"artifact returned {len(got)} outputs, eager {len(expected)}"),)
    for name, g, e in zip(names, got, expected):
        g = np.asarray(g.detach().cpu().numpy() if isinstance(g, torch.Tensor) else g)
        e_np = e.detach().float().cpu().numpy() if e.dtype == torch.bfloat16 else e.detach().cpu().numpy()
        if tuple(g.shape) != tuple(e_np.shape):
            checks.append(LeafCheck(name, tuple(e_np.shape), float("inf"), float("inf"), False,
                                    f"shape {tuple(g.shape)} != eager {tuple(e_np.shape)}"))
            continue
        g64, e64 = g.astype(np.float64), e_np.astype(np.float64)
        nan_g, nan_e = np.isnan(g64), np.isnan(e64)
        if (nan_g != nan_e).any():
            checks.append(LeafCheck(name, tuple(e_np.shape), float("nan"), float("nan"), False,
                                    f"{int(nan_g.sum())} NaN in artifact, {int(nan_e.sum())} in eager"))
            continue
        ok_mask = ~nan_e
        both_inf = np.isinf(e64) & (g64 == e64)
        diff = np.where(ok_mask & ~both_inf, np.abs(g64 - e64), 0.0)
        scale = np.where(np.isfinite(e64), np.abs(e64), 0.0)
        max_abs = float(diff.max()) if diff.size else 0.0
        rel = np.where(scale > 0, diff / np.where(scale > 0, scale, 1.0), diff)
        max_rel = float(rel.max()) if rel.size else 0.0
        passed = bool((diff <= atol + rtol * scale).all())
        problem = "" if passed else f"max|diff|={max_abs:.3g} (atol={atol}, rtol={rtol})"
        checks.append(LeafCheck(name, tuple(e_np.shape), max_abs, max_rel, passed, problem))
    return tuple(checks)


def _shapes(inputs: dict[str, Any] | tuple[Any, ...]) -> dict[str, list[int]]:
    items = inputs.items() if isinstance(inputs, dict) else enumerate(inputs)
    out = {}
    for k, v in items:
        for path, leaf in pytree.tree_flatten_with_path(v)[0]:
            if isinstance(leaf, torch.Tensor):
                out[f"{k}{pytree.keystr(path)}"] = list(leaf.shape)
    return out


def validate(
    run_artifact: Callable[[dict[str, Any] | tuple[Any, ...]], Sequence[Any]],
    model: torch.nn.Module,
    input_sets: Sequence[dict[str, Any] | tuple[Any, ...]],
    output_names: Sequence[str],
    *,
    atol: float = 1e-4,
    rtol: float = 1e-3,
) -> ValidationResult:
    """Run the artifact and eager PyTorch on every input set and compare leaf by leaf.

    Args:
        run_artifact: runs the artifact on one input set, returns its outputs in flatten order.
        model: the eager model (called as ``model(**inputs)`` or ``model(*inputs)``).
        input_sets: at least two input sets of different shapes to prove dynamic axes.
        output_names: names of the output leaves, for the report.
        atol, rtol: tolerances per element.

    Returns:
        A :class:`ValidationResult`; it does not raise on mismatch.
    """
    result = ValidationResult(atol=atol, rtol=rtol)
    for inputs in input_sets:
        expected = eager_leaves(model, inputs)
        got = run_artifact(inputs)
        names = list(output_names) + [f"output_{i}" for i in range(len(output_names), len(expected))]
        result.checks.append(ShapeCheck(_shapes(inputs), compare_leaves(names, got, expected, atol=atol, rtol=rtol)))
    return result
