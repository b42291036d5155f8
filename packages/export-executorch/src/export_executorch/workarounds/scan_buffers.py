"""ExecuTorch patch: the emitted ``scan`` loop sizes its buffers to each step's dynamic shape.

``_Emitter._emit_scan`` turns ``torch.ops.higher_order.scan`` into a loop whose buffers are
memory-planned at their upper bounds. Two of the loop's instructions assume the buffers already
have the step's shape, which holds only when no dimension but the scanned one is dynamic:

- each carry is initialised from ``init`` and refreshed after every step with
  ``aten::copy_(carry, value, False, out=carry)``; the portable ``copy_`` broadcasts into the
  destination's current shape and never resizes it, so a carry with a dynamic dimension (an
  LSTM's batch) fails at run time (``tensor_is_broadcastable_to``, 0x12);
- each stacked output grows with ``executorch_prim::et_copy_index(stacked, step_value, i)``,
  which requires ``stacked.shape[1:] == step_value.shape`` before it resizes the leading axis to
  ``i + 1``; with the planned shape still in place the first step fails (``Mismatch in shape
  between copy_to and copy_from tensors``, 0x12).

The patch rewrites the carry copies into ``aten::clone.out(value, None, out=carry)`` (resizes,
then copies) and, before each ``et_copy_index``, sets the stacked buffer's shape to
``(i, *step_value.shape)`` with ``aten::sym_size.int`` and ``aten::empty.out`` (a resize of the
same planned memory: the ``i`` rows already written stay where they are). Nothing else the
emitter produces changes.

Source: https://github.com/pytorch/executorch/pull/16028
"""

from __future__ import annotations

import functools
from typing import Any

from executorch.exir.schema import EValue, Instruction, Int, IntList, KernelCall, Null

from export_core.registry import register_patch

__all__ = ["resize_scan_buffers"]

_UPSTREAM = "https://github.com/pytorch/executorch/pull/16028"


def _kernel(op_index: int, args: list[int]) -> Instruction:
    return Instruction(KernelCall(op_index=op_index, args=args))


def _carry_copies_to_clones(emitter: Any, instructions: list[Instruction], carries: set[int]) -> None:
    """Turn ``copy_(carry, src, False, carry)`` into ``clone.out(src, None, carry, carry)``."""
    copy_index, _ = emitter._get_operator(name="aten::copy_")
    clone_index: int | None = None
    for instruction in instructions:
        call = instruction.instr_args
        if (
            not isinstance(call, KernelCall)
            or call.op_index != copy_index
            or len(call.args) != 4
            or call.args[0] not in carries
            or call.args[3] != call.args[0]
        ):
            continue
        if clone_index is None:
            clone_index, _ = emitter._get_operator(name="aten::clone", overload="out")
        carry, source = call.args[0], call.args[1]
        call.op_index = clone_index
        call.args = [source, emitter._emit_evalue(EValue(Null())).id, carry, carry]


def _resizes_before_stacking(emitter: Any, start: int, stacked: set[int]) -> None:
    """Insert ``stacked.resize_(i, *step.shape)`` before each ``et_copy_index(stacked, step, i)``
    emitted at or after ``start`` (no jump the loop emitted targets a later instruction)."""
    copy_index_op, _ = emitter._get_operator(name="executorch_prim::et_copy_index",
                                             overload="tensor")
    sym_size_op, _ = emitter._get_operator(name="aten::sym_size", overload="int")
    empty_op, _ = emitter._get_operator(name="aten::empty", overload="out")
    chain = emitter.chain.instructions
    position = start
    while position < len(chain):
        call = chain[position].instr_args
        if not (isinstance(call, KernelCall) and call.op_index == copy_index_op
                and call.args[0] in stacked):
            position += 1
            continue
        target, step_value, index = call.args
        rank = len(emitter.emitter_state.values[step_value].val.sizes)
        inserted: list[Instruction] = []
        sizes = [index]
        for dim in range(rank):
            size = emitter._emit_evalue(EValue(Int(0))).id
            inserted.append(_kernel(sym_size_op, [
                step_value, emitter._emit_evalue(EValue(Int(dim))).id, size]))
            sizes.append(size)
        shape = emitter._emit_evalue(EValue(IntList(sizes))).id
        inserted.append(_kernel(empty_op, [
            shape, emitter._emit_evalue(EValue(Null())).id, target, target]))
        chain[position:position] = inserted
        position += len(inserted) + 1


@register_patch(
    "executorch",
    "executorch.exir.emit._emitter._Emitter._emit_scan",
    stage="executorch_patches",
    reason="the emitted scan loop copies carries with copy_ (no resize) and stacks step outputs "
    "into a buffer that must already have the step's shape: a carry or output with a dynamic "
    "dimension besides the scanned one (an LSTM's batch) fails at run time",
    upstream=_UPSTREAM,
)
def resize_scan_buffers(original: Any) -> Any:
    """Wrap ``_Emitter._emit_scan`` so the loop it emits resizes its carries and stacked outputs.

    Args:
        original: ``_Emitter._emit_scan(self, args, subemitter_binding_output_values)``;
            ``args[1]`` is the scan's ``init``, the first ``len(init)`` binding outputs are the
            carry buffers and the rest the stacked outputs ``(steps, *step shape)``.

    Returns:
        The replacement: it runs the original, then rewrites the carry copies into
        ``aten::clone.out`` and inserts the resize of each stacked output before its
        ``et_copy_index``. The loop's jump targets all precede the inserted instructions.

    Source: https://github.com/pytorch/executorch/pull/16028
    """

    @functools.wraps(original)
    def _emit_scan(self: Any, args: Any, subemitter_binding_output_values: Any) -> Any:
        start = len(self.chain.instructions)
        result = original(self, args, subemitter_binding_output_values)
        num_carry = len(args[1])
        values = list(subemitter_binding_output_values)
        _carry_copies_to_clones(self, self.chain.instructions[start:],
                                {value.id for value in values[:num_carry]})
        _resizes_before_stacking(self, start, {value.id for value in values[num_carry:]})
        return result

    return _emit_scan
