"""The argument audit of TileLang 0.1.15's ``T.*`` surface (notes: docs/ir.md, "TileLang's
forms"; the table: /work/notes/helperR_surface.md): where 0.1.15 reordered a form's
positional arguments or added one, tilecute binds the call as 0.1.15 does (and as 0.1.13
did when the call's argument at the telling position is 0.1.13's kind), honors the new
argument or refuses it by name.  The programs are written as TileLang programs; their
TileLang 0.1.15 lowering (checked by hand) is quoted where it matters."""

import inspect

import pytest

import tilecute
import tilecute as tilelang
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.language import FrontendError
from tilecute.transform.pipeline import lower


def _stmts(func, kind):
    out = []

    def walk(body):
        for s in body:
            if isinstance(s, kind):
                out.append(s)
            for field in ("body", "then", "orelse"):
                inner = getattr(s, field, None)
                if isinstance(inner, tuple):
                    walk(inner)
    for k in func.kernels:
        walk(k.body)
    return out


def _positional(form):
    return [p.name for p in T.FORMS[form].signature.parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


# ---- the positional orders are 0.1.15's ------------------------------------------------------
# (tilelang/cuda/language/gemm_op.py, tilelang/language/loop.py, reduce_op.py, TVM's
# alloc_buffer, customize.view, as installed by TileLang 0.1.15)
TILELANG_0115 = {
    "gemm": ["A", "B", "C", "transpose_A", "transpose_B", "policy", "clear_accum", "mbar",
             "annotations"],
    "gemm_sp": ["A_sparse", "E", "B", "C", "transpose_A", "transpose_E", "transpose_B",
                "policy", "clear_accum", "wg_wait", "annotations"],
    "Pipelined": ["start", "stop", "num_stages", "order", "stage", "annotations"],
    "Persistent": ["domain", "wave_size", "index", "group_size", "num_stages"],
    "reduce": ["buffer", "out", "reduce_type", "dim", "clear", "batch", "annotations"],
    "reduce_max": ["buffer", "out", "dim", "clear", "batch", "nan_propagate", "annotations"],
    "alloc_buffer": ["shape", "dtype", "scope", "annotations"],
    "view": ["src", "shape", "dtype", "strides"],
}


@pytest.mark.parametrize("form", sorted(TILELANG_0115))
def test_positional_order_is_tilelang_0_1_15s(form):
    assert _positional(form) == TILELANG_0115[form]


def test_kernel_takes_cluster_dims():
    assert "cluster_dims" in inspect.signature(T.Kernel).parameters


# ---- T.gemm: 0.1.15's (..., clear_accum, mbar, annotations), 0.1.13's (..., k_pack, mbar) --------
@tilelang.jit(out_idx=[2])
def gemm_positional_0115(M=128, N=128, K=64, bm=64, bn=64, bk=32):
    """0.1.15's positional T.gemm (clear_accum a condition, mbar None) inside a
    T.Pipelined given positionally up to its (empty) annotations."""
    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            a_s = T.alloc_shared((bm, bk), T.float16)
            b_s = T.alloc_shared((bn, bk), T.float16)
            acc = T.alloc_fragment((bm, bn), T.float32)
            for k in T.Pipelined(0, T.ceildiv(K, bk), 2, None, None, {}):
                T.copy(A[by * bm, k * bk], a_s)
                T.copy(B[bx * bn, k * bk], b_s)
                T.gemm(a_s, b_s, acc, False, True, T.GemmWarpPolicy.FullRow, k == 0, None)
            T.copy(acc, C[by * bm, bx * bn])
    return main


def _gemm_call(call):
    return T.from_script(
        "@T.prim_func\n"
        "def g(A: T.Tensor((64, 32), 'float16'), B: T.Tensor((64, 32), 'float16'),"
        " C: T.Tensor((64, 64), 'float32')):\n"
        "    with T.Kernel(1, threads=128) as bx:\n"
        "        As = T.alloc_shared((64, 32), 'float16')\n"
        "        Bs = T.alloc_shared((64, 32), 'float16')\n"
        "        c = T.alloc_fragment((64, 64), 'float32')\n"
        "        T.copy(A, As)\n"
        "        T.copy(B, Bs)\n"
        f"        {call}\n"
        "        T.copy(c, C)\n")


def test_gemm_positional_orders_of_both_releases():
    kw = _gemm_call("T.gemm(As, Bs, c, transpose_B=True, policy=T.GemmWarpPolicy.FullRow, "
                    "clear_accum=True)").script()
    # 0.1.15: the eighth is mbar, the ninth annotations
    assert _gemm_call("T.gemm(As, Bs, c, False, True, T.GemmWarpPolicy.FullRow, True, None)"
                      ).script() == kw
    assert _gemm_call("T.gemm(As, Bs, c, False, True, T.GemmWarpPolicy.FullRow, True, None, {})"
                      ).script() == kw
    # 0.1.13: an int eighth is k_pack (1 or 2: the same GEMM on NVIDIA), then mbar
    assert _gemm_call("T.gemm(As, Bs, c, False, True, T.GemmWarpPolicy.FullRow, True, 2, None)"
                      ).script() == kw
    with pytest.raises(FrontendError, match=r"T.gemm: mbar=buffer 'c' is not supported"):
        _gemm_call("T.gemm(As, Bs, c, False, True, T.GemmWarpPolicy.FullRow, True, c)")
    with pytest.raises(FrontendError, match=r"T.gemm: annotations=\{'use_2cta': 1\}"):
        _gemm_call("T.gemm(As, Bs, c, False, True, T.GemmWarpPolicy.FullRow, True, None, "
                   "{'use_2cta': 1})")
    with pytest.raises(FrontendError, match=r"T.gemm: mbar=buffer 'c'"):  # 0.1.13: k_pack, then mbar
        _gemm_call("T.gemm(As, Bs, c, False, True, T.GemmWarpPolicy.FullRow, True, 1, c)")


def test_gemm_positional_0115_program():
    func = gemm_positional_0115.get_tir()
    (g,) = _stmts(func, N.Gemm)
    assert g.transpose_b and not g.transpose_a and g.policy == "FullRow"
    assert isinstance(g.clear_accum, N.Expr)  # the program's `k == 0`
    (loop,) = [s for s in _stmts(func, N.For) if s.kind == "pipelined"]
    assert loop.num_stages == 2
    gemm_positional_0115().ensure_cubin()


# ---- T.gemm_sp: 0.1.15's (..., clear_accum, wg_wait, annotations) ---------------------------------
def _gemm_sp_call(call):
    return T.from_script(
        "@T.prim_func\n"
        "def g(A: T.Tensor((64, 32), 'float16'), E: T.Tensor((64, 8), 'uint8'),"
        " B: T.Tensor((64, 64), 'float16'), C: T.Tensor((64, 64), 'float32')):\n"
        "    with T.Kernel(1, threads=128) as bx:\n"
        "        As = T.alloc_shared((64, 32), 'float16')\n"
        "        Es = T.alloc_shared((64, 8), 'uint8')\n"
        "        Bs = T.alloc_shared((64, 64), 'float16')\n"
        "        c = T.alloc_fragment((64, 64), 'float32')\n"
        "        T.copy(A, As)\n"
        "        T.copy(E, Es)\n"
        "        T.copy(B, Bs)\n"
        f"        {call}\n"
        "        T.copy(c, C)\n")


def test_gemm_sp_positional_orders():
    kw = _gemm_sp_call("T.gemm_sp(As, Es, Bs, c, clear_accum=True)").script()
    pre = "T.gemm_sp(As, Es, Bs, c, False, False, False, T.GemmWarpPolicy.Square, True"
    assert _gemm_sp_call(pre + ", 0)").script() == kw             # 0.1.15 wg_wait=0
    assert _gemm_sp_call(pre + ", 0, None)").script() == kw       # + annotations
    assert _gemm_sp_call(pre + ", 1, 0, None)").script() == kw    # 0.1.13 k_pack, wg_wait
    # ten positional arguments, the tenth not 0: 0.1.15's wg_wait or 0.1.13's k_pack
    with pytest.raises(FrontendError, match="wg_wait in TileLang 0.1.15 and k_pack in 0.1.13"):
        _gemm_sp_call(pre + ", 1)")


# ---- T.Pipelined: 0.1.15's sixth positional is annotations, 0.1.13's sync -------------------
def _loop(header):
    return T.from_script(
        "@T.prim_func\n"
        "def p(A: T.Tensor((256, 64), 'float16'), B: T.Tensor((64, 64), 'float16')):\n"
        "    with T.Kernel(1, threads=128) as bx:\n"
        "        s = T.alloc_shared((64, 64), 'float16')\n"
        "        f = T.alloc_fragment((64, 64), 'float16')\n"
        "        T.clear(f)\n"
        f"        for k in {header}:\n"
        "            T.copy(A[k * 64, 0], s)\n"
        "            for i, j in T.Parallel(64, 64):\n"
        "                f[i, j] += s[i, j]\n"
        "        T.copy(f, B)\n")


def test_pipelined_positional_annotations():
    base = _loop("T.Pipelined(4, num_stages=2)").script()
    assert _loop("T.Pipelined(0, 4, 2, None, None, {})").script() == base   # 0.1.15
    assert _loop("T.Pipelined(0, 4, 2, None, None, [], [])").script() == base  # 0.1.13 sync, group
    with pytest.raises(FrontendError, match=r"T.Pipelined: annotations=\{'tl_x': 1\}"):
        _loop("T.Pipelined(0, 4, 2, None, None, {'tl_x': 1})")


# ---- T.reduce: 0.1.15's seventh is annotations ({"nan_propagate": True} rides there) --------
@tilelang.jit(out_idx=[1])
def rowmax_nan_ann(M=64, N=128, dtype=T.float16, form="annotations"):
    """Row max that propagates NaN, written as 0.1.15's generic T.reduce with the
    nan_propagate annotation (TileLang 0.1.15: MaxOpNan, __hmax_nan)."""
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), O: T.Tensor((M,), dtype)):
        with T.Kernel(1, threads=128) as _:
            f = T.alloc_fragment((M, N), dtype)
            o = T.alloc_fragment((M,), dtype)
            T.copy(A, f)
            if form == "annotations":
                T.reduce(f, o, "max", 1, True, 1, {"nan_propagate": True})
            elif form == "keyword":
                T.reduce_max(f, o, 1, annotations={"nan_propagate": True})
            else:  # 0.1.13's positional nan_propagate
                T.reduce(f, o, "max", 1, True, 1, True)
            T.copy(o, O)
    return main


@pytest.mark.parametrize("form", ["annotations", "keyword", "legacy"])
def test_reduce_nan_propagate_annotation(form):
    (r,) = _stmts(rowmax_nan_ann.get_tir(form=form), N.Reduce)
    assert r.kind == "max" and r.dim == 1 and r.nan_propagate


def test_reduce_nan_propagate_annotation_builds():
    rowmax_nan_ann().ensure_cubin()


@pytest.mark.parametrize("form", ["annotations", "keyword", "legacy"])
def test_reduce_nan_propagate_takes_a_float32_out(form):
    # 0.1.15's ReduceOp refused a float32 out; TileLang HEAD takes it (max.NaN.f32 here)
    (r,) = _stmts(rowmax_nan_ann.get_tir(dtype=T.float32, form=form), N.Reduce)
    assert r.kind == "max" and r.nan_propagate


# ---- T.Kernel(cluster_dims=): 0.1.15's cluster launch; T.get_cluster_* ----------------------
@tilelang.jit(out_idx=[1])
def cluster_ids(G=8, C=2):
    """Each block writes its cluster index, the clusters along x and the blocks per cluster
    (TileLang 0.1.15: ``blockIdx.x >> 1``, 4, 2 for G=8, C=2)."""
    @T.prim_func
    def main(X: T.Tensor((G, 4), T.int32), Y: T.Tensor((G, 4), T.int32)):
        with T.Kernel(G, threads=32, cluster_dims=C) as bx:
            tx = T.get_thread_binding()
            if tx == 0:
                Y[bx, 0] = T.get_cluster_id(0)
                Y[bx, 1] = T.get_cluster_extent(0)
                Y[bx, 2] = T.get_cluster_size()
                Y[bx, 3] = X[bx, 3] + bx
    return main


def test_kernel_cluster_dims_is_the_cluster_launch():
    (k,) = cluster_ids.get_tir().kernels
    assert tuple(k.cluster) == (2, 1, 1)
    text = cluster_ids.get_tir().script()
    assert "bx // 2" in text and "= 4" in text and "= 2" in text
    assert cluster_ids.get_tir(C=1).kernels[0].cluster is None
    assert "bx // " not in cluster_ids.get_tir(C=1).script()


def test_kernel_cluster_dims_builds():
    cluster_ids().ensure_cubin()


def test_kernel_cluster_dims_and_cluster_conflict():
    with pytest.raises(FrontendError, match="cluster_dims= and cluster= are the same"):
        T.from_script("@T.prim_func\n"
                      "def k(A: T.Tensor((4,), 'float32')):\n"
                      "    with T.Kernel(4, threads=32, cluster_dims=2, cluster=2) as bx:\n"
                      "        A[bx] = 1.0\n")


# ---- T.Persistent(num_stages=): refused (0.1.15 pipelines the wave loop) --------------------
def _persistent(args):
    return T.from_script(
        "@T.prim_func\n"
        "def k(A: T.Tensor((16,), 'float32')):\n"
        "    with T.Kernel(4, threads=32) as bx:\n"
        f"        for (i,) in T.Persistent([16], 4, bx{args}):\n"
        "            A[i] = 1.0\n")


def test_persistent_num_stages():
    assert _persistent(", 8, 0").script() == _persistent("").script()
    with pytest.raises(FrontendError, match=r"T.Persistent: num_stages=2 is not supported"):
        _persistent(", 8, 2")
    with pytest.raises(FrontendError, match=r"T.Persistent: annotations=\{'x': 1\}"):
        _persistent(", annotations={'x': 1}")


# ---- T.view(strides=), T.alloc_buffer(shape, dtype, scope) ----------------------------------
@tilelang.jit(out_idx=[1])
def view_dense_strides(N=64, strides=(1,)):
    """A shared tile viewed flat with explicit (dense) strides, doubled into a shared buffer
    TVM's alloc_buffer allocates with a positional scope."""
    @T.prim_func
    def main(A: T.Tensor((N, N), T.float16), B: T.Tensor((N * N,), T.float16)):
        with T.Kernel(1, threads=128) as _:
            s = T.alloc_shared((N, N), T.float16)
            q = T.alloc_buffer((N * N,), T.float16, "shared.dyn")
            T.copy(A, s)
            v = T.view(s, (N * N,), strides=strides)
            for i in T.Parallel(N * N):
                q[i] = v[i] * 2
            T.copy(q, B)
    return main


def test_view_strides_and_alloc_buffer_scope():
    func = view_dense_strides.get_tir()
    allocs = {a.buffer.name: a for a in _stmts(func, N.Allocate)}
    assert allocs["q"].buffer.scope == "shared"
    assert allocs["v"].view_of == "s"
    with pytest.raises(FrontendError, match=r"T.view: 'v': strides=\(2,\) is not supported"):
        view_dense_strides.get_tir(strides=(2,))


def test_view_dense_strides_builds():
    view_dense_strides().ensure_cubin()


# ---- T.fmul: __fmul_rn, never contracted ----------------------------------------------------
@tilelang.jit(out_idx=[3])
def fmul_then_add(N=1024):
    """``T.fmul(a, b) + c`` (TileLang 0.1.15: ``__fmul_rn(a, b) + c``: two roundings, no
    FMA)."""
    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32),
             Cc: T.Tensor((N,), T.float32), D: T.Tensor((N,), T.float32)):
        with T.Kernel(T.ceildiv(N, 256), threads=256) as bx:
            for i in T.Parallel(256):
                D[bx * 256 + i] = T.fmul(A[bx * 256 + i], B[bx * 256 + i]) + Cc[bx * 256 + i]
    return main


def test_fmul_is_an_ieee_multiply():
    src = fmul_then_add().get_kernel_source()
    assert 'tcmath.ieee_mul(' in src and '"rn"' in src
    fmul_then_add().ensure_cubin()
    with pytest.raises(FrontendError, match="T.fmul only supports floating-point inputs"):
        T.from_script("@T.prim_func\n"
                      "def k(A: T.Tensor((4,), 'int32')):\n"
                      "    with T.Kernel(1, threads=32) as bx:\n"
                      "        A[0] = T.fmul(A[1], A[2])\n")


def test_ignore_loop_partition_is_its_condition():
    text = T.from_script("@T.prim_func\n"
                         "def k(A: T.Tensor((4,), 'float32')):\n"
                         "    with T.Kernel(1, threads=32) as bx:\n"
                         "        if T.ignore_loop_partition(A[0] > 0.0):\n"
                         "            A[1] = 1.0\n").script()
    assert "if A[0] > T.float32(0.0):" in text


# ---- parameter annotations: TVM's spellings of the defaults mean the default ---------------
def _param(ann):
    return T.from_script(f"@T.prim_func\ndef k(A: {ann}, B: T.Tensor((64,), 'float32')):\n"
                         "    with T.Kernel(1, threads=64) as bx:\n"
                         "        for i in T.Parallel(64):\n"
                         "            B[i] = T.cast(A[i], 'float32')\n")


def test_parameter_default_spellings():
    base = _param("T.Tensor((64,), 'float16')").script()
    for ann in ("T.Buffer((64,), 'float16', elem_offset=0)",
                "T.Buffer((64,), 'float16', axis_separators=[])",
                "T.Buffer((64,), 'float16', buffer_type='default')",
                "T.StridedTensor((64,), (1,), 'float16', data=None)"):
        assert _param(ann).script().replace("T.StridedTensor((64,), (1,), ", "T.Tensor((64,), ") \
            .replace("T.Buffer(", "T.Tensor(") == base.replace("T.Buffer(", "T.Tensor("), ann
    for ann, arg in (("T.Buffer((64,), 'float16', elem_offset=2)", "elem_offset=2"),
                     ("T.StridedTensor((64,), (1,), 'float16', data=3)", "data=3")):
        with pytest.raises(FrontendError, match=rf"parameter 'A': T.\w+\({arg}\) is not supported"):
            _param(ann)


# ---- T.prim_func(func=None, *, eager_jit=False): 0.1.15's decorator with parentheses -----------
def test_prim_func_with_parentheses():
    text = ("@T.prim_func{}\n"
            "def k(A: T.Tensor((4,), 'float32')):\n"
            "    with T.Kernel(1, threads=32) as bx:\n"
            "        A[0] = 1.0\n")
    assert T.from_script(text.format("()")).script() == T.from_script(text.format("")).script()

    def body(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            A[0] = 1.0
    assert T.prim_func()(body).script() == T.prim_func(body).script()
    with pytest.raises(FrontendError, match=r"T.prim_func\(eager_jit=True\) is not supported"):
        T.prim_func(eager_jit=True)(body)


# ---- 0.1.15's other new names: refused by name ------------------------------------------------
# (T.thread_return is honored in `if` branches of the kernel body: test_unseen_programs36)
@pytest.mark.parametrize("name,call", [
    ("gemm_blockscaled", "T.gemm_blockscaled(s, s, s, s, s, k_start=0, sf_a_granularity_k=32, "
                         "sf_b_granularity_k=32)"),
    ("annotate_ws_pipeline_depth", "T.annotate_ws_pipeline_depth({s: 2})"),
    ("ptx_fence_barrier_init", "T.ptx_fence_barrier_init()"),
    ("get_active_lane_mask", "T.evaluate(T.get_active_lane_mask('bool', 0, 4))"),
])
def test_new_tilelang_forms_are_refused_by_name(name, call):
    with pytest.raises(FrontendError, match=rf"T.{name} is a TileLang form that tilecute "
                                            "does not support"):
        T.from_script("@T.prim_func\n"
                      "def k(A: T.Tensor((4,), 'float32')):\n"
                      "    with T.Kernel(1, threads=32) as bx:\n"
                      "        s = T.alloc_shared((4,), 'float32')\n"
                      f"        {call}\n")


# ---- GPU ----------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gemm_positional_0115_on_gpu():
    import torch

    a = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    b = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    c = gemm_positional_0115()(a, b)
    torch.testing.assert_close(c, a.float() @ b.float().T, atol=1e-2, rtol=1e-3)


@pytest.mark.gpu
def test_reduce_nan_annotation_on_gpu():
    import torch

    x = torch.randn(64, 128, device="cuda", dtype=torch.float16)
    x[3, 7] = float("nan")
    x[40, 127] = float("nan")
    y = rowmax_nan_ann()(x)
    torch.testing.assert_close(y, x.float().amax(dim=1).half(), equal_nan=True)
    assert torch.isnan(y[3]) and torch.isnan(y[40]) and not torch.isnan(y[0])


@pytest.mark.gpu
def test_cluster_ids_on_gpu():
    import torch

    x = torch.arange(32, device="cuda", dtype=torch.int32).reshape(8, 4)
    y = cluster_ids()(x)
    bx = torch.arange(8, device="cuda", dtype=torch.int32)
    want = torch.stack([bx // 2, torch.full_like(bx, 4), torch.full_like(bx, 2), x[:, 3] + bx], 1)
    assert torch.equal(y, want)


@pytest.mark.gpu
def test_fmul_then_add_on_gpu():
    import torch

    a, b, c = (torch.randn(1024, device="cuda", dtype=torch.float32) for _ in range(3))
    d = fmul_then_add()(a, b, c)
    # two roundings (the product, then the sum), as torch's separate kernels do
    assert torch.equal(d, (a * b) + c)


@pytest.mark.gpu
def test_view_dense_strides_on_gpu():
    import torch

    a = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(view_dense_strides()(a), (a * 2).flatten())
