"""``@T.macro``: TileLang's inlined helpers (its attention kernels are written with them).
A macro called as a statement inside a ``@T.prim_func`` body is inlined there: parameters
bound to the call's buffers, expressions and Python values (defaults and keywords too),
other names resolved where the macro is defined, locations pointing into the macro."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language.parser import FrontendError

SCALE = 3.0  # read by `scaled_copy` from its own module


@T.macro
def scaled_copy(src, dst, n, factor=SCALE):
    for i in T.Parallel(n):
        dst[i] = src[i] * factor


@T.macro
def twice(src, dst, n):
    scaled_copy(src, dst, n, factor=2.0)
    scaled_copy(dst, dst, n)


def test_macro_is_inlined_with_buffers_expressions_and_defaults():
    @T.prim_func
    def f(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((256,), "float32")
            scaled_copy(A, s, 256)
            twice(s, B, n=128)

    stores = [x for x in walk_stmts(f.kernels[0].body) if isinstance(x, N.Store)]
    assert [st.buffer for st in stores] == ["s", "B", "B"]
    assert [st.value.b.value for st in stores] == [3.0, 2.0, 3.0]  # the default, then 2.0, 3.0
    loops = [x for x in walk_stmts(f.kernels[0].body) if isinstance(x, N.For)]
    assert [lp.extent.value for lp in loops] == [256, 128, 128]
    assert stores[1].loc.file == __file__  # the macro's own lines


def test_macro_builds_a_cubin(tmp_path):
    @T.prim_func
    def g(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            twice(A, B, 1024)

    assert tilecute.build_cubin(g, "sm_90a", out_dir=str(tmp_path)).kernel_names


@T.macro
def returns_value(x):
    return x + 1


@T.macro
def returns_early(x, flag):
    if flag:
        return x
    return x + 1


@T.macro
def tile_of(t, width):
    """TileLang's macros return values: a tuple of expressions."""
    g = t // width
    return g, t - g * width


@T.macro
def made_here(init):
    return T.alloc_var(T.float32, init=init)


@T.macro
def row_of(S, r):
    return S[r, :]


def test_macro_return_values_are_bound_where_assigned(tmp_path):
    @T.prim_func
    def f(A: T.Tensor((4, 64), "float32"), B: T.Tensor((4, 64), "float32")):
        with T.Kernel(4, threads=64) as bx:
            S = T.alloc_shared((4, 64), "float32")
            T.copy(A, S)
            row, col = tile_of(bx * 64 + 5, 64)  # (bx, 5)
            total = made_here(1.0)
            total += returns_value(S[row, col])
            returns_value(col)  # a value dropped, as Python drops it
            S[row, col] = total
            r = row_of(S, row)
            T.copy(r, B[row, :])

    lets = {s.var.name: s for s in walk_stmts(f.kernels[0].body) if isinstance(s, N.Let)}
    assert {"row", "col", "g"} <= set(lets)
    assert tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_macro_errors_name_the_macro():
    # a return in a branch decided while parsing is TileLang's (its macro is traced as
    # Python): flag=True returns x; on a runtime flag it is named
    @T.prim_func
    def h0(A: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16) as bx:
            v = returns_early(bx, True)
            A[0] = v
    assert "v = bx" in h0.script() and "bx + 1" not in h0.script()
    with pytest.raises(FrontendError, match="T.macro 'returns_early' returns from inside a branch "
                                            "on the runtime value `flag`"):
        @T.prim_func
        def h(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=16) as bx:
                v = returns_early(bx, bx > 0)
                A[0] = v
    with pytest.raises(FrontendError, match="T.macro 'scaled_copy' returns no value to assign"):
        @T.prim_func
        def h2(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=16) as bx:
                v = scaled_copy(A, A, 16)
    with pytest.raises(FrontendError, match=r"T.macro 'scaled_copy': missing a required argument: 'n'"):
        @T.prim_func
        def k(A: T.Tensor((16,), "float32")):
            with T.Kernel(1, threads=16) as bx:
                scaled_copy(A, A)
    with pytest.raises(TypeError, match="inlined by @T.prim_func"):
        scaled_copy(1, 2, 3)
    with pytest.raises(ValueError, match="hygienic=False"):
        T.macro(hygienic=False)


@T.macro
def qk(K, Q_s, K_s, S, k, bn, h, b):
    T.copy(K[b, k * bn:(k + 1) * bn, h, :], K_s)
    T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullRow)


@T.macro
def online_softmax(S, m, m_prev, alpha, l, l_step, scale, bm, bn):
    T.copy(m, m_prev)
    T.reduce_max(S, m, dim=1, clear=False)
    for i in T.Parallel(bm):
        alpha[i] = T.exp2((m_prev[i] - m[i]) * scale)
    for i, j in T.Parallel(bm, bn):
        S[i, j] = T.exp2(S[i, j] * scale - m[i] * scale)
    T.reduce_sum(S, l_step, dim=1)
    for i in T.Parallel(bm):
        l[i] = l[i] * alpha[i] + l_step[i]


def attention_with_macros(seq, heads=2, dim=64, bm=128, bn=64):
    """Attention as TileLang's examples write it, with macros (sequence a multiple of bn)."""
    scale = dim ** -0.5 * 1.4426950408889634
    shape = (1, seq, heads, dim)

    @T.prim_func
    def attn(Q: T.Tensor(shape, "float16"), K: T.Tensor(shape, "float16"),
             V: T.Tensor(shape, "float16"), O: T.Tensor(shape, "float16")):
        with T.Kernel(T.ceildiv(seq, bm), heads, 1, threads=256) as (bx, h, b):
            Q_s = T.alloc_shared((bm, dim), "float16")
            K_s = T.alloc_shared((bn, dim), "float16")
            V_s = T.alloc_shared((bn, dim), "float16")
            S = T.alloc_fragment((bm, bn), "float")
            P = T.alloc_fragment((bm, bn), "float16")
            acc = T.alloc_fragment((bm, dim), "float")
            m = T.alloc_fragment((bm,), "float")
            m_prev = T.alloc_fragment((bm,), "float")
            alpha = T.alloc_fragment((bm,), "float")
            l = T.alloc_fragment((bm,), "float")
            l_step = T.alloc_fragment((bm,), "float")
            T.copy(Q[b, bx * bm:(bx + 1) * bm, h, :], Q_s)
            T.fill(acc, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float"))
            for k in T.Pipelined(T.ceildiv(seq, bn), num_stages=2):
                qk(K, Q_s, K_s, S, k, bn, h, b)
                online_softmax(S, m, m_prev, alpha, l, l_step, scale, bm, bn)
                for i, j in T.Parallel(bm, dim):
                    acc[i, j] *= alpha[i]
                T.copy(S, P)
                T.copy(V[b, k * bn:(k + 1) * bn, h, :], V_s)
                T.gemm(P, V_s, acc, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(bm, dim):
                acc[i, j] /= l[i]
            T.copy(acc, O[b, bx * bm:(bx + 1) * bm, h, :])
    return attn


def test_attention_with_macros_builds(tmp_path):
    assert tilecute.build_cubin(attention_with_macros(512), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_attention_with_macros_matches_torch():
    import torch

    q, k, v = (torch.randn(1, 512, 2, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty_like(q)
    tilecute.compile(attention_with_macros(512))(q, k, v, o)
    ref = torch.nn.functional.scaled_dot_product_attention(
        *(x.transpose(1, 2).float() for x in (q, k, v))).transpose(1, 2)
    torch.testing.assert_close(o.float(), ref, atol=4e-3, rtol=4e-3)


@T.macro
def apply_to(x, fn):
    return fn(x)


def test_a_lambda_passed_to_a_macro_is_inlined_where_called(tmp_path):
    offset = 3.0

    @T.prim_func
    def lam(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as _:
            for i in T.Parallel(64):
                B[i] = apply_to(A[i], lambda v: v * 2.0 + offset)

    stores = [s for s in walk_stmts(lam.kernels[0].body) if isinstance(s, N.Store)]
    assert [s.buffer for s in stores] == ["B"]
    assert isinstance(stores[0].value, T.PrimExpr)
    assert tilecute.build_cubin(lam, "sm_90a", out_dir=str(tmp_path)).kernel_names
