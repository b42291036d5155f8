"""FX program fix: complex tensors carried as real ``(..., 2)`` pairs, which ExecuTorch runs.

Rotary position embeddings written with complex numbers (Llama 4, DeepSeek-V2 and the models that
copy them) capture as ``polar`` / ``view_as_complex`` / complex ``mul`` / ``view_as_real``.
``to_edge`` replaces the views by their ``_copy`` variants and re-traces them, and
``view_as_complex_copy`` has no autograd formula for a complex output: ``RuntimeError:
view_as_complex_copy does not support automatic differentiation for outputs with complex dtype``;
past that, ExecuTorch's kernels have no complex dtypes to run.

The fix rewrites every complex-valued node of the captured graph into its real representation,
the ``view_as_real`` layout (the trailing axis holds the real and imaginary parts):
``view_as_complex(x)`` is ``x``, ``view_as_real(c)`` is ``c``'s pair, a complex product is
``(ar*br - ai*bi, ar*bi + ai*br)``, ``polar(r, t)`` is ``(r*cos t, r*sin t)``, and shape ops keep
their meaning with the dims counted from the front (a negative dim shifts by one past the pair
axis). It acts only when every complex node and every reader of one is an op it knows and the
program neither takes nor returns a complex tensor; otherwise the program is left as captured
(and the lowering reports the complex op it cannot run).

Source: https://github.com/pytorch/executorch/issues/5381
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from export_core.fixes import FixContext, FixResult, call_before
from export_core.registry import register_fx_program_fix

from ..stages import BACKEND

__all__ = ["complex_as_real", "supported_complex_ops"]

_aten = torch.ops.aten

_REAL_DTYPE = {
    torch.complex32: torch.float16,
    torch.complex64: torch.float32,
    torch.complex128: torch.float64,
}

Pairs = dict[torch.fx.Node, Any]
"""Complex node -> the node of its real pair tensor ``(*shape, 2)``."""
Op = Callable[..., torch.fx.Node]


def _is_complex(x: Any) -> bool:
    val = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
    return isinstance(val, torch.Tensor) and val.is_complex()


def _is_real_tensor(x: Any) -> bool:
    val = x.meta.get("val") if isinstance(x, torch.fx.Node) else None
    return isinstance(val, torch.Tensor) and not val.is_complex()


def _rank(node: torch.fx.Node) -> int:
    return node.meta["val"].dim()


def _dim(dim: int, rank: int) -> int:
    """A dim of a complex tensor of ``rank`` dims, as a dim of its pair tensor."""
    return dim if dim >= 0 else dim + rank


def _parts(pair: Any, op: Op) -> tuple[Any, Any]:
    return op(_aten.select.int, pair, -1, 0), op(_aten.select.int, pair, -1, 1)


def _pair(real: Any, imag: Any, op: Op) -> Any:
    return op(_aten.stack.default, [real, imag], -1)


def _mul(node: torch.fx.Node, pairs: Pairs, op: Op) -> Any:
    a, b = node.args[:2]
    if _is_complex(a) and _is_complex(b):
        ar, ai = _parts(pairs[a], op)
        br, bi = _parts(pairs[b], op)
        return _pair(op(_aten.sub.Tensor, op(_aten.mul.Tensor, ar, br), op(_aten.mul.Tensor, ai, bi)),
                     op(_aten.add.Tensor, op(_aten.mul.Tensor, ar, bi), op(_aten.mul.Tensor, ai, br)),
                     op)
    c, r = (a, b) if _is_complex(a) else (b, a)
    if isinstance(r, torch.fx.Node):
        r = op(_aten.unsqueeze.default, r, -1)
    return op(_aten.mul.Tensor, pairs[c], r)


def _mul_ok(node: torch.fx.Node) -> bool:
    a, b = node.args[:2]
    other = b if _is_complex(a) else a
    return _is_complex(other) or _is_real_tensor(other) or isinstance(other, (int, float, bool))


def _add_or_sub(node: torch.fx.Node, pairs: Pairs, op: Op) -> Any:
    a, b = node.args[:2]
    return op(node.target, pairs[a], pairs[b], **node.kwargs)


def _both_complex(node: torch.fx.Node) -> bool:
    return len(node.args) == 2 and all(_is_complex(x) for x in node.args)


def _with_dims(*positions: int) -> Callable[[torch.fx.Node, Pairs, Op], Any]:
    """A rule for a shape op whose arguments at ``positions`` are dims of the complex input."""

    def rule(node: torch.fx.Node, pairs: Pairs, op: Op) -> Any:
        source = node.args[0]
        args = list(node.args)
        args[0] = pairs[source]
        rank = _rank(source) + (1 if node.target is _aten.unsqueeze.default else 0)
        for i in positions:
            if i < len(args):
                args[i] = _dim(args[i], rank)
        return op(node.target, *args, **node.kwargs)

    return rule


def _with_shape(node: torch.fx.Node, pairs: Pairs, op: Op) -> Any:
    """``view`` / ``reshape`` / ``expand`` to ``shape``: the pair to ``[*shape, 2]``."""
    source, shape, *rest = node.args
    return op(node.target, pairs[source], [*shape, 2], *rest, **node.kwargs)


def _permute(node: torch.fx.Node, pairs: Pairs, op: Op) -> Any:
    source, dims = node.args
    rank = _rank(source)
    return op(node.target, pairs[source], [_dim(d, rank) for d in dims] + [rank])


def _cat(node: torch.fx.Node, pairs: Pairs, op: Op) -> Any:
    tensors, *rest = node.args
    dim = _dim(rest[0] if rest else node.kwargs.get("dim", 0), _rank(tensors[0]))
    return op(node.target, [pairs[t] for t in tensors], dim)


def _cat_ok(node: torch.fx.Node) -> bool:
    return all(_is_complex(t) for t in node.args[0])


def _to_copy(node: torch.fx.Node, pairs: Pairs, op: Op) -> Any:
    """A conversion between complex dtypes (``_to_copy``, ``to``): the pair to the real dtype."""
    dtype = _REAL_DTYPE[node.meta["val"].dtype]
    return op(_aten._to_copy.default, pairs[node.args[0]], dtype=dtype)


def _to_copy_ok(node: torch.fx.Node) -> bool:
    val = node.meta.get("val")
    return (_is_complex(node.args[0]) and isinstance(val, torch.Tensor)
            and val.dtype in _REAL_DTYPE and val.device.type == "cpu")


def _source_ok(node: torch.fx.Node) -> bool:
    return _is_complex(node.args[0])


_RULES: dict[Any, tuple[Callable[[torch.fx.Node, Pairs, Op], Any],
                        Callable[[torch.fx.Node], bool]]] = {
    # complex from real
    _aten.view_as_complex.default: (lambda n, p, op: n.args[0], lambda n: True),
    _aten.polar.default: (
        lambda n, p, op: _pair(op(_aten.mul.Tensor, n.args[0], op(_aten.cos.default, n.args[1])),
                               op(_aten.mul.Tensor, n.args[0], op(_aten.sin.default, n.args[1])),
                               op),
        lambda n: all(_is_real_tensor(x) for x in n.args)),
    _aten.complex.default: (lambda n, p, op: _pair(n.args[0], n.args[1], op),
                            lambda n: all(_is_real_tensor(x) for x in n.args)),
    # complex from complex
    _aten.mul.Tensor: (_mul, _mul_ok),
    _aten.add.Tensor: (_add_or_sub, _both_complex),
    _aten.sub.Tensor: (_add_or_sub, _both_complex),
    _aten.neg.default: (lambda n, p, op: op(_aten.neg.default, p[n.args[0]]), _source_ok),
    _aten.clone.default: (lambda n, p, op: op(_aten.clone.default, p[n.args[0]]), _source_ok),
    _aten.slice.Tensor: (_with_dims(1), _source_ok),
    _aten.select.int: (_with_dims(1), _source_ok),
    _aten.unsqueeze.default: (_with_dims(1), _source_ok),
    _aten.squeeze.dim: (_with_dims(1), _source_ok),
    _aten.transpose.int: (_with_dims(1, 2), _source_ok),
    _aten.permute.default: (_permute, _source_ok),
    _aten.view.default: (_with_shape, _source_ok),
    _aten.reshape.default: (_with_shape, _source_ok),
    _aten._unsafe_view.default: (_with_shape, _source_ok),
    _aten.expand.default: (_with_shape, _source_ok),
    _aten.cat.default: (_cat, _cat_ok),
    _aten._to_copy.default: (_to_copy, _to_copy_ok),
    _aten.to.dtype: (_to_copy, _to_copy_ok),
    _aten.to.dtype_layout: (_to_copy, _to_copy_ok),
    _aten.to.device: (_to_copy, _to_copy_ok),
    # real from complex
    _aten.view_as_real.default: (lambda n, p, op: p[n.args[0]], _source_ok),
    _aten.real.default: (lambda n, p, op: _parts(p[n.args[0]], op)[0], _source_ok),
    _aten.imag.default: (lambda n, p, op: _parts(p[n.args[0]], op)[1], _source_ok),
    _aten.abs.default: (
        lambda n, p, op: op(_aten.sqrt.default, op(_aten.sum.dim_IntList,
                                                   op(_aten.mul.Tensor, p[n.args[0]], p[n.args[0]]),
                                                   [-1])),
        _source_ok),
}
_ASSERTS = {_aten._assert_tensor_metadata.default}
"""Checks of a complex tensor's metadata: dropped with it."""


def supported_complex_ops() -> frozenset[Any]:
    """The op overloads :func:`complex_as_real` rewrites (producing or reading complex tensors)."""
    return frozenset(_RULES)


def _touches_complex(node: torch.fx.Node) -> bool:
    return _is_complex(node) or any(_is_complex(x) for x in node.all_input_nodes)


def _refusal(graph: torch.fx.Graph) -> str | None:
    """Why the graph cannot be rewritten (an op or use the rules do not cover), None if it can."""
    for node in graph.nodes:
        if not _touches_complex(node):
            continue
        if node.op != "call_function":
            return f"a complex {node.op} ({node.name})"
        if node.target in _ASSERTS:
            continue
        rule = _RULES.get(node.target)
        if rule is None or not rule[1](node):
            return f"{node.target} on complex operands ({node.name})"
    return None


def _rewrite(graph: torch.fx.Graph) -> int:
    """Rewrite ``graph`` in place (after :func:`_refusal` said it can be); the number of complex
    nodes replaced."""
    pairs: Pairs = {}
    done: list[torch.fx.Node] = []
    for node in list(graph.nodes):
        if node.op != "call_function" or not _touches_complex(node):
            continue
        done.append(node)
        if node.target in _ASSERTS:
            continue

        def op(target: Any, *args: Any, _at: torch.fx.Node = node, **kwargs: Any) -> torch.fx.Node:
            return call_before(_at, target, *args, **kwargs)

        result = _RULES[node.target][0](node, pairs, op)
        if _is_complex(node):
            pairs[node] = result
        else:
            node.replace_all_uses_with(result)
    for node in reversed(done):
        graph.erase_node(node)
    return sum(_is_complex(n) for n in done)


@register_fx_program_fix(
    BACKEND,
    reason="ExecuTorch has no complex kernels, and to_edge cannot re-trace view_as_complex "
    "(no autograd formula for a complex view_as_complex_copy): complex rotary embeddings "
    "(polar, view_as_complex, complex mul) become arithmetic on real (..., 2) pairs",
    upstream="https://github.com/pytorch/executorch/issues/5381",
)
def complex_as_real(program: torch.export.ExportedProgram, context: FixContext) -> FixResult:
    """Rewrite the complex tensors of ``program``'s graph as real pairs ``(*shape, 2)``.

    Args:
        program: the captured ``ExportedProgram`` (rewritten in place: the export's own copy);
            a complex tensor is ``complex64`` (pairs of ``float32``), ``complex128`` or
            ``complex32``.
        context: the export's context (unused).

    Returns:
        ``FixResult(program, modified, details)``: ``modified`` when complex nodes were
        rewritten (``details`` their count); unmodified with ``details`` saying why when a
        complex node is an input, an output, in a nested graph or an op
        :func:`supported_complex_ops` lacks.

    Source: https://github.com/pytorch/executorch/issues/5381
    """
    del context
    root = program.graph_module
    if not any(_touches_complex(n) for n in root.graph.nodes):
        return FixResult(program, False)
    nested = [m for m in root.modules() if isinstance(m, torch.fx.GraphModule) and m is not root]
    if any(_touches_complex(n) for m in nested for n in m.graph.nodes):
        return FixResult(program, False, "complex tensors in a nested graph")
    refusal = _refusal(root.graph)
    if refusal is not None:
        return FixResult(program, False, refusal)
    count = _rewrite(root.graph)
    root.graph.lint()
    root.recompile()
    return FixResult(program, True, count)
