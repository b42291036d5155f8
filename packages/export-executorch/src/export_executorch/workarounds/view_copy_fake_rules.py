"""ExecuTorch patch: the ``*_copy`` ops get their view's data-dependent-safe fake rule.

ExecuTorch plans memory ahead, so its lowering swaps every view op for its copying twin
(``ReplaceViewOpsWithViewCopyOpsPass``: ``slice.Tensor`` -> ``slice_copy.Tensor``, ``select.int``
-> ``select_copy.int``) and re-runs the graph on fake tensors. ``torch.export`` captured the view
with its fake rule in ``torch._subclasses.fake_impls``, written for sizes read from tensor data
(unbacked symbols: the rows a boolean mask keeps, the windows of Qwen2.5-VL's vision tower): it
decides ``start > size`` with ``guard_or_false`` and never guards. The copying twin has no such
rule, so fake mode runs its composite kernel, which calls the view's Python decomposition
(``torch._decomp.decompositions.slice_forward``), which asks ``start > size`` as a plain ``bool``:
``GuardOnDataDependentSymNode: Could not guard on data-dependent expression u38 < 1`` for
``x[1:]`` on such a tensor, and the program that captured does not lower. Upstream registered a
rule for ``view_copy`` (the copy of ``view``'s rule) but not for the others.

For the export, fake mode's rule table gets, ahead of the rest, one rule per copying twin of a
view op that has a fake rule and whose twin has none: the view's rule, then a contiguous clone,
the same construction as upstream's ``view_copy`` rule.

Source: https://github.com/pytorch/pytorch/pull/157944 (unbacked-safe fake rule for
``slice.Tensor`` only); https://github.com/pytorch/pytorch/issues/161393
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch._ops import OpOverload
from torch.utils import _pytree as pytree

from export_core.patching import MARKS_OWN_FIRING, PatchSession
from export_core.registry import register_patch

__all__ = ["FAKE_RULES_TARGET", "copy_twins_of_view_rules", "view_rules_for_copies"]

FAKE_RULES_TARGET = "torch._subclasses.fake_tensor.op_implementations_checks"
"""Fake mode's ordered ``(applies(op), rule)`` table, as ``FakeTensorMode._dispatch_impl`` reads
it (``fake_impls.op_implementations_checks``, imported by name)."""

FakeRule = Callable[..., Any]
FakeRuleTable = list[tuple[Callable[[OpOverload], bool], FakeRule]]


class _RuleTable(list):  # type: ignore[type-arg]
    """The patched table: a plain list that marks the patch fired itself, when a rule of a
    copying twin runs (a table installed for every export is not a workaround that acted)."""


setattr(_RuleTable, MARKS_OWN_FIRING, True)


def _copy_twin(view: OpOverload) -> OpOverload | None:
    """The op ``ReplaceViewOpsWithViewCopyOpsPass`` swaps the view op ``view`` for
    (``aten.<name>_copy.<overload>``), or ``None`` for an op that is not a view or has no twin."""
    from torch._export.error import InternalError
    from torch._export.passes.replace_view_ops_with_view_copy_ops_pass import (
        get_view_copy_of_view_op,
    )

    try:
        return get_view_copy_of_view_op(view._schema)
    except InternalError:  # a view op without a copying twin
        return None


def copy_twins_of_view_rules(rules: dict[OpOverload, FakeRule]) -> dict[OpOverload, OpOverload]:
    """The copying twins that lack a fake rule, each mapped to its view op.

    Args:
        rules: fake mode's per-op rules (``fake_impls.op_implementations_dict``).

    Returns:
        ``{copy op: view op}`` for every view op in ``rules`` whose ``_copy`` twin is not in
        ``rules`` (with torch 2.13: ``slice_copy.Tensor`` and ``select_copy.int``).
    """
    twins = {}
    for op in rules:
        if not isinstance(op, OpOverload):
            continue
        twin = _copy_twin(op)
        if twin is not None and twin not in rules:
            twins[twin] = op
    return twins


def _copy_rule(rules: dict[OpOverload, FakeRule], twins: dict[OpOverload, OpOverload],
               fired: Callable[[], None]) -> FakeRule:
    def rule(fake_mode: Any, func: OpOverload, *args: Any, **kwargs: Any) -> Any:
        fired()
        view = twins[func]
        result = rules[view](fake_mode, view, *args, **kwargs)
        if result is NotImplemented:
            return result
        return pytree.tree_map_only(
            torch.Tensor, lambda t: t.clone(memory_format=torch.contiguous_format), result)

    return rule


@register_patch(
    "executorch",
    FAKE_RULES_TARGET,
    stage="executorch_patches",
    reason="the lowering turns views into their _copy twins and re-runs them on fake tensors; "
    "slice_copy and select_copy have no fake rule, and the view's Python decomposition guards "
    "on a size read from tensor data (u < 1) where the view's own rule does not",
    upstream="https://github.com/pytorch/pytorch/issues/161393",
)
def view_rules_for_copies(original: FakeRuleTable, session: PatchSession) -> FakeRuleTable:
    """Put a fake rule for each copying twin of a view op ahead of fake mode's rule table.

    Args:
        original: ``[(applies(op) -> bool, rule(fake_mode, op, *args, **kwargs)), ...]``.
        session: the export's patch session; the patch is marked fired when a twin's rule runs.

    Returns:
        A new table: first one entry that applies to the copying twins
        (:func:`copy_twins_of_view_rules`) and runs the view's rule on the same arguments, then
        clones the (fake) result contiguous, as ``aten.<view>_copy`` returns a new tensor of the
        view's shape; then ``original`` unchanged.

    Source: https://github.com/pytorch/pytorch/issues/161393
    """
    from torch._subclasses import fake_impls

    rules = fake_impls.op_implementations_dict
    twins = copy_twins_of_view_rules(rules)
    name = f"executorch:{FAKE_RULES_TARGET}"
    rule = _copy_rule(rules, twins, lambda: session.mark_fired(name))
    return _RuleTable([(twins.__contains__, rule), *original])
