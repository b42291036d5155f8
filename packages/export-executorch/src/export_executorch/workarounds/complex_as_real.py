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
axis). Fourier transforms (``fft``, ``ifft``, ``rfft``, ``irfft``, ``fftn``, ``ifftn`` and the
``_fft_*`` prims; FNet's token mixing, WavTokenizer's synthesis), which ExecuTorch has no kernel
for either, become products with ``cos`` / ``sin`` matrices of ``2 pi (t j mod n) / n`` built in
the graph from the axis length (a dynamic length stays dynamic), one axis after another. It acts only when every complex node and every reader of one is an op it knows and the
program neither takes nor returns a complex tensor; otherwise the program is left as captured
(and the lowering reports the complex op it cannot run).

Source: https://github.com/pytorch/executorch/issues/5381
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass
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


_TWO_PI = 2 * math.pi
_NORMALIZATION = {None: 0, "backward": 0, "ortho": 1, "forward": 2}
"""A forward transform's ``norm`` as the FFT prims' ``normalization`` (0: none, 1: by the square
root of the size, 2: by the size); an inverse transform's is mirrored (``"backward"``: 2)."""


def _length(x: torch.fx.Node, dim: int, op: Op) -> Any:
    """The size of a real tensor node's ``dim``: an int, or a ``sym_size`` node."""
    size = x.meta["val"].shape[dim]
    return size if isinstance(size, int) else op(_aten.sym_size.int, x, dim)


def _half_plus_one(n: Any, op: Op) -> Any:
    if isinstance(n, int):
        return n // 2 + 1
    return op(operator.add, op(operator.floordiv, n, 2), 1)


def _dft_matrices(n_in: Any, n_out: Any, n: Any, dtype: torch.dtype, weighted: bool,
                  op: Op) -> tuple[Any, Any, Any]:
    """``cos`` and ``sin`` of ``2 pi (t j mod n) / n`` for ``t < n_in`` (rows) and ``j < n_out``
    (columns), ``(n_in, n_out)`` of ``dtype`` (the product reduced modulo ``n`` in integers, so
    the angle stays below ``2 pi`` and exact at any length); and ``n`` as a ``dtype`` scalar
    tensor. ``weighted``: each row ``t`` times 2, but the rows 0 and ``n / 2`` (the one-sided
    spectrum's bins counted once by an inverse real transform)."""
    t = op(_aten.arange.default, n_in, dtype=torch.int64)
    j = op(_aten.arange.default, n_out, dtype=torch.int64)
    tj = op(_aten.mul.Tensor, op(_aten.unsqueeze.default, t, 1), op(_aten.unsqueeze.default, j, 0))
    size = op(_aten.scalar_tensor.default, n, dtype=torch.int64)
    tj = op(_aten.remainder.Tensor, tj, size)
    real_size = op(_aten._to_copy.default, size, dtype=dtype)
    angle = op(_aten.div.Tensor, op(_aten.mul.Tensor, op(_aten._to_copy.default, tj, dtype=dtype),
                                    _TWO_PI), real_size)
    cos, sin = op(_aten.cos.default, angle), op(_aten.sin.default, angle)
    if weighted:
        ends = op(_aten.logical_or.default, op(_aten.eq.Scalar, t, 0),
                  op(_aten.eq.Tensor, op(_aten.mul.Tensor, t, 2), size))
        weight = op(_aten.sub.Tensor, op(_aten.full_like.default, t, 2, dtype=dtype),
                    op(_aten._to_copy.default, ends, dtype=dtype))
        weight = op(_aten.unsqueeze.default, weight, 1)
        cos, sin = op(_aten.mul.Tensor, cos, weight), op(_aten.mul.Tensor, sin, weight)
    return cos, sin, real_size


def _along(x: Any, matrix: Any, dim: int, op: Op) -> Any:
    """``x``'s axis ``dim`` (length ``n_in``) mapped through ``matrix`` ``(n_in, n_out)``."""
    moved = op(_aten.movedim.int, x, dim, -1)
    return op(_aten.movedim.int, op(_aten.matmul.default, moved, matrix), -1, dim)


def _dft(re: Any, im: Any, dim: int, *, inverse: bool, normalization: int, n_out: Any,
         n: Any, real_output: bool, op: Op) -> tuple[Any, Any]:
    """One axis of a discrete Fourier transform of ``re + i im`` (``im`` None: a real signal):
    ``Y_j = sum_t x_t exp(-+ 2 pi i t j / n)``, ``n_out`` outputs; ``real_output``: the inverse
    real transform of a one-sided spectrum (only ``Re Y``, the bins between the ends counted
    twice). Returns ``(Re Y, Im Y)`` (``Im Y`` None for a real output)."""
    n_in = _length(re, dim, op)
    dtype = re.meta["val"].dtype
    cos, sin, size = _dft_matrices(n_in, n_out, n, dtype, real_output, op)
    a_cos, a_sin = _along(re, cos, dim, op), _along(re, sin, dim, op)
    if im is None:
        real, imag = a_cos, (a_sin if inverse else op(_aten.neg.default, a_sin))
    else:
        b_cos, b_sin = _along(im, cos, dim, op), _along(im, sin, dim, op)
        if inverse:  # (a + ib)(cos + i sin)
            real = op(_aten.sub.Tensor, a_cos, b_sin)
            imag = op(_aten.add.Tensor, b_cos, a_sin)
        else:  # (a + ib)(cos - i sin)
            real = op(_aten.add.Tensor, a_cos, b_sin)
            imag = op(_aten.sub.Tensor, b_cos, a_sin)
    if real_output:
        imag = None
    if normalization:
        scale = size if normalization == 2 else op(_aten.sqrt.default, size)
        real = op(_aten.div.Tensor, real, scale)
        imag = None if imag is None else op(_aten.div.Tensor, imag, scale)
    return real, imag


_FFT_SIGNATURES = {
    _aten.fft_fft.default: ("x", "n", "dim", "norm"),
    _aten.fft_ifft.default: ("x", "n", "dim", "norm"),
    _aten.fft_rfft.default: ("x", "n", "dim", "norm"),
    _aten.fft_irfft.default: ("x", "n", "dim", "norm"),
    _aten.fft_fftn.default: ("x", "s", "dim", "norm"),
    _aten.fft_ifftn.default: ("x", "s", "dim", "norm"),
    _aten._fft_c2c.default: ("x", "dim", "normalization", "forward"),
    _aten._fft_r2c.default: ("x", "dim", "normalization", "onesided"),
    _aten._fft_c2r.default: ("x", "dim", "normalization", "last_dim_size"),
}
"""The Fourier transform ops the fix rewrites, with their positional argument names."""
_INVERSE = {_aten.fft_ifft.default, _aten.fft_irfft.default, _aten.fft_ifftn.default,
            _aten._fft_c2r.default}
_ONESIDED = {_aten.fft_rfft.default, _aten._fft_r2c.default}
_REAL_OUTPUT = {_aten.fft_irfft.default, _aten._fft_c2r.default}


@dataclass(frozen=True)
class FftCall:
    """One Fourier transform call, in the FFT prims' terms.

    Attributes:
        x: the signal node (real, or complex for a complex or inverse real transform).
        dims: the transformed axes, non-negative, in order.
        inverse: ``exp(+2 pi i t j / n)`` (else ``-``).
        normalization: 0 none, 1 by the square root of the length, 2 by the length.
        onesided: a real forward transform keeps the bins ``0 .. n // 2`` of its last axis.
        real_output: an inverse real transform (``irfft``): its last axis is real.
        last_size: the inverse real transform's output length (None: ``2 * (bins - 1)``).
    """

    x: torch.fx.Node
    dims: list[int]
    inverse: bool
    normalization: int
    onesided: bool = False
    real_output: bool = False
    last_size: Any = None


def _fft_call(node: torch.fx.Node) -> FftCall | None:
    """The FFT ``node`` as an :class:`FftCall`; None for an FFT call this fix does not cover (a
    signal length ``n`` / ``s`` that pads or trims, except an inverse real transform's output
    length)."""
    target = node.target
    names = _FFT_SIGNATURES.get(target)
    if names is None:
        return None
    bound = {"n": None, "s": None, "dim": -1, "norm": None, **dict(zip(names, node.args)),
             **node.kwargs}
    x = bound["x"]
    if not isinstance(x, torch.fx.Node) or not isinstance(x.meta.get("val"), torch.Tensor):
        return None
    rank = x.meta["val"].dim()
    dims = bound["dim"]
    if dims is None:
        dims = list(range(rank))
    dims = [d % rank for d in ([dims] if isinstance(dims, int) else dims)]
    inverse = target in _INVERSE or (target is _aten._fft_c2c.default and not bound["forward"])
    if "normalization" in bound:
        normalization = bound["normalization"]
    elif bound["norm"] in _NORMALIZATION:
        normalization = _NORMALIZATION[bound["norm"]]
        normalization = 2 - normalization if inverse else normalization
    else:
        return None
    if target not in _REAL_OUTPUT and (bound["n"] is not None or bound["s"] is not None):
        return None
    return FftCall(x, dims, inverse, normalization,
                   onesided=target in _ONESIDED and bound.get("onesided", True),
                   real_output=target in _REAL_OUTPUT,
                   last_size=bound.get("last_dim_size", bound["n"]) if target in _REAL_OUTPUT
                   else None)


def _fft_ok(node: torch.fx.Node) -> bool:
    call = _fft_call(node)
    if call is None or not call.dims:
        return False
    if call.real_output:
        return _is_complex(call.x)
    return not (call.onesided and _is_complex(call.x))


def _fft(node: torch.fx.Node, pairs: Pairs, op: Op) -> Any:
    """A Fourier transform over ``dims``, one axis after another (the real transforms' one-sided
    axis last, as the FFT prims do)."""
    call = _fft_call(node)
    x, dims = call.x, call.dims
    re, im = _parts(pairs[x], op) if _is_complex(x) else (x, None)
    for i, dim in enumerate(dims):
        last = i == len(dims) - 1
        real_output = call.real_output and last
        if real_output:
            bins = _length(re, dim, op)
            n = call.last_size
            if n is None:
                n = op(operator.mul, op(operator.sub, bins, 1), 2) if not isinstance(bins, int) \
                    else 2 * (bins - 1)
            used = _half_plus_one(n, op)
            if not (isinstance(used, int) and used == bins):
                re = op(_aten.slice.Tensor, re, dim, 0, used)
                im = op(_aten.slice.Tensor, im, dim, 0, used)
            n_out = n
        else:
            n = _length(re, dim, op)
            n_out = _half_plus_one(n, op) if call.onesided and last else n
        re, im = _dft(re, im, dim, inverse=call.inverse, normalization=call.normalization,
                      n_out=n_out, n=n, real_output=real_output, op=op)
    return re if call.real_output else _pair(re, im, op)


_RULES: dict[Any, tuple[Callable[[torch.fx.Node, Pairs, Op], Any],
                        Callable[[torch.fx.Node], bool]]] = {
    # complex from real
    _aten.view_as_complex.default: (lambda n, p, op: n.args[0], lambda n: True),
    **{target: (_fft, _fft_ok) for target in _FFT_SIGNATURES},
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
    "(polar, view_as_complex, complex mul) become arithmetic on real (..., 2) pairs, Fourier "
    "transforms (FNet, WavTokenizer) products with cos / sin matrices",
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
