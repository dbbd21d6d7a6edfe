"""A thirty-first set of programs in TileLang's idioms (tests/unseen_programs31.py): TileLang
0.1.15's eager / lazy JIT surface and kernel objects -- eager kernels called with tensors
(T.const / T.dynamic / signature-annotated dims, T.empty outputs, runtime scalars, one kernel
per shape or dtype), out_idx as int / list / negative, the same prim_func compiled twice,
T.StridedTensor views, helpers from another module, functools.partial and keyword-only
factories.  CPU: each builds to an sm_90a cubin; the kernel objects and the generated source
are checked.  GPU: each matches torch (run: pytest -q -m gpu tests/test_unseen_programs31.py)."""

import re
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parent))
import tilecute  # noqa: E402
import tilecute.language as T  # noqa: E402
import unseen31_helpers as H  # noqa: E402
import rounds  # noqa: E402
import unseen_programs31 as P  # noqa: E402
from tilecute.language import FrontendError  # noqa: E402

h, f32, bf = torch.float16, torch.float32, torch.bfloat16


def _z(*shape, dtype=f32):
    return torch.zeros(*shape, dtype=dtype)


# name -> a builder on CPU tensors / shapes (the kernel objects the tests read)
BUILD = {
    "eager_gemm": lambda: P.eager_gemm.compile(_z(256, 128, dtype=h), _z(128, 192, dtype=h)),
    "eager_rmsnorm": lambda: P.eager_rmsnorm.compile(_z(100, 256, dtype=h), _z(256, dtype=h)),
    "eager_softmax_sig": lambda: P.eager_softmax_sig.compile(_z(37, 256)),
    "eager_dtype_cast": lambda: P.eager_dtype_cast.compile(_z(1000, dtype=bf), in_dtype="bfloat16"),
    "eager_scaled_add": lambda: P.eager_scaled_add.compile(_z(33, 65), _z(33, 65), 1.0, 2.0),
    "eager_two_outputs": lambda: P.eager_two_outputs.compile(_z(64, 128)),
    "eager_cumsum_rows": lambda: P.eager_cumsum_rows.compile(_z(16, 64)),
    "eager_macro_softmax": lambda: P.eager_macro_softmax.compile(_z(64, 128), scale=0.5),
    "eager_strided_rows": lambda: P.eager_strided_rows.compile(_z(64, 128)[:, :96]),
    "eager_strided_dynamic": lambda: P.eager_strided_dynamic.compile(_z(64, 100)[:, :96]),
    "eager_shape_from_tensor": lambda: P.eager_shape_from_tensor.compile(_z(16, 256, dtype=bf), _z(256)),
    "eager_sig_shape_rows": lambda: P.eager_sig_shape_rows.compile(_z(16, 128, dtype=h)),
    "eager_transpose_tuple_consts": lambda: P.eager_transpose_tuple_consts.compile(_z(64, 96, dtype=h)),
    "eager_masked_tail_scale": lambda: P.eager_masked_tail_scale.compile(_z(1000), 300, 2.0),
    "eager_strided_both": lambda: P.eager_strided_both.compile(_z(16, 128)[:, ::2]),
    "eager_qkv_slice_rmsnorm": lambda: P.eager_qkv_slice_rmsnorm.compile(_z(2, 32, 3 * 64, dtype=h)[:, :, :64]),
    "eager_flash_fwd": lambda: P.eager_flash_fwd.compile(*(_z(256, 64, dtype=h) for _ in range(3))),
    "eager_residual_inplace": lambda: P.eager_residual_inplace.compile(_z(64, 256, dtype=h), _z(64, 256, dtype=h)),
    "log_softmax_rows": lambda: P.log_softmax_rows(64, 256),
    "layernorm_out_int": lambda: P.layernorm_out_int(64, 256),
    "split_gate_up": lambda: P.split_gate_up(64, 128),
    "silu_mul_two_outputs": lambda: P.silu_mul_two_outputs(16, 256),
    "fixed_axpby": lambda: tilecute.compile(H.fixed_axpby, out_idx=-1),
    "eager_rowscale_sig": lambda: H.eager_rowscale_sig.compile(_z(10, 128), 2.0),
    "gemm_prim": lambda: tilecute.compile(P.gemm_prim(128, 128, 64), out_idx=-1),
    "strided_rows_copy": lambda: P.strided_rows_copy(64, 96, 128),
    "transposed_view_sum": lambda: P.transposed_view_sum(64, 128),
    "helper_rowscale": lambda: P.helper_rowscale(64, 128),
    "tile_copy_macro": lambda: P.tile_copy_macro(64, 128),
    "attn_scores": lambda: P.attn_scores(batch=1, heads=2, seq=128, dim=64),
    "attn_scores_fixed_scale": lambda: P.attn_scores_fixed_scale(batch=1, heads=2, seq=128, dim=64),
    "chunk_scan": lambda: P.chunk_scan(B=4, L=256),
    "gemm_bias_relu": lambda: P.gemm_bias_relu(128, 128, 64),
    "gemm_bias_linear": lambda: P.gemm_bias_linear(128, 128, 64),
}


_arch = rounds.use_arch("TILECUTE_ARCH")
_body = rounds.kernel_body


def _params(kernel):
    return [(p.name, p.dtype, list(p.shape)) for p in kernel.params]


def test_every_program_is_built():
    defined = {n for n, f in vars(P).items() if hasattr(f, "get_kernel_source") or hasattr(f, "compile")
               or (callable(f) and n in ("gemm_prim",))}
    defined -= {"tilecute", "T", "H", "functools", "jit_out_last"}
    assert sorted(defined | {"attn_scores_fixed_scale", "gemm_bias_linear", "fixed_axpby",
                                       "eager_rowscale_sig"}) == sorted(BUILD)


@pytest.mark.parametrize("name", sorted(BUILD))
def test_program_builds_a_cubin(name):
    assert Path(BUILD[name]().ensure_cubin()).stat().st_size > 0


# ---- eager kernels: binding, one kernel per shape / dtype, errors ------------------------
def test_eager_shapes_bind_from_the_call():
    k = BUILD["eager_gemm"]()
    assert _params(k) == [("A", "float16", [256, 128]), ("B", "float16", [128, 192]), ("C", "float16", [256, 192])]
    k2 = P.eager_gemm.compile(_z(64, 32, dtype=h), _z(32, 64, dtype=h))
    assert k2 is not k and _params(k2)[2] == ("C", "float16", [64, 64])
    assert P.eager_gemm.compile(_z(256, 128, dtype=h), _z(128, 192, dtype=h)) is k
    assert "T.gemm(A_s, B_s, C_f)" in _body(k)
    with pytest.raises(ValueError, match=r"T.const K is 128 by 'A' \(shape 1\) but 64 by 'B'"):
        P.eager_gemm.compile(_z(256, 128, dtype=h), _z(64, 192, dtype=h))


def test_dynamic_dims_share_one_kernel():
    a = BUILD["eager_rmsnorm"]()
    assert P.eager_rmsnorm.compile(_z(7, 256, dtype=h), _z(256, dtype=h)) is a
    assert _params(a) == [("X", "float16", ["M", 256]), ("W", "float16", [256]), ("Y", "float16", ["M", 256])]
    assert "M: cutlass.Int32" in a.get_kernel_source()
    # a dim annotated in the signature with a module-level T.dynamic
    s = BUILD["eager_softmax_sig"]()
    assert P.eager_softmax_sig.compile(_z(5, 256)) is s
    assert _params(s) == [("X", "float32", ["ROWS", 256]), ("Y", "float32", ["ROWS", 256])]
    with pytest.raises(ValueError, match=r"eager_softmax_sig: 'X' is declared with shape \('\*', 256\).*\(37, 128\)"):
        P.eager_softmax_sig.compile(_z(37, 128))


def test_dtype_keyword_gives_one_kernel_each():
    k16 = P.eager_dtype_cast.compile(_z(1000, dtype=h))
    kbf = BUILD["eager_dtype_cast"]()
    assert k16 is not kbf
    assert _params(k16)[0] == ("X", "float16", [1000]) and _params(kbf)[0] == ("X", "bfloat16", [1000])
    assert "cutlass.BFloat16" in kbf.get_kernel_source() and "cutlass.BFloat16" not in k16.get_kernel_source()


def test_calls_with_wrong_tensors_name_the_kernel_and_argument():
    with pytest.raises(ValueError, match=r"eager_gemm: argument 'A': expected dtype float16, got float32"):
        P.eager_gemm(_z(256, 128), _z(128, 192, dtype=h))
    with pytest.raises(ValueError, match=r"eager_gemm: argument 'A': expected a contiguous \(row-major\) tensor"):
        P.eager_gemm(_z(128, 256, dtype=h).t(), _z(128, 192, dtype=h))
    k = BUILD["layernorm_out_int"]()
    with pytest.raises(ValueError, match=r"main: argument 'X': expected dtype float16, got float32"):
        k(_z(64, 256))
    with pytest.raises(ValueError, match=r"main: argument 'X': expected a contiguous"):
        k(_z(256, 64, dtype=h).t())


def test_runtime_scalars_and_two_outputs():
    k = BUILD["eager_scaled_add"]()
    assert [(a.name, a.kind) for a in k.abi.args] == [("X", "tensor"), ("Y", "tensor"), ("alpha", "scalar"),
                                                     ("beta", "scalar"), ("Z", "tensor")]
    assert P.eager_scaled_add.compile(_z(33, 65), _z(33, 65), -3.0, 0.25) is k
    assert "= alpha * tc_ld2 + beta * tc_ld3" in _body(k)  # the runtime scalars, not constants
    t = BUILD["eager_two_outputs"]()
    assert [p[0] for p in _params(t)] == ["X", "RowMax", "RowSum"]


def test_strided_views():
    k = BUILD["eager_strided_rows"]()  # ld bound from the view's stride: 128
    assert "cute.make_layout((64, 96,), stride=(128, 1,))" in k.get_kernel_source()
    assert P.eager_strided_rows.compile(_z(64, 100)[:, :96]) is not k
    d = BUILD["eager_strided_dynamic"]()  # ld a runtime argument, no vector access along j
    assert P.eager_strided_dynamic.compile(_z(64, 128)[:, :96]) is d
    assert "stride=(ld, 1,)" in d.get_kernel_source() and "divby" not in _body(d).split("Y = ", 1)[0]
    s = BUILD["strided_rows_copy"]()
    assert "cute.make_layout((64, 96,), stride=(128, 1,))" in s.get_kernel_source()
    with pytest.raises(ValueError, match=r"main: argument 'X': expected strides\[0\] == 128, got 96"):
        s(_z(64, 96))
    # an odd leading dimension: no 4-wide access that would assume 16-byte rows
    # (Y, contiguous, is stored in vectors after the loads are staged; X is read element-wise)
    assert "X.iterator" not in _body(P.strided_rows_copy(64, 96, 97))
    c = BUILD["transposed_view_sum"]()  # a .t() view is what it takes; a row-major one is refused
    assert "stride=(1, 64,)" in c.get_kernel_source()
    with pytest.raises(ValueError, match=r"main: argument 'X': expected strides\[0\] == 1, got 128"):
        c(_z(64, 128))


def test_views_with_every_stride_bound():
    k = BUILD["eager_strided_both"]()  # every other column: strides (128, 2)
    assert "cute.make_layout((16, 64,), stride=(128, 2,))" in k.get_kernel_source()
    t = P.eager_strided_both.compile(_z(64, 16).t())  # a transpose: strides (1, 16)
    assert t is not k and "cute.make_layout((16, 64,), stride=(1, 16,))" in t.get_kernel_source()
    q = BUILD["eager_qkv_slice_rmsnorm"]()
    assert q.abi.args[0].strides == ("sb", "ss", 1)
    assert P.eager_qkv_slice_rmsnorm.compile(_z(2, 32, 2 * 64, dtype=h)[:, :, :64]) is q
    with pytest.raises(ValueError, match=r"eager_qkv_slice_rmsnorm: argument 'Q': expected strides\[2\] == 1"):
        P.eager_qkv_slice_rmsnorm(_z(2, 64, 32, dtype=h).transpose(1, 2))


def test_tensor_strides_keyword_is_refused_as_in_tilelang():
    # TileLang 0.1.15's T.Tensor(shape, dtype, data, scope) takes no strides= (T.StridedTensor does)
    def bad():
        @T.prim_func
        def main(X: T.Tensor((64, 64), T.float32, strides=(1, 64)), Y: T.Tensor((64,), T.float32)):
            with T.Kernel(1, threads=64) as bx:
                for i in T.Parallel(64):
                    Y[i] = X[i, 0]
        return main

    with pytest.raises(FrontendError, match=r"'main'.*parameter 'X': T.Tensor: got an unexpected keyword argument 'strides'"):
        bad()


def test_python_statements_read_a_declared_tensor():
    # `M, N = X.shape` and `T.empty(..., X.dtype)` after `X: T.Tensor(...)` (TileLang binds X
    # to the matched buffer there) were a NameError: the declarations never bound the name
    k = BUILD["eager_shape_from_tensor"]()
    assert _params(k) == [("X", "bfloat16", [16, 256]), ("W", "float32", [256]), ("Y", "bfloat16", [16, 256])]
    assert "/ cutlass.Float32(256.0)" in _body(k) or "* cutlass.Float32(0.00390625)" in _body(k)
    with pytest.raises(ValueError, match=r"T.const N is 256 by 'X' \(shape 1\) but 128 by 'W'"):
        P.eager_shape_from_tensor.compile(_z(16, 256, dtype=bf), _z(128))
    s = BUILD["eager_sig_shape_rows"]()  # a signature-annotated tensor's dims: SEQ stays symbolic
    assert _params(s) == [("X", "float16", ["SEQ", 128]), ("Y", "float16", ["SEQ", 128])]
    assert P.eager_sig_shape_rows.compile(_z(40, 128, dtype=h)) is s


def test_a_declaration_from_another_tensors_shape():
    # `R: T.Tensor(X.shape, X.dtype)`: TileLang's T.Tensor takes the buffer's shape Array
    k = BUILD["eager_residual_inplace"]()
    assert _params(k) == [("X", "float16", [64, 256]), ("R", "float16", [64, 256])]
    assert k.kernel.out_idx == []
    with pytest.raises(ValueError, match=r"T.const N is 256 by 'X' \(shape 1\) but 128 by 'R' \(shape 1\)"):
        P.eager_residual_inplace.compile(_z(64, 256, dtype=h), _z(64, 128, dtype=h))


def test_t_const_inline_and_one_call_each():
    # T.const inside a declaration, and `M, N = T.const("M"), T.const("N")`, were refused
    # ("T.const is a TileLang form that tilecute does not support"); TileLang takes both
    k = P.eager_shape_from_tensor.compile(M=8, N=128)
    assert _params(k) == [("X", "bfloat16", [8, 128]), ("W", "float32", [128]), ("Y", "bfloat16", [8, 128])]
    t = BUILD["eager_transpose_tuple_consts"]()
    assert _params(t) == [("X", "float16", [64, 96]), ("Y", "float16", [96, 64])]
    assert P.eager_transpose_tuple_consts.compile(M=64, N=96) is t


def test_python_statements_read_runtime_scalars():
    # `n_blocks = T.ceildiv(n_valid, block)` after `n_valid: T.int32` (and `scale * 0.5` of a
    # signature's `scale: T.float32`) were a NameError; they are the kernel's parameters
    k = BUILD["eager_masked_tail_scale"]()
    assert [(a.name, a.kind) for a in k.abi.args] == [("X", "tensor"), ("n_valid", "scalar"),
                                                     ("scale", "scalar"), ("Y", "tensor")]
    src = _body(k)
    assert "bx < (n_valid + 256 - 1) // 256 and g < n_valid" in src
    assert "scale * cutlass.Float32(0.5) + scale * cutlass.Float32(0.5)" in src
    assert P.eager_masked_tail_scale.compile(_z(1000), 7, -1.0) is k


def test_eager_body_calls_a_helper_modules_macro_chain():
    src = _body(BUILD["eager_flash_fwd"]())
    # scale (D ** -0.5, a Python statement of the body) times the helper module's LOG2E,
    # folded; the inner macro's exp2 over the scores after the row max
    assert "r[tc_q8] = cute.math.exp2((m_prev[tc_q8] - m[tc_q8]) * cutlass.Float32(0.18033688011112042))" in src
    assert "cute.math.exp2((acc_s[" in src and src.count("cutlass.Float32(0.18033688011112042)") == 2


def test_debug_root_path_on_an_eager_kernel(tmp_path):
    # TileLang's JITImpl.compile writes an eager kernel's source and program too; it was refused
    @tilecute.jit(debug_root_path=str(tmp_path / "dbg"))
    def halve(X, block: int = 64):
        N = T.const("N")
        X: T.Tensor((N,), T.float32)
        Y = T.empty((N,), T.float32)
        with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i] * 0.5
        return Y

    k = halve.compile(_z(256))
    assert (tmp_path / "dbg" / "tilelang_jit_kernel_halve.py").read_text().strip() == k.get_kernel_source().strip()
    assert "def halve(" in (tmp_path / "dbg" / "tilelang_jit_program_halve.py").read_text()


@tilecute.jit
def _empty_of_shape(X, block: int = 64):
    N = T.const("N")
    X: T.Tensor((N,), T.float32)
    Y = T.empty(X.shape, X.dtype)
    with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
        for i in T.Parallel(block):
            Y[bx * block + i] = X[bx * block + i]
    return Y


def test_empty_of_a_tensors_shape_is_refused_as_in_tilelang():
    # TileLang's T.empty takes a tuple or list; a buffer's .shape (a TVM Array) raises there
    with pytest.raises(FrontendError, match=r"_empty_of_shape.*T.empty for 'Y': the shape is a tuple or "
                                            r"list of dims, got DeclaredShape \[128\].*tuple\(A.shape\)"):
        _empty_of_shape.compile(_z(128))


# ---- lazy kernel objects ----------------------------------------------------------------
def test_out_idx_forms():
    assert BUILD["layernorm_out_int"]().out_idx == [1]
    k = BUILD["split_gate_up"]()
    assert k.out_idx == [1, 2]
    with pytest.raises(TypeError, match=r"main: expected 1 argument \(GU\).*G, U \(out_idx \[1, 2\]\) are allocated"):
        k(_z(64, 256, dtype=h), _z(64, 128, dtype=h), _z(64, 128, dtype=h))
    assert BUILD["silu_mul_two_outputs"]().out_idx == [2, 3]


def test_same_prim_func_compiled_twice_with_other_options():
    func = P.gemm_prim(128, 128, 64)
    a = tilecute.compile(func, out_idx=[-1])
    b = tilecute.compile(func, out_idx=None, pass_configs={"tl.disable_tma_lower": True})
    assert a is not b and a.out_idx == [2] and b.out_idx == []
    assert "tct.load(" in _body(a) and "tct.load(" not in _body(b)
    assert tilecute.compile(func, out_idx=[-1]).get_kernel_source() == a.get_kernel_source()


def test_module_level_prim_func_from_the_helper_module_compiled_twice():
    a = BUILD["fixed_axpby"]()
    b = tilecute.compile(H.fixed_axpby)  # no out_idx: Z is passed
    assert a is not b and a.out_idx == [3] and b.out_idx == []
    assert [(p.name, p.dtype, p.shape) for p in a.params] == [
        ("X", "float32", [4096]), ("Y", "float32", [4096]), ("alpha", "float32", []), ("Z", "float32", [4096])]
    assert _body(a) == _body(b) and "alpha * " in _body(a)
    with pytest.raises(TypeError, match=r"fixed_axpby: expected 3 arguments \(X, Y, alpha\)"):
        a(_z(4096), _z(4096), 1.0, _z(4096))


def test_partial_of_tilecute_jit_as_a_decorator():
    k = BUILD["log_softmax_rows"]()
    assert k.out_idx == [1] and P.log_softmax_rows(N=256, M=64) is k
    src = _body(k)  # tl.disable_tma_lower from the partial: no TMA load of X
    assert "tct.load(" not in src and "cute.math.log(" in src


def test_postponed_annotations_in_the_helper_module():
    k = BUILD["eager_rowscale_sig"]()
    assert [(a.name, a.kind) for a in k.abi.args] == [("X", "tensor"), ("s", "scalar"), ("Y", "tensor")]
    assert _params(k)[0] == ("X", "float32", ["ROWS", 128])
    assert H.eager_rowscale_sig.compile(_z(3, 128), -1.0) is k
    src = _body(k)  # s the runtime scalar, ROWS a launch argument
    assert "ROWS: cutlass.Int32, s: cutlass.Float32)" in src
    assert re.search(r"Y_staged\[tc_k\d+ \* 4 \+ tc_lane\d+\] = tc_vec\d+\[tc_lane\d+\] \* s", src), src


def test_helpers_from_another_module_partial_and_keyword_factories():
    src = _body(BUILD["helper_rowscale"]())
    assert "s[bx * 32 + i]" in src
    src = _body(BUILD["tile_copy_macro"]())  # H.load_tile's T.copy at (by * 32, bx * 64)
    assert "tct.load(X_desc, tc_smem + 0, tc_bar0, (bx * 64, by * 32), 4096)" in src
    src = _body(BUILD["attn_scores"]())
    assert "cutlass.Float32(0.125)" in src  # dim ** -0.5 for dim=64
    fixed = _body(P.attn_scores_fixed_scale(batch=1, heads=2, seq=128, dim=128))
    assert "cutlass.Float32(0.125)" in fixed and "0.08838" not in fixed  # partial's sm_scale wins
    assert "0.08838" in _body(P.attn_scores(batch=1, heads=2, seq=128, dim=128))
    lin, relu = _body(BUILD["gemm_bias_linear"]()), _body(BUILD["gemm_bias_relu"]())
    assert "fmax" in relu and "fmax" not in lin
    with pytest.raises(TypeError):
        P.chunk_scan(4, 256)  # keyword-only factory


# ---- GPU -----------------------------------------------------------------------------
def _rand(*shape, dtype=f32):
    return torch.randn(*shape, dtype=dtype, device="cuda")


@pytest.mark.gpu
def test_eager_programs_on_the_gpu():
    a, b = _rand(256, 128, dtype=h), _rand(128, 192, dtype=h)
    torch.testing.assert_close(P.eager_gemm(a, b).float(), a.float() @ b.float(), atol=5e-2, rtol=2e-2)
    a, b = _rand(64, 32, dtype=h), _rand(32, 64, dtype=h)
    torch.testing.assert_close(P.eager_gemm(a, b).float(), a.float() @ b.float(), atol=5e-2, rtol=2e-2)
    for m in (100, 7):
        x, w = _rand(m, 256, dtype=h), _rand(256, dtype=h)
        ref = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
        torch.testing.assert_close(P.eager_rmsnorm(x, w).float(), ref, atol=2e-2, rtol=2e-2)
    for m in (37, 5):
        x = _rand(m, 256)
        torch.testing.assert_close(P.eager_softmax_sig(x), torch.softmax(x, -1), atol=1e-5, rtol=1e-4)
    x = _rand(1000, dtype=h)
    torch.testing.assert_close(P.eager_dtype_cast(x), x.float() * 2)
    x = _rand(1000, dtype=bf)
    torch.testing.assert_close(P.eager_dtype_cast(x, in_dtype="bfloat16"), x.float() * 2)
    x, y = _rand(33, 65), _rand(33, 65)
    for al, be in ((1.0, 2.0), (-3.0, 0.25)):
        torch.testing.assert_close(P.eager_scaled_add(x, y, al, be), al * x + be * y)
    x = _rand(64, 128)
    mx, sm = P.eager_two_outputs(x)
    torch.testing.assert_close(mx, x.amax(-1))
    torch.testing.assert_close(sm, x.sum(-1), atol=1e-4, rtol=1e-4)
    x = _rand(16, 64)
    torch.testing.assert_close(P.eager_cumsum_rows(x), x.cumsum(-1), atol=1e-4, rtol=1e-4)
    x = _rand(64, 128)
    torch.testing.assert_close(P.eager_macro_softmax(x, scale=0.5), torch.softmax(x * 0.5, -1), atol=1e-5, rtol=1e-4)
    x, w = _rand(16, 256, dtype=bf), _rand(256)
    ref = torch.nn.functional.layer_norm(x.float(), (256,), eps=1e-5) * w
    torch.testing.assert_close(P.eager_shape_from_tensor(x, w).float(), ref, atol=3e-2, rtol=2e-2)
    for m in (16, 40):
        x = _rand(m, 128, dtype=h)
        torch.testing.assert_close(P.eager_sig_shape_rows(x), x.abs())
    for shape in ((64, 96), (32, 160)):
        x = _rand(*shape, dtype=h)
        torch.testing.assert_close(P.eager_transpose_tuple_consts(x), x.t().contiguous())
    x = _rand(1000)
    for n, sc in ((300, 2.0), (1000, -0.5), (0, 1.0)):
        ref = torch.where(torch.arange(1000, device="cuda") < n, x * sc, torch.zeros_like(x))
        torch.testing.assert_close(P.eager_masked_tail_scale(x, n, sc), ref)
    base = _rand(16, 128)
    torch.testing.assert_close(P.eager_strided_both(base[:, ::2]), base[:, ::2] * 3)
    xt = _rand(64, 16).t()
    torch.testing.assert_close(P.eager_strided_both(xt), xt * 3)
    for parts in (3, 2):
        qkv = _rand(2, 32, parts * 64, dtype=h)
        q = qkv[:, :, :64]
        ref = q.float() * torch.rsqrt(q.float().pow(2).mean(-1, keepdim=True) + 1e-6)
        torch.testing.assert_close(P.eager_qkv_slice_rmsnorm(q).float(), ref, atol=2e-2, rtol=2e-2)
    q, k, v = (_rand(256, 64, dtype=h) for _ in range(3))
    ref = torch.softmax(q.float() @ k.float().t() * 0.125, -1) @ v.float()
    torch.testing.assert_close(P.eager_flash_fwd(q, k, v).float(), ref, atol=2e-2, rtol=2e-2)
    x, r = _rand(64, 256, dtype=h), _rand(64, 256, dtype=h)
    ref = (r.float() + 0.5 * x.float()).half()
    assert P.eager_residual_inplace(x, r, alpha=0.5) is None
    torch.testing.assert_close(r, ref, atol=1e-3, rtol=1e-3)
    x = _rand(64, 256)
    torch.testing.assert_close(P.log_softmax_rows(64, 256)(x), torch.log_softmax(x, -1), atol=1e-5, rtol=1e-5)
    x = _rand(10, 128)
    torch.testing.assert_close(H.eager_rowscale_sig(x, 2.0), 2 * x)
    for width in (128, 100):
        base = _rand(64, width)
        v = base[:, :96]
        torch.testing.assert_close(P.eager_strided_rows(v), v + 1)
        torch.testing.assert_close(P.eager_strided_dynamic(v), v + 1)


@pytest.mark.gpu
def test_lazy_programs_on_the_gpu():
    x = _rand(64, 256, dtype=h)
    ref = torch.nn.functional.layer_norm(x.float(), (256,), eps=1e-5)
    torch.testing.assert_close(P.layernorm_out_int(64, 256)(x).float(), ref, atol=2e-2, rtol=2e-2)
    gu = _rand(64, 256, dtype=h)
    g, u = P.split_gate_up(64, 128)(gu)
    assert torch.equal(g, gu[:, :128]) and torch.equal(u, gu[:, 128:])
    g, u = _rand(16, 256), _rand(16, 256)
    out, act = P.silu_mul_two_outputs(16, 256)(g, u)
    torch.testing.assert_close(act, torch.nn.functional.silu(g), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out, torch.nn.functional.silu(g) * u, atol=1e-5, rtol=1e-5)
    func = P.gemm_prim(128, 128, 64)
    a, b = _rand(128, 64, dtype=h), _rand(128, 64, dtype=h)
    ref = a.float() @ b.float().t()
    torch.testing.assert_close(tilecute.compile(func, out_idx=[-1])(a, b), ref, atol=1e-2, rtol=1e-2)
    c = torch.empty(128, 128, device="cuda")
    tilecute.compile(func, pass_configs={"tl.disable_tma_lower": True})(a, b, c)
    torch.testing.assert_close(c, ref, atol=1e-2, rtol=1e-2)
    x, y = _rand(4096), _rand(4096)
    torch.testing.assert_close(tilecute.compile(H.fixed_axpby, out_idx=-1)(x, y, 0.5), 0.5 * x + y)
    z = torch.empty(4096, device="cuda")
    tilecute.compile(H.fixed_axpby)(x, y, -2.0, z)
    torch.testing.assert_close(z, -2.0 * x + y)
    base = _rand(64, 128)
    torch.testing.assert_close(P.strided_rows_copy(64, 96, 128)(base[:, :96]), base[:, :96] * 2)
    base = _rand(64, 97)
    torch.testing.assert_close(P.strided_rows_copy(64, 96, 97)(base[:, :96]), base[:, :96] * 2)
    xt = _rand(128, 64).t()
    torch.testing.assert_close(P.transposed_view_sum(64, 128)(xt), xt.sum(0), atol=1e-4, rtol=1e-4)
    x, s = _rand(64, 128, dtype=h), _rand(64)
    torch.testing.assert_close(P.helper_rowscale(64, 128)(x, s).float(), x.float() * s[:, None], atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(P.tile_copy_macro(64, 128)(x), x + 1)
    q, k = _rand(1, 2, 128, 64, dtype=h), _rand(1, 2, 128, 64, dtype=h)
    ref = torch.softmax(q.float() @ k.float().transpose(-1, -2) * 64 ** -0.5, -1)
    torch.testing.assert_close(P.attn_scores(batch=1, heads=2, seq=128, dim=64)(q, k), ref, atol=1e-3, rtol=1e-2)
    q, k = _rand(1, 2, 128, 128, dtype=h), _rand(1, 2, 128, 128, dtype=h)
    ref = torch.softmax(q.float() @ k.float().transpose(-1, -2) * 0.125, -1)
    torch.testing.assert_close(P.attn_scores_fixed_scale(batch=1, heads=2, seq=128, dim=128)(q, k), ref,
                               atol=1e-3, rtol=1e-2)
    x = _rand(4, 256)
    torch.testing.assert_close(P.chunk_scan(B=4, L=256)(x), x.cumsum(-1), atol=1e-3, rtol=1e-4)
    a, b, bias = _rand(128, 64, dtype=h), _rand(64, 128, dtype=h), _rand(128)
    lin = a.float() @ b.float() + bias
    torch.testing.assert_close(P.gemm_bias_relu(128, 128, 64)(a, b, bias).float(), lin.relu(), atol=5e-2, rtol=2e-2)
    torch.testing.assert_close(P.gemm_bias_linear(128, 128, 64)(a, b, bias).float(), lin, atol=5e-2, rtol=2e-2)
