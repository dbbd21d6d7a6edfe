"""TileLang's ``T.dp4a(A, B, C)``: ``C += A[0:4] . B[0:4]`` over signed int8 pairs into
an int32 element (CUDA's ``__dp4a`` on the 4 bytes at each address), lowered to one
Store of int32 arithmetic.  CPU: the IR, a Python model of the statement on int8 edge
values, refusals naming form / argument / line, an sm_90a cubin; GPU: an int8 GEMV vs
torch."""

import numpy as np
import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language import FrontendError


def gemv_int8(M=64, K=64):
    """y[m] = sum_k W[m, k] * x[k], each thread one row, 4 products a T.dp4a from local
    copies (as TileLang's dequantize GEMV examples accumulate)."""

    @T.prim_func
    def main(W: T.Tensor((M, K), "int8"), x: T.Tensor((K,), "int8"), y: T.Tensor((M,), "int32")):
        with T.Kernel(1, threads=M) as bx:
            tx = T.get_thread_binding()
            w_row = T.alloc_local((K,), "int8")
            x_loc = T.alloc_local((K,), "int8")
            acc = T.alloc_local((1,), "int32")
            for k in T.serial(K):
                w_row[k] = W[tx, k]
                x_loc[k] = x[k]
            acc[0] = 0
            for k in T.serial(K // 4):
                T.dp4a(w_row[k * 4], x_loc[k * 4], acc[0])
            y[tx] = acc[0]
    return main


def _dp4a_store(f):
    (store,) = [s for k in f.kernels for s in walk_stmts(k.body)
                if isinstance(s, N.Store) and s.buffer == "acc" and isinstance(s.value, N.BinOp)]
    return store


def test_ir_is_one_store_of_four_products():
    store = _dp4a_store(gemv_int8())
    loads = []

    def collect(e):
        if isinstance(e, N.Load):
            loads.append(e)
        for v in vars(e).values():
            for x in (v if isinstance(v, tuple) else (v,)):
                if isinstance(x, N.Expr):
                    collect(x)
    collect(store.value)
    assert store.value.dtype == "int32"
    assert sorted({ld.buffer for ld in loads}) == ["acc", "w_row", "x_loc"]
    assert len([ld for ld in loads if ld.buffer == "w_row"]) == 4


def _eval(e, env):
    """Evaluate the Store's expression with int32 wraparound (the IR's int32 add)."""
    if isinstance(e, N.Const):
        return int(e.value)
    if isinstance(e, N.Var):
        return env[e.name]
    if isinstance(e, N.Load):
        return env[e.buffer][tuple(_eval(i, env) for i in e.indices)]
    if isinstance(e, N.Cast):
        return _eval(e.value, env)
    if isinstance(e, N.BinOp):
        a, b = _eval(e.a, env), _eval(e.b, env)
        r = {"add": a + b, "mul": a * b}[e.op]
        return (r + 2**31) % 2**32 - 2**31 if e.dtype == "int32" else r
    raise TypeError(type(e).__name__)


def test_the_statement_matches_dp4a_on_edge_values():
    store = _dp4a_store(gemv_int8())
    w = np.array([-128, 127, -1, 0, 5, -7, 127, -128], dtype=np.int64)
    xv = np.array([-128, -128, 127, 3, 9, 11, -1, 127], dtype=np.int64)
    var = _loop_var(store)
    for k, acc in ((0, 0), (1, 2**31 - 1), (0, -2**31)):
        env = {"w_row": {(i,): int(v) for i, v in enumerate(w)},
               "x_loc": {(i,): int(v) for i, v in enumerate(xv)}, "acc": {(0,): acc}, var: k}
        want = acc + int(np.dot(w[4 * k:4 * k + 4], xv[4 * k:4 * k + 4]))
        want = (want + 2**31) % 2**32 - 2**31  # __dp4a's int32 wraparound
        assert _eval(store.value, env) == want


def _loads(e):
    if isinstance(e, N.Load):
        yield e
    for v in vars(e).values():
        for x in (v if isinstance(v, tuple) else (v,)):
            if isinstance(x, N.Expr):
                yield from _loads(x)


def _loop_var(store):
    ld = next(ld for ld in _loads(store.value) if ld.buffer == "w_row")
    e = ld.indices[0]
    while not isinstance(e, N.Var):
        e = e.a
    return e.name


def test_cubin(tmp_path):
    info = tilecute.build_cubin(gemv_int8(), "sm_90a", out_dir=str(tmp_path))
    assert len(info.kernels) == 1


def _one(stmt: str) -> str:
    return f'''import tilecute.language as T


@T.prim_func
def main(A: T.Tensor((8, 8), "int8"), U: T.Tensor((8,), "uint8"), F: T.Tensor((4,), "float32"), C: T.Tensor((4,), "int32"), O: T.Tensor((6,), "int8")):
    with T.Kernel(1, threads=32) as bx:
        acc = T.alloc_local((1,), "int32")
        {stmt}
'''


@pytest.mark.parametrize("stmt,msg", [
    ("T.dp4a(U[0], A[0, 0], acc[0])", r"T.dp4a: requires int8 inputs, got A.dtype='uint8'"),
    ("T.dp4a(A[0, 0], U[4], acc[0])", "got B.dtype='uint8'"),
    ("T.dp4a(A[0, 0], A[1, 0], F[0])", "requires an int32 accumulator, got C.dtype='float32'"),
    ("T.dp4a(A[0, 0:4], A[1, 0], acc[0])", "A must be an element or a buffer"),
    ("T.dp4a(O[0], A[1, 0], acc[0])", "'O' has a last dim of 6"),
    ("T.dp4a(A[0, 0], A[1, 0], acc[0], 1)", "T.dp4a"),
])
def test_refusals_name_the_form_and_line(stmt, msg):
    with pytest.raises(FrontendError, match=msg) as e:
        T.from_script(_one(stmt))
    assert "<script>:8" in str(e.value)


def test_whole_buffers_are_their_first_elements():
    f = T.from_script(_one("T.dp4a(A, A, C)"))
    (store,) = [s for k in f.kernels for s in walk_stmts(k.body) if isinstance(s, N.Store)]
    assert store.buffer == "C" and all(isinstance(i, N.Const) and i.value == 0 for i in store.indices)
    idx = sorted(tuple(int(i.value) for i in ld.indices) for ld in _loads(store.value) if ld.buffer == "A")
    assert idx == [(0, 0), (0, 0), (0, 1), (0, 1), (0, 2), (0, 2), (0, 3), (0, 3)]


@pytest.mark.gpu
def test_gpu_gemv_int8():
    import torch

    kernel = tilecute.compile(gemv_int8())
    w = torch.randint(-128, 128, (64, 64), dtype=torch.int8, device="cuda")
    x = torch.randint(-128, 128, (64,), dtype=torch.int8, device="cuda")
    y = torch.empty(64, dtype=torch.int32, device="cuda")
    kernel(w, x, y)
    torch.cuda.synchronize()
    assert torch.equal(y.cpu(), (w.cpu().long() @ x.cpu().long()).int())
