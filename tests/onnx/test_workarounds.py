"""The ONNX workarounds in ``export_onnx.workarounds``: each kind of fault, its variants, ORT == eager.

Every model goes through the five ONNX stages (``_pipeline``) and is compared with eager PyTorch
in ONNX Runtime, at two or more input shapes where axes are dynamic. Each group also checks that
its workaround fired, and that without it the shared case fails.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable, Iterator

import numpy as np
import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F
from _pipeline import PipelineResult, export_with_workarounds, run_model, run_onnx_pipeline

from export_core.registry import withheld
from export_onnx.workarounds.where_dtypes import WHERE_COMPUTE_TYPES, fix_ir_where_dtypes

Dim = torch.export.Dim


class _Fn1(torch.nn.Module):
    def __init__(self, fn: Callable[..., object]):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


class _Fn2(_Fn1):
    def forward(self, a, b):
        return self.fn(a, b)


class _Fn3(_Fn1):
    def forward(self, a, b, c):
        return self.fn(a, b, c)


def Fn(fn: Callable[..., object]) -> torch.nn.Module:  # noqa: N802  (reads as a class)
    """A module whose ``forward`` (with as many positional inputs as ``fn``) is ``fn``."""
    arity = len(inspect.signature(fn).parameters)
    return {1: _Fn1, 2: _Fn2, 3: _Fn3}[arity](fn)


def _flat(value: object) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for v in value for t in _flat(v)]


def check(
    model: torch.nn.Module,
    args: tuple,
    dynamic_shapes: object = None,
    test_inputs: list[tuple] | None = None,
    atol: float = 1e-5,
) -> PipelineResult:
    """Export through the pipeline and assert ORT == eager (shape, dtype, values) per input."""
    model = model.eval()
    result = export_with_workarounds(model, args, dynamic_shapes)
    test_inputs = test_inputs or [args]
    for inputs, got in zip(test_inputs, run_model(result.model, test_inputs), strict=True):
        with torch.no_grad():
            want = [t.numpy() for t in _flat(model(*inputs))]
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            where = f"output {i} at input shapes {[tuple(t.shape) for t in inputs]}"
            assert g.shape == w.shape, where
            assert g.dtype == w.dtype, where
            if np.issubdtype(w.dtype, np.floating):
                assert not np.isnan(g).any() or np.isnan(w).any(), where
                np.testing.assert_allclose(g, w, atol=atol, rtol=1e-5, err_msg=where)
            else:
                np.testing.assert_array_equal(g, w, err_msg=where)
    return result


def bare_export(model: torch.nn.Module, args: tuple, dynamic_shapes: object = None) -> ir.Model:
    """``torch.onnx.export`` with no workaround at all (what the shared cases do)."""
    return torch.onnx.export(
        model.eval(), args, dynamo=True, dynamic_shapes=dynamic_shapes, verbose=False
    ).model


def causes(exc: BaseException) -> str:
    """The messages of ``exc`` and every exception it was raised from."""
    text = []
    while exc is not None:
        text.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__
    return "\n".join(text)


@contextlib.contextmanager
def without_node_fix(name: str) -> Iterator[None]:
    """Unregister the ``"onnx"`` FX node fix ``name`` for the block, then register it again."""
    with withheld("onnx", name):
        yield


# ── Case 02: arithmetic mixing an integer/bool tensor with a float operand ───────────────────


class MaskedScores(torch.nn.Module):
    """Case 02: ``scores [B, H, T]`` + ``(1.0 - mask [B, T]) * -1e4`` with an int64 mask."""

    def forward(self, scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return scores + (1.0 - mask[:, None, :]) * -10000.0


def _mask_inputs(batch: int, seq: int, dtype: torch.dtype = torch.int64) -> tuple:
    mask = (torch.arange(seq)[None, :] < torch.arange(seq - batch, seq)[:, None]).to(dtype)
    return torch.randn(batch, 3, seq), mask


def test_case02_int_mask_rsub_exports_and_matches_eager():
    args = _mask_inputs(2, 5)
    batch, seq = Dim("batch", min=1, max=8), Dim("seq", min=2, max=64)
    shapes = ({0: batch, 2: seq}, {0: batch, 1: seq})
    result = check(MaskedScores(), args, shapes, [args, _mask_inputs(3, 9)])
    assert "fix_mixed_dtype_arith" in result.fx_fixes


def test_case02_fails_without_the_fix():
    with pytest.raises(Exception, match="(?s)compatible OpOverload for aten.sub"):
        bare_export(MaskedScores(), _mask_inputs(2, 5))
    with without_node_fix("fix_mixed_dtype_arith"), pytest.raises(Exception, match="aten.sub"):
        export_with_workarounds(MaskedScores().eval(), _mask_inputs(2, 5))


_ARITH_FORMS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "rsub.Scalar (1.0 - m)": lambda m, f: 1.0 - m,
    "rsub.Scalar alpha": lambda m, f: torch.rsub(m, 1.5, alpha=2),
    "sub (m - 0.5)": lambda m, f: m - 0.5,
    "sub.Tensor (m - f)": lambda m, f: m - f,
    "sub.Tensor (f - m)": lambda m, f: f - m,
    "sub alpha (f - 2m)": lambda m, f: torch.sub(f, m, alpha=2),
    "rsub.Tensor (f - m)": lambda m, f: torch.rsub(m, f),
    "add (m + 0.5)": lambda m, f: m + 0.5,
    "add (0.5 + m)": lambda m, f: 0.5 + m,
    "add.Tensor (f + m)": lambda m, f: f + m,
    "mul (m * -1e4)": lambda m, f: m * -1e4,
    "mul (-1e4 * m)": lambda m, f: -1e4 * m,
    "mul.Tensor (f * m)": lambda m, f: f * m,
    "div (m / 2.5)": lambda m, f: m / 2.5,
    "div int/int (m / 2)": lambda m, f: m / 2,
    "div.Tensor (m / f)": lambda m, f: m / f,
    "div.Tensor (f / (m + 1))": lambda m, f: f / (m + 1),
    "floor_divide (m // 1.5)": lambda m, f: m // 1.5,
    "floor_divide (3.5 // (m + 1))": lambda m, f: 3.5 // (m + 1),
    "floor_divide (7 // (m + 1))": lambda m, f: 7 // (m + 1),
    "remainder (m % 1.5)": lambda m, f: m % 1.5,
    "remainder (2.5 % (m + 1))": lambda m, f: 2.5 % (m + 1),
}


def _arith_forms(dtype: torch.dtype) -> list[Callable]:
    """The forms eager accepts for ``dtype`` (bool has no subtraction)."""
    m, f = torch.ones(2, 3, dtype=dtype), torch.ones(2, 3)
    forms = []
    for fn in _ARITH_FORMS.values():
        try:
            fn(m, f)
        except RuntimeError:
            continue
        forms.append(fn)
    return forms


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool], ids=str)
def test_mixed_dtype_arith_every_form(dtype):
    forms = _arith_forms(dtype)
    assert len(forms) >= (14 if dtype is torch.bool else len(_ARITH_FORMS))
    model = Fn(lambda m, f: tuple(fn(m, f) for fn in forms))

    def inputs(rows: int, cols: int) -> tuple:
        g = torch.Generator().manual_seed(rows)
        return torch.randint(0, 3, (rows, cols), generator=g).to(dtype), torch.randn(rows, cols)

    shapes = ({0: Dim("r", min=2, max=16), 1: Dim("c", min=2, max=16)},) * 2
    result = check(model, inputs(2, 3), shapes, [inputs(2, 3), inputs(5, 7)])
    assert result.fx_fixes == ["fix_mixed_dtype_arith"]


def test_mixed_dtype_arith_scalar_self_float_tensor():
    """``3.5 // x`` with a float tensor also puts a number in the self position."""
    with pytest.raises(Exception, match="floor_divide"):
        bare_export(Fn(lambda x: 3.5 // x), (torch.randn(2, 3),))
    x = torch.randn(2, 3)
    check(
        Fn(lambda x: (3.5 // x, 2.5 % x)),
        (x,),
        ({0: Dim("r", min=2, max=8)},),
        [(x,), (torch.randn(4, 3),)],
    )


# ── Case 04: split / chunk with a symbolic chunk size ──────────────────────────────────────────


class HalfSplit(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = torch.split(x, x.shape[1] // 2, dim=1)
        return a * 2 + b


class HalfChunk(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = x.chunk(2, dim=1)
        return a - b


@pytest.mark.parametrize("model", [HalfSplit(), HalfChunk()], ids=["split", "chunk"])
def test_case04_split_dynamic_axis(model):
    shapes = ({1: 2 * Dim("half", min=1, max=64)},)
    x = torch.randn(2, 8, 4)
    with pytest.raises(Exception) as failure:
        bare_export(model, (x,), shapes)
    assert "constant folding for node 'node_split' (::SplitToSequence)" in causes(failure.value)
    result = check(model, (x,), shapes, [(x,), (torch.randn(2, 12, 4),)])
    assert "fix_split_symbolic_size" in result.fx_fixes
    assert "SplitToSequence" not in result.op_types()


class SplitForms(torch.nn.Module):
    """Every split form with a symbolic size, on ``x [B, n, E]`` with ``n = 2h + 1`` (uneven)."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        size = (x.shape[1] + 1) // 2
        a, b = torch.split(x, size, dim=1)
        c, d = x.unsafe_split(size, 1)
        e, f = x.chunk(2, dim=-2)
        g, h = x.split(x.shape[0] // 2, dim=0)
        return a, b * 2, c, d * 3, e, f * 4, g, h * 5


def test_split_symbolic_every_form_two_dynamic_axes():
    shapes = ({0: 2 * Dim("b", min=1, max=8), 1: 2 * Dim("h", min=1, max=32) + 1},)
    x = torch.randn(4, 9, 4)
    tests = [(x,), (torch.randn(6, 13, 4),), (torch.randn(2, 3, 4),)]
    result = check(SplitForms(), (x,), shapes, tests)
    assert result.fx_fixes == ["fix_split_symbolic_size"]
    assert "SplitToSequence" not in result.op_types()


def test_split_with_static_size_is_left_alone():
    model = Fn(lambda x: tuple(t * (i + 1) for i, t in enumerate(x.split(2, dim=2))))
    shapes = ({0: Dim("b", min=2, max=8), 1: Dim("n", min=2, max=64)},)
    x = torch.randn(4, 12, 4)
    result = check(model, (x,), shapes, [(x,), (torch.randn(6, 18, 4),)])
    assert "fix_split_symbolic_size" not in result.fx_fixes


# ── Case 05: SDPA where a query row masks every key ───────────────────────────────────────────


class Attn(torch.nn.Module):
    def forward(self, q, k, v, bias):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)


def test_case05_neg_inf_mask_row_is_zero_not_nan():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 1, 2, 4, 8).unbind(0)
    bias = torch.zeros(1, 1, 4, 4)
    bias[..., 0, :] = float("-inf")
    bias[..., 2, 3] = float("-inf")
    (bare,) = run_model(bare_export(Attn(), (q, k, v, bias)), [(q, k, v, bias)])[0]
    assert np.isnan(bare).any()  # what TorchLib gives
    result = check(Attn(), (q, k, v, bias))
    (got,) = run_model(result.model, [(q, k, v, bias)])[0]
    assert (got[..., 0, :] == 0).all()
    assert "IsInf" in result.op_types()  # the custom translation, not TorchLib's


def _attention_inputs(batch: int, seq: int, kind: str, seed: int = 0) -> tuple:
    """q ``[B, 4, L, 8]``, k/v ``[B, 4, L, 8]``, GQA k/v ``[B, 2, L, 8]``, mask ``[B, 1, L, L]``."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, 4, seq, 8, generator=g) for _ in range(3))
    kg, vg = (torch.randn(batch, 2, seq, 8, generator=g) for _ in range(2))
    keep = torch.rand(batch, 1, seq, seq, generator=g) > 0.4
    keep[:, :, 0, :] = False  # a query row that may attend to nothing
    keep[:, :, -1, :] = True
    mask = keep if kind == "bool" else torch.zeros(keep.shape).masked_fill(~keep, float("-inf"))
    return q, k, v, kg, vg, mask


class AttnVariants(torch.nn.Module):
    """Plain, causal, explicit scale, and GQA + causal + scale, all with one mask."""

    def __init__(self, use_mask: bool):
        super().__init__()
        self.use_mask = use_mask

    def forward(self, q, k, v, kg, vg, mask):
        m = mask if self.use_mask else None
        sdpa = F.scaled_dot_product_attention
        return (
            sdpa(q, k, v, attn_mask=m),
            sdpa(q, k, v, attn_mask=m, is_causal=True),
            sdpa(q, k, v, attn_mask=m, scale=0.3),
            sdpa(q, kg, vg, attn_mask=m, is_causal=True, scale=0.5, enable_gqa=True),
        )


@pytest.mark.parametrize("kind", ["float", "bool", "none"])
def test_sdpa_mask_kinds_causal_scale_gqa(kind):
    args = _attention_inputs(2, 5, kind)
    b, t = Dim("b", min=1, max=8), Dim("t", min=2, max=64)
    seq = {0: b, 2: t}
    shapes = (seq,) * 5 + ({0: b, 2: t, 3: t},)
    model = AttnVariants(use_mask=kind != "none")
    result = check(model, args, shapes, [args, _attention_inputs(3, 7, kind, seed=1)])
    assert "IsInf" in result.op_types()
    if kind != "none":
        (got, *_) = run_model(result.model, [args])[0]
        assert (got[:, :, 0, :] == 0).all()


def test_sdpa_bool_mask_row_was_a_uniform_average_without_the_translation():
    """TorchLib's bool path uses the lowest finite value: no NaN, but not eager's 0 either."""
    q, k, v, _, _, mask = _attention_inputs(2, 5, "bool")
    (bare,) = run_model(bare_export(Attn(), (q, k, v, mask)), [(q, k, v, mask)])[0]
    assert not np.isnan(bare).any()
    assert np.abs(bare[:, :, 0, :]).max() > 1e-3


# ── Case 07: stable sort / argsort ────────────────────────────────────────────────────────────


class StableOrder(torch.nn.Module):
    def forward(self, scores):
        return torch.argsort(scores, dim=-1, stable=True)


def test_case07_argsort_stable():
    scores = torch.tensor([[3.0, 1.0, 2.0, 1.0, 0.0], [0.5, 0.5, -1.0, 2.0, 0.5]])
    with pytest.raises(Exception, match="aten.sort.*stable"):
        bare_export(StableOrder(), (scores,))
    ties = torch.tensor([[2.0, 2.0, 1.0, 2.0, 1.0, 1.0, 0.0]] * 3)
    shapes = ({0: Dim("rows", min=2, max=8), 1: Dim("n", min=2, max=64)},)
    outputs = run_onnx_pipeline(StableOrder().eval(), (scores,), shapes, [(scores,), (ties,)])
    for (got,), inputs in zip(outputs, [scores, ties], strict=True):
        np.testing.assert_array_equal(got, StableOrder()(inputs).numpy())


class SortEveryWay(torch.nn.Module):
    """``sort(stable=True)`` values and indices and ``argsort(stable=True)``, per dim and order."""

    def forward(self, x):
        out = []
        for dim in (-1, 0, 1):
            for descending in (False, True):
                values, indices = torch.sort(x, dim=dim, descending=descending, stable=True)
                out += [values, indices, x.argsort(dim=dim, descending=descending, stable=True)]
        return tuple(out)


@pytest.mark.parametrize(
    "dtype",
    [torch.float32, torch.float16, torch.int64, torch.int32, torch.uint8, torch.bool],
    ids=str,
)
def test_stable_sort_dims_orders_dtypes_with_ties(dtype):
    def inputs(a: int, c: int) -> tuple:
        g = torch.Generator().manual_seed(a * c)
        return (torch.randint(0, 3, (a, 6, c), generator=g).to(dtype),)

    shapes = ({0: Dim("a", min=2, max=64), 2: Dim("c", min=2, max=64)},)
    check(SortEveryWay(), inputs(4, 5), shapes, [inputs(4, 5), inputs(7, 9)], atol=0)


def test_stable_sort_long_rows_with_nan_and_ties():
    x = torch.randint(0, 4, (3, 2000)).float()
    x[0, ::7] = float("nan")
    model = Fn(lambda x: (torch.sort(x, stable=True), x.argsort(descending=True, stable=True)))
    shapes = ({1: Dim("n", min=2, max=4096)},)
    check(model, (x,), shapes, [(x,), (torch.randint(0, 4, (3, 3001)).float(),)], atol=0)


# ── Case 08: Where on data types ONNX Runtime's CPU kernel lacks ────────────────────────────────


class MergeMasks(torch.nn.Module):
    def forward(self, keep, force):
        return keep.masked_fill(force, True)


def test_case08_masked_fill_bool():
    keep = torch.tensor([[True, False, False], [False, False, True]])
    force = torch.tensor([[False, True, False], [False, False, False]])
    path = bare_export(MergeMasks(), (keep, force))
    with pytest.raises(Exception, match="NOT_IMPLEMENTED.*Where"):
        run_model(path, [(keep, force)])
    result = check(MergeMasks(), (keep, force))
    assert result.ir_fixes == ["fix_ir_where_dtypes"]


def test_where_every_torch_form_bool_and_int16():
    def fn(a, b, c):
        return (
            a.masked_fill(b, True),
            (a & c).masked_fill(b, False),
            torch.where(c, a, b),
            torch.where(c, a, False),
            torch.where(c, a.to(torch.int16) * 3, b.to(torch.int16) - 7),
            (a.to(torch.int16) + 300).masked_fill(c, -5),
            a.float().masked_fill(c, -1.0),  # float: left alone
        )

    def inputs(rows: int, cols: int) -> tuple:
        g = torch.Generator().manual_seed(rows)
        return tuple(torch.rand(rows, cols, generator=g) > 0.5 for _ in range(3))

    rc = {0: Dim("r", min=2, max=16), 1: Dim("c", min=2, max=16)}
    result = check(Fn(fn), inputs(2, 3), (rc,) * 3, [inputs(2, 3), inputs(4, 5)])
    assert result.ir_fixes == ["fix_ir_where_dtypes"]


def _where_model(dtype: ir.DataType) -> ir.Model:
    """``Where`` of ``dtype`` in the main graph, in an ``If`` branch and in a model function.

    Inputs ``c: bool [n]``, ``x, y: [n]`` (float for bfloat16, cast inside); outputs
    ``main``, ``branch`` and ``func``, all ``[n]``.
    """
    io_type = ir.DataType.FLOAT if dtype == ir.DataType.BFLOAT16 else dtype
    n = ir.SymbolicDim("n")
    c = ir.Value(name="c", type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([n]))
    x = ir.Value(name="x", type=ir.TensorType(io_type), shape=ir.Shape([n]))
    y = ir.Value(name="y", type=ir.TensorType(io_type), shape=ir.Shape([n]))

    def typed(node: ir.Node, t: ir.DataType, name: str | None = None) -> ir.Value:
        node.outputs[0].type = ir.TensorType(t)
        node.outputs[0].name = name
        return node.outputs[0]

    nodes: list[ir.Node] = []

    def add(node: ir.Node, t: ir.DataType) -> ir.Value:
        nodes.append(node)
        return typed(node, t)

    xs = add(ir.node("Cast", [x], {"to": dtype}), dtype)
    ys = add(ir.node("Cast", [y], {"to": dtype}), dtype)
    main = add(ir.node("Where", [c, xs, ys]), dtype)

    branch_where = ir.node("Where", [c, ys, xs])
    then_out = typed(branch_where, dtype, "then_out")
    then_graph = ir.Graph([], [then_out], nodes=[branch_where], name="then")
    else_where = ir.node("Where", [c, xs, xs])
    else_out = typed(else_where, dtype, "else_out")
    else_graph = ir.Graph([], [else_out], nodes=[else_where], name="else")
    any_c = add(
        ir.node(
            "ReduceMax",
            [add(ir.node("Cast", [c], {"to": ir.DataType.INT32}), ir.DataType.INT32)],
            {"keepdims": 0},
        ),
        ir.DataType.INT32,
    )
    flag = add(ir.node("Cast", [any_c], {"to": ir.DataType.BOOL}), ir.DataType.BOOL)
    branch = add(
        ir.node("If", [flag], {"then_branch": then_graph, "else_branch": else_graph}), dtype
    )

    fc = ir.Value(name="fc", type=ir.TensorType(ir.DataType.BOOL))
    fx, fy = (ir.Value(name=s, type=ir.TensorType(dtype)) for s in ("fx", "fy"))
    f_where = ir.node("Where", [fc, fy, fx])
    typed(f_where, dtype, "f_out")
    function = ir.Function(
        "local",
        "select",
        graph=ir.Graph([fc, fx, fy], [f_where.outputs[0]], nodes=[f_where], opset_imports={"": 20}),
        attributes=[],
    )
    func = add(ir.node("select", [c, xs, ys], domain="local"), dtype)

    outs = [add(ir.node("Cast", [v], {"to": io_type}), io_type) for v in (main, branch, func)]
    for v, name in zip(outs, ("main", "branch", "func"), strict=True):
        v.name, v.shape = name, ir.Shape([n])
    graph = ir.Graph([c, x, y], outs, nodes=nodes, opset_imports={"": 20, "local": 1})
    return ir.Model(graph, ir_version=10, functions=[function])


@pytest.mark.parametrize("dtype", list(WHERE_COMPUTE_TYPES), ids=lambda d: d.name)
def test_where_ir_fix_every_dtype_in_graph_branch_and_function(dtype):
    model = _where_model(dtype)
    with pytest.raises(Exception, match="NOT_IMPLEMENTED"):
        ort.InferenceSession(
            ir.to_proto(model).SerializeToString(), providers=["CPUExecutionProvider"]
        )
    assert fix_ir_where_dtypes(model).details == {"rewritten": 4}
    session = ort.InferenceSession(
        ir.to_proto(model).SerializeToString(), providers=["CPUExecutionProvider"]
    )
    np_type = np.float32 if dtype == ir.DataType.BFLOAT16 else dtype.numpy()
    big = {ir.DataType.UINT64: 2**64 - 1, ir.DataType.BFLOAT16: 3, ir.DataType.BOOL: 1}
    values = [0, 1, big.get(dtype, 2**15 - 1), 7 if dtype != ir.DataType.BOOL else 0, 1]
    x = np.array(values, dtype=np_type)
    y = np.array(values[::-1], dtype=np_type)
    c = np.array([True, False, True, False, False])
    main, branch, func = session.run(None, {"c": c, "x": x, "y": y})
    np.testing.assert_array_equal(main, np.where(c, x, y))
    np.testing.assert_array_equal(branch, np.where(c, y, x))
    np.testing.assert_array_equal(func, np.where(c, y, x))


# ── Case 10: floor division / modulo of symbolic sizes ──────────────────────────────────────────


class Windows(torch.nn.Module):
    """Case 10: ``ceil(n / 4)`` windows via ``-(-n // 4)``."""

    def forward(self, x):
        n_windows = -(-x.shape[1] // 4)
        return torch.zeros(n_windows) + x.sum()


def test_case10_ceil_div_length():
    # As written in the shared case: min=1. Plain torch.export cannot prove the range (it guards
    # n >= 5); DynamoExporter's capture retries with size-oblivious reasoning.
    shapes = ({1: Dim("seq", min=1, max=64)},)
    x = torch.randn(1, 10)
    tests = [(x,), (torch.randn(1, 7),), (torch.randn(1, 8),)]
    (bare,) = run_model(bare_export(Windows(), (x,), shapes), [(x,)])[0]
    assert bare.shape == (2,)  # truncating Div: -(-10 // 4) == 2
    result = check(Windows(), (x,), shapes, tests)
    assert [out[0].shape for out in run_model(result.model, tests)] == [(3,), (2,), (2,)]


class SymArith(torch.nn.Module):
    """Floor division and modulo of sizes ``n = x.shape[1]``, ``m = y.shape[0]``, as int64 data."""

    def forward(self, x, y):
        n, m = x.shape[1], y.shape[0]
        one = torch.ones((), dtype=torch.int64)
        values = (
            -(-n // 4),
            -(-n // m),
            (m - n) // m,
            (3 - n) // 4,
            n // -3,
            (-n) // (-3),
            (3 - n) % 4,
            n % -3,
            (n - 3 * m) % m,
            n // m,
            n % m,
        )
        return torch.stack([one * v for v in values])


def test_sym_floordiv_and_mod_negative_operands():
    shapes = ({1: Dim("n", min=2, max=64)}, {0: Dim("m", min=2, max=16)})
    tests = [(torch.randn(1, n), torch.randn(m)) for n, m in ((10, 4), (7, 3), (8, 5), (13, 2))]
    bare = run_model(bare_export(SymArith(), tests[0], shapes), tests)
    assert any((got[0] != SymArith()(*t).numpy()).any() for got, t in zip(bare, tests))
    check(SymArith(), tests[0], shapes, tests, atol=0)


# ── contiguous() after attention: kept as a clone ────────────────────────────────────────────


def _tiny_t5_encoder() -> torch.nn.Module:
    from transformers import T5Config, T5ForConditionalGeneration

    config = T5Config(vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                      decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    torch.manual_seed(0)
    return T5ForConditionalGeneration(config).eval().get_encoder()


def _t5_inputs(batch: int, length: int) -> dict[str, torch.Tensor]:
    mask = torch.ones(batch, length, dtype=torch.long)
    mask[-1, length // 2:] = 0
    return {"input_ids": torch.randint(3, 128, (batch, length)), "attention_mask": mask}


def test_t5_attention_contiguous_exports_with_dynamic_shapes_and_matches_eager():
    """T5's attention output goes ``reshape → transpose → contiguous → reshape``; without the
    fix ``torch.onnx`` drops the ``contiguous`` and its re-trace cannot view the result."""
    from export_onnx import export

    encoder = _tiny_t5_encoder()
    result = export(encoder, _t5_inputs(2, 10), validation_inputs=[_t5_inputs(1, 5), _t5_inputs(3, 13)])
    assert result.report["validation"]["passed"]
    assert len(result.report["validation"]["checks"]) >= 2
    assert "keep_contiguous_as_clone" in result.report["fixes"]["applied"]


def test_t5_attention_fails_without_the_contiguous_fix():
    """The type-promotion re-run without grad (``type_promotion_without_grad``) removes the same
    layout mismatch for T5, so the fault shows only with both withheld."""
    from export_core.errors import TranslationError
    from export_onnx import export
    from export_onnx.workarounds.grad_free_type_promotion import TYPE_PROMOTION_RUN_TARGET

    with without_node_fix("keep_contiguous_as_clone"), \
            withheld("onnx", f"onnx:{TYPE_PROMOTION_RUN_TARGET}"), \
            pytest.raises(TranslationError, match="Cannot view a tensor"):
        export(_tiny_t5_encoder(), _t5_inputs(2, 10), validate=False)


def test_contiguous_with_a_memory_format_keeps_it():
    """``contiguous(memory_format=channels_last)`` becomes a clone with that format: the
    values (all ONNX sees) are unchanged, at two batch sizes."""
    model = Fn(lambda x: x.contiguous(memory_format=torch.channels_last) * 2)
    shapes = ({0: Dim("b", min=1, max=8)},)
    x = torch.randn(2, 3, 4, 5)
    result = check(model, (x,), shapes, [(x,), (torch.randn(5, 3, 4, 5),)])
    assert "keep_contiguous_as_clone" in result.fx_fixes
