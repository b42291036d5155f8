"""ONNX patch: the optimizer's no-op rewrites match their identity constant exactly.

The onnxscript rewriter's no-op rules (``x + 0``, ``x - 0``, ``x * 1``, ``x / 1`` become ``x``)
match the constant with ``math.isclose`` at the pattern's default tolerances (``rel_tol=1e-5``,
``abs_tol=1e-8``). A normalisation's epsilon of ``1e-8`` therefore *is* zero to the matcher:
``Add(mean_square, 1e-8)`` is removed, and the artifact differs from eager wherever a row's
variance is small (Muse Glimmer / Muse Spark's centred RMSNorm with ``post_norm_eps=1e-8``:
``max|diff|`` 1.4e-4 instead of 4.5e-6). A scale of ``1.000005`` would be dropped the same way.

The patch makes the matcher compare a scalar pattern constant of exactly ``0`` or ``1`` without
tolerance; every other constant (the fusion rules' coefficients) keeps its tolerance. It counts as
fired when it refused a match the tolerant comparison would have made.

Upstream: the no-op rules came with https://github.com/microsoft/onnxscript/pull/1813; no
onnxscript issue tracks the tolerance.
"""

from __future__ import annotations

from typing import Any

from export_core.patching import MARKS_OWN_FIRING, PatchSession
from export_core.registry import register_patch

from ..stages import BACKEND

__all__ = ["MATCH_CONSTANT_TARGET", "identity_constants_match_exactly"]

MATCH_CONSTANT_TARGET = "onnxscript.rewriter._matcher.SimplePatternMatcher._match_constant"
"""The rewriter's comparison of a pattern constant with a graph constant."""


@register_patch(
    BACKEND,
    MATCH_CONSTANT_TARGET,
    stage="onnx_patches",
    reason="the optimizer's no-op rules (x+0, x-0, x*1, x/1) match constants within "
    "abs_tol=1e-8 / rel_tol=1e-5, so a normalisation epsilon of 1e-8 is removed as a zero "
    "(Muse Glimmer's RMSNorm: 1.4e-4 from eager); 0 and 1 are matched exactly",
    upstream="https://github.com/microsoft/onnxscript/pull/1813",
)
def identity_constants_match_exactly(original: Any, session: PatchSession) -> Any:
    """Replace ``_match_constant(self, pattern_constant, value) -> bool`` with the same
    comparison at zero tolerance when the pattern constant is the scalar ``0`` or ``1``.

    Source: https://github.com/microsoft/onnxscript/pull/1813 (the no-op rules)
    """
    from onnxscript.rewriter import _pattern_ir

    name = f"{BACKEND}:{MATCH_CONSTANT_TARGET}"

    def _match_constant(self: Any, pattern_constant: Any, value: Any) -> bool:
        expected = pattern_constant.value
        if isinstance(expected, bool) or not isinstance(expected, int | float) \
                or expected not in (0, 1):
            return original(self, pattern_constant, value)
        exact = _pattern_ir.Constant(expected, rel_tol=0.0, abs_tol=0.0)
        matched = original(self, exact, value)
        if not matched and original(self, pattern_constant, value):
            session.mark_fired(name)
            return self.fail(f"{value.name} is close to {expected} but not equal to it")
        return matched

    setattr(_match_constant, MARKS_OWN_FIRING, True)
    return _match_constant
