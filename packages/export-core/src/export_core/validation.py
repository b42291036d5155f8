"""Comparing an artifact's outputs with eager PyTorch, leaf by leaf, at several input shapes."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
import torch.utils._pytree as pytree

__all__ = ["CRITERION", "FLOAT64_REFERENCE_MAX_BYTES", "LeafCheck", "NONDETERMINISTIC",
           "ROUNDING_CRITERION", "ROUNDING_FACTOR", "ROUNDING_MAX_RELATIVE", "ShapeCheck", "VACUOUS",
           "ValidationResult", "WorstElement", "compare_leaves", "eager_leaves",
           "float64_eager_leaves", "input_shapes", "random_ops", "skipped_validation", "validate"]

CRITERION = "|a - b| <= atol + rtol * |b| for every element (a: artifact, b: eager)"
"""The comparison each output element must pass, as the report states it. ``max_rel`` (the
largest ``|a - b| / |b|``) can exceed ``rtol`` on elements near zero, which ``atol`` covers: the
worst element's ``margin`` (``atol + rtol * |b| - |a - b|``, >= 0 when it passes) is the number to
read."""


NONDETERMINISTIC = (
    "the model's forward draws random numbers (sampling noise, random masks), so no artifact can "
    "match it; make the forward deterministic (give the noise as an input, or set the model's "
    "noise scales to 0) to validate, or export with validation off (validate=False, "
    "--no-validate)"
)
"""Why an export whose eager model disagrees with itself cannot be validated, and what to do."""

VACUOUS = (
    "every eager output lies within the tolerances of zero at every input set, so an artifact "
    "returning zeros would pass: the comparison checks nothing (a model whose weights or scales "
    "initialised near zero); validate on weights or inputs that give outputs above atol"
)
"""Why a passing comparison whose eager outputs are all about zero proves nothing."""

ROUNDING_FACTOR = 4.0
"""How many times float32 eager's own rounding error an artifact may differ from float64 eager."""

ROUNDING_MAX_RELATIVE = 1e-4
"""Float32 eager counts as rounding the float64 result only while it differs from it by at most
this fraction of the leaf's largest value; beyond, the two took different paths (a top-k that
broke a tie otherwise) and the float64 run is no reference."""

FLOAT64_REFERENCE_MAX_BYTES = 2 << 30
"""The largest model (parameters and buffers, as float64) copied for a float64 reference."""

ROUNDING_CRITERION = (
    "an output leaf that fails the criterion against float32 eager is compared with float64 eager: "
    f"it passes when |a - c| <= atol + {ROUNDING_FACTOR:g} * r + rtol * |c| for every element "
    "(c: float64 eager, r: the largest |b - c|, float32 eager's own rounding error), and only "
    f"where r <= {ROUNDING_MAX_RELATIVE:g} * max|c|"
)
"""When and how a float32 artifact is judged against float64 eager: an output large enough that
float32 rounding alone exceeds ``atol + rtol * |b|`` (LeViT's features of about 40) would
otherwise fail with any summation order but eager's own."""


@dataclass(frozen=True)
class WorstElement:
    """The element of one output leaf closest to failing (largest ``|a-b| / (atol + rtol*|b|)``).

    Attributes:
        index: its position in the leaf.
        artifact, eager: its values ``a`` and ``b``.
        abs_diff: ``|a - b|``.
        allowed: ``atol + rtol * |b|``.
    """

    index: tuple[int, ...]
    artifact: float
    eager: float
    abs_diff: float
    allowed: float

    @property
    def margin(self) -> float:
        """``allowed - abs_diff``: non-negative when the element passes."""
        return self.allowed - self.abs_diff

    def as_dict(self, output: str) -> dict[str, Any]:
        """The report's ``worst`` entry of a check."""
        return {"output": output, "index": list(self.index), "artifact": self.artifact,
                "eager": self.eager, "abs_diff": self.abs_diff, "allowed": self.allowed,
                "margin": self.margin}


@dataclass(frozen=True)
class LeafCheck:
    """One output leaf at one input shape: max absolute and relative error (float64)."""

    name: str
    shape: tuple[int, ...]
    max_abs: float
    max_rel: float
    passed: bool
    problem: str = ""
    worst: WorstElement | None = None
    eager_max_abs: float = float("nan")
    """The largest finite ``|b|`` of the eager leaf (``nan`` when it has none)."""
    zeros_pass: bool = False
    """An all-zero artifact leaf would pass too: every eager element ``b`` is finite and
    ``|b| <= atol + rtol * |b|`` (an empty leaf counts)."""
    float32_rounding: float | None = None
    """When the leaf was judged against float64 eager (:data:`ROUNDING_CRITERION`): float32
    eager's largest difference from it; ``max_abs`` and ``worst`` are then the artifact's
    differences from float64 eager."""


@dataclass(frozen=True)
class ShapeCheck:
    """Every output leaf at one input set. ``shapes`` maps input name -> shape."""

    shapes: dict[str, list[int]]
    leaves: tuple[LeafCheck, ...]
    eager_rerun_max_abs: float | None = None
    """When the artifact differed: the largest difference between two eager runs on this input
    set where they disagree beyond the tolerances (a forward that draws random numbers), else
    ``None``."""

    @property
    def passed(self) -> bool:
        return all(leaf.passed for leaf in self.leaves)

    @property
    def eager_nondeterministic(self) -> bool:
        """Two eager runs on this input set disagreed: no artifact can match eager here."""
        return self.eager_rerun_max_abs is not None

    @property
    def max_abs(self) -> float:
        return max((leaf.max_abs for leaf in self.leaves), default=0.0)

    @property
    def vacuous(self) -> bool:
        """An artifact returning zeros for every output would pass at this input set."""
        return bool(self.leaves) and all(leaf.zeros_pass for leaf in self.leaves)

    @property
    def eager_max_abs(self) -> float:
        """The largest finite ``|b|`` over the eager outputs (``nan`` when none is finite)."""
        values = [leaf.eager_max_abs for leaf in self.leaves if not np.isnan(leaf.eager_max_abs)]
        return max(values) if values else float("nan")

    @property
    def max_rel(self) -> float:
        return max((leaf.max_rel for leaf in self.leaves), default=0.0)

    def worst(self) -> tuple[str, WorstElement] | None:
        """The leaf and element with the smallest margin relative to its allowance."""
        found = [(leaf.name, leaf.worst) for leaf in self.leaves if leaf.worst is not None]
        if not found:
            return None
        return max(found, key=lambda item: item[1].abs_diff / item[1].allowed
                   if item[1].allowed > 0 else float("inf"))

    def as_dict(self) -> dict[str, Any]:
        """The report's entry of this input set: shapes, max abs / rel error, the worst element."""
        d: dict[str, Any] = {
            "shapes": self.shapes,
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "eager_max_abs": None if np.isnan(self.eager_max_abs) else self.eager_max_abs,
            "passed": self.passed,
        }
        worst = self.worst()
        if worst is not None:
            d["worst"] = worst[1].as_dict(worst[0])
        bad = [f"{leaf.name}: {leaf.problem}" for leaf in self.leaves if not leaf.passed]
        if bad:
            d["problems"] = bad
        if self.eager_rerun_max_abs is not None:
            d["eager_nondeterministic_max_abs"] = self.eager_rerun_max_abs
        rounded = {leaf.name: leaf.float32_rounding for leaf in self.leaves
                   if leaf.float32_rounding is not None}
        if rounded:
            d["float64_reference"] = {"criterion": ROUNDING_CRITERION,
                                      "float32_eager_rounding": rounded}
        return d


@dataclass
class ValidationResult:
    """The verdict over all input sets."""

    checks: list[ShapeCheck] = field(default_factory=list)
    atol: float = 1e-4
    rtol: float = 1e-3
    static: bool = False
    """A static export: every check is at the export shapes, on different input values."""
    refused: int = 0
    """Input sets left out because the eager model refused them (only sets marked refusable)."""

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.passed for c in self.checks)

    def first_problem(self) -> str:
        """The first failing leaf, and, when eager disagreed with itself on that input set, why
        no artifact can match it."""
        for c in self.checks:
            for leaf in c.leaves:
                if not leaf.passed:
                    problem = f"output {leaf.name} at input shapes {c.shapes}: {leaf.problem}"
                    if c.eager_nondeterministic:
                        problem += (f"; eager itself differs between two runs on these inputs "
                                    f"(max|diff|={c.eager_rerun_max_abs:.3g}): {NONDETERMINISTIC}")
                    return problem
        return ""

    @property
    def eager_nondeterministic(self) -> bool:
        """Some failing input set got different eager outputs on two runs."""
        return any(c.eager_nondeterministic for c in self.checks)

    @property
    def vacuous(self) -> bool:
        """At every input set an artifact returning zeros would pass (:data:`VACUOUS`): a pass
        then proves nothing about the artifact."""
        return bool(self.checks) and all(c.vacuous for c in self.checks)

    def as_dict(self) -> dict[str, Any]:
        """The report's ``validation``: ``status`` (``passed`` / ``failed``), ``passed``, the
        ``criterion``, the tolerances, ``static`` (with a ``note``) and one entry per check."""
        d: dict[str, Any] = {
            "status": "passed" if self.passed else "failed",
            "passed": self.passed,
            "criterion": CRITERION,
            "atol": self.atol,
            "rtol": self.rtol,
            "static": self.static,
            "vacuous": self.vacuous,
            "checks": [c.as_dict() for c in self.checks],
        }
        if self.vacuous:
            d["vacuous_note"] = VACUOUS
        if self.static:
            d["note"] = (f"static export: validated at its own input shapes on {len(self.checks)} "
                         "different sets of input values; it accepts no other shapes")
        return d


def skipped_validation() -> dict[str, Any]:
    """The report's ``validation`` of an export run without it (``validate=False``,
    ``--no-validate``): ``status: skipped``, ``passed: null``, no checks."""
    return {"status": "skipped", "passed": None, "criterion": CRITERION, "checks": [],
            "note": "validation was skipped: the artifact was not compared with eager PyTorch"}


def eager_leaves(
    model: torch.nn.Module,
    inputs: dict[str, Any] | tuple[Any, ...],
    repack: Sequence[Callable[[Any], Any]] = (),
) -> list[torch.Tensor]:
    """Run ``model`` eagerly under ``torch.no_grad`` and return its tensor output leaves.

    ``repack`` functions (of the patches that changed how the artifact's outputs are packed,
    :attr:`~export_core.registry.Workaround.repack`) are applied to the output first, in order.
    """
    with torch.no_grad():
        out = model(**inputs) if isinstance(inputs, dict) else model(*inputs)
        for fn in repack:
            out = fn(out)
    return [x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]


def float64_eager_leaves(
    model: torch.nn.Module,
    inputs: dict[str, Any] | tuple[Any, ...],
    repack: Sequence[Callable[[Any], Any]] = (),
    *,
    max_bytes: int = FLOAT64_REFERENCE_MAX_BYTES,
) -> list[torch.Tensor] | None:
    """The eager output leaves of a float64 copy of ``model`` on ``inputs`` (floating inputs cast
    to float64), or ``None`` when there is none to compare with: the model's parameters and
    buffers would take more than ``max_bytes`` as float64, it cannot be copied, or it does not
    run in float64 (a dtype it hard-codes). ``model`` and ``inputs`` are left as they were."""
    tensors = [*model.parameters(), *model.buffers()]
    if sum(t.numel() for t in tensors) * 8 > max_bytes:
        return None
    try:
        double = copy.deepcopy(model).to(torch.float64)
        cast = pytree.tree_map(
            lambda x: x.to(torch.float64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x,
            copy.deepcopy(inputs))
        return eager_leaves(double, cast, repack)
    except Exception:  # noqa: BLE001 - no float64 reference; the float32 verdict stands
        return None


def _judged_against_float64(
    leaf: LeafCheck,
    got: Any,
    expected: torch.Tensor,
    reference: torch.Tensor,
    *,
    atol: float,
    rtol: float,
) -> LeafCheck:
    """``leaf`` (failed against float32 eager ``expected``) judged by :data:`ROUNDING_CRITERION`
    against the float64 eager ``reference``; ``leaf`` itself when that criterion does not apply
    (not float32, another shape, non-finite values, or float32 eager not a rounding of it)."""
    if (leaf.passed or expected.dtype != torch.float32 or reference.dtype != torch.float64
            or reference.shape != expected.shape
            or tuple(np.shape(got)) != tuple(expected.shape) or expected.numel() == 0):
        return leaf
    e32 = expected.detach().cpu().to(torch.float64)
    e64 = reference.detach().cpu().to(torch.float64)
    if not (bool(e32.isfinite().all()) and bool(e64.isfinite().all())):
        return leaf
    rounding = float((e32 - e64).abs().max())
    if rounding > ROUNDING_MAX_RELATIVE * float(e64.abs().max()):
        return leaf
    (judged,) = compare_leaves([leaf.name], [got], [reference], atol=atol + ROUNDING_FACTOR * rounding,
                               rtol=rtol)
    if not judged.passed:
        return leaf
    return replace(judged, eager_max_abs=leaf.eager_max_abs, zeros_pass=leaf.zeros_pass,
                   float32_rounding=rounding)


def compare_leaves(
    names: Sequence[str],
    got: Sequence[Any],
    expected: Sequence[torch.Tensor],
    *,
    atol: float,
    rtol: float,
) -> tuple[LeafCheck, ...]:
    """Compare artifact outputs with eager outputs: shape, dtype family, NaN pattern and values.

    A leaf passes when ``|got - expected| <= atol + rtol * |expected|`` everywhere. Each check
    also records the eager leaf's largest finite magnitude and whether zeros would pass in its
    place (:attr:`LeafCheck.zeros_pass`), whatever the artifact returned.
    """
    checks = []
    if len(got) != len(expected):
        return (LeafCheck("outputs", (), float("inf"), float("inf"), False,
                          f"artifact returned {len(got)} outputs, eager {len(expected)}"),)
    for name, g, e in zip(names, got, expected):
        g = np.asarray(g.detach().cpu().numpy() if isinstance(g, torch.Tensor) else g)
        e_np = e.detach().float().cpu().numpy() if e.dtype == torch.bfloat16 else e.detach().cpu().numpy()
        e64 = e_np.astype(np.float64)
        finite = np.isfinite(e64)
        magnitude = {"eager_max_abs": float(np.abs(e64[finite]).max()) if finite.any() else float("nan"),
                     "zeros_pass": bool(finite.all() and (np.abs(e64) <= atol + rtol * np.abs(e64)).all())}
        if tuple(g.shape) != tuple(e_np.shape):
            checks.append(LeafCheck(name, tuple(e_np.shape), float("inf"), float("inf"), False,
                                    f"shape {tuple(g.shape)} != eager {tuple(e_np.shape)}", **magnitude))
            continue
        g64 = g.astype(np.float64)
        nan_g, nan_e = np.isnan(g64), np.isnan(e64)
        if (nan_g != nan_e).any():
            checks.append(LeafCheck(name, tuple(e_np.shape), float("nan"), float("nan"), False,
                                    f"{int(nan_g.sum())} NaN in artifact, {int(nan_e.sum())} in eager",
                                    **magnitude))
            continue
        ok_mask = ~nan_e
        both_inf = np.isinf(e64) & (g64 == e64)
        diff = np.where(ok_mask & ~both_inf, np.abs(g64 - e64), 0.0)
        scale = np.where(np.isfinite(e64), np.abs(e64), 0.0)
        max_abs = float(diff.max()) if diff.size else 0.0
        rel = np.where(scale > 0, diff / np.where(scale > 0, scale, 1.0), diff)
        max_rel = float(rel.max()) if rel.size else 0.0
        allowed = atol + rtol * scale
        passed = bool((diff <= allowed).all())
        worst = None
        if diff.size:
            ratio = diff / np.where(allowed > 0, allowed, np.finfo(np.float64).tiny)
            at = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
            worst = WorstElement(tuple(int(i) for i in at), float(g64[at]), float(e64[at]),
                                 float(diff[at]), float(allowed[at]))
        problem = "" if passed else (
            f"max|diff|={max_abs:.3g}; worst element {list(worst.index) if worst else []}: "
            f"|a-b|={worst.abs_diff if worst else 0:.3g} > atol + rtol*|b| = "
            f"{worst.allowed if worst else 0:.3g} (atol={atol}, rtol={rtol})")
        checks.append(LeafCheck(name, tuple(e_np.shape), max_abs, max_rel, passed, problem, worst,
                                **magnitude))
    return tuple(checks)


def input_shapes(inputs: dict[str, Any] | tuple[Any, ...]) -> dict[str, list[int]]:
    """The shape of every tensor leaf of an input set, by its path (``"input_ids"``,
    ``"pixel_values"``, ``"0[1]"``)."""
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
    static: bool = False,
    repack: Sequence[Callable[[Any], Any]] = (),
    refusable: Sequence[bool] = (),
) -> ValidationResult:
    """Run the artifact and eager PyTorch on every input set and compare leaf by leaf.

    Args:
        run_artifact: runs the artifact on one input set, returns its outputs in flatten order.
        model: the eager model (called as ``model(**inputs)`` or ``model(*inputs)``).
        input_sets: at least two input sets of different shapes to prove dynamic axes.
        output_names: names of the output leaves, for the report.
        atol, rtol: tolerances per element (see :data:`CRITERION`).
        static: the artifact has static shapes: the sets share its shapes and differ in values.
        repack: put the eager output into the artifact's layout (see :func:`eager_leaves`).
        refusable: per input set, whether the eager model may refuse it (a shape the exporter
            derived, not one the caller gave): such a set whose eager call raises is left out
            and counted in ``refused``; missing entries are ``False``.

    Returns:
        A :class:`ValidationResult`; it does not raise on mismatch.

    Raises:
        Exception: whatever the eager model raises on a set that is not refusable.
    """
    result = ValidationResult(atol=atol, rtol=rtol, static=static)
    for i, inputs in enumerate(input_sets):
        # eager runs on a copy: a cache in the inputs is updated in place by the forward
        # (DynamicLayer.update concatenates onto it), and the artifact must see the original
        try:
            expected = eager_leaves(model, copy.deepcopy(inputs), repack)
        except Exception:
            if i < len(refusable) and refusable[i]:
                result.refused += 1
                continue
            raise
        got = run_artifact(inputs)
        names = list(output_names) + [f"output_{i}" for i in range(len(output_names), len(expected))]
        check = ShapeCheck(input_shapes(inputs), compare_leaves(names, got, expected, atol=atol, rtol=rtol))
        if not check.passed:
            # a forward that samples (noise, random masks) differs from itself: say so rather
            # than blame the artifact
            again = compare_leaves(names, eager_leaves(model, copy.deepcopy(inputs), repack),
                                   expected, atol=atol, rtol=rtol)
            if not all(leaf.passed for leaf in again):
                check = replace(check, eager_rerun_max_abs=max(leaf.max_abs for leaf in again))
            else:
                check = _with_float64_reference(check, model, inputs, repack, got, expected,
                                                atol=atol, rtol=rtol)
        result.checks.append(check)
    return result


def _with_float64_reference(
    check: ShapeCheck,
    model: torch.nn.Module,
    inputs: dict[str, Any] | tuple[Any, ...],
    repack: Sequence[Callable[[Any], Any]],
    got: Sequence[Any],
    expected: Sequence[torch.Tensor],
    *,
    atol: float,
    rtol: float,
) -> ShapeCheck:
    """``check`` with its failed float32 leaves judged against float64 eager
    (:data:`ROUNDING_CRITERION`); ``check`` unchanged when there is no float64 reference."""
    if len(got) != len(expected) or len(check.leaves) != len(expected):
        return check
    reference = float64_eager_leaves(model, inputs, repack)
    if reference is None or len(reference) != len(expected):
        return check
    leaves = tuple(_judged_against_float64(leaf, g, e, r, atol=atol, rtol=rtol)
                   for leaf, g, e, r in zip(check.leaves, got, expected, reference))
    return replace(check, leaves=leaves)


def random_ops(graph_module: torch.fx.GraphModule) -> list[str]:
    """The ops of ``graph_module`` and of its subgraphs (``torch.no_grad`` regions, control
    flow) that draw random numbers (tagged ``nondeterministic_seeded``), dropout (inactive in
    ``eval()``) left out, sorted by name."""
    found = set()
    nodes = (node for module in graph_module.modules()
             if isinstance(module, torch.fx.GraphModule) for node in module.graph.nodes)
    for node in nodes:
        target = node.target
        if (node.op == "call_function" and isinstance(target, torch._ops.OpOverload)
                and torch.Tag.nondeterministic_seeded in target.tags
                and "dropout" not in target.name()):
            found.add(target.name())
    return sorted(found)
