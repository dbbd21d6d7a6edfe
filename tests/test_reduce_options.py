"""TileLang's reduction options: ``batch=`` (a performance hint, validated as TileLang
does), ``nan_propagate=`` (NaN-propagating max/min of float outs), the
``tl.reducer_force_baseline`` pass config, and reductions written in a plain Python helper
that a kernel calls as a statement (TileLang runs it while building the kernel)."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.language.parser import FrontendError
from tilecute.transform.pipeline import lower, run_passes


def _row_max(dtype="float16", kind="max", nan=None, batch=None, clear=True, rows=8, cols=64,
             threads=128, src_scope="fragment", annotations=None):
    extra = {} if annotations is None else {"annotations": annotations}
    if nan is not None:
        extra["nan_propagate"] = nan
    if batch is not None:
        extra["batch"] = batch
    reduce_fn = {"max": T.reduce_max, "min": T.reduce_min, "absmax": T.reduce_absmax,
                 "sum": T.reduce_sum}[kind]

    @T.prim_func
    def row_max(X: T.Tensor((rows, cols), dtype), Y: T.Tensor((rows,), dtype)):
        with T.Kernel(1, threads=threads):
            if src_scope == "fragment":
                x = T.alloc_fragment((rows, cols), dtype)
            else:
                x = T.alloc_shared((rows, cols), dtype)
            y = T.alloc_shared((rows,), dtype)
            T.copy(X, x)
            T.fill(y, 0)
            reduce_fn(x, y, dim=1, clear=clear, **extra)
            T.copy(y, Y)
    return row_max


def _reduces(func):
    out = []

    def walk(stmts):
        for s in stmts:
            if isinstance(s, N.Reduce):
                out.append(s)
            for child in ("body", "then_body", "else_body"):
                walk(getattr(s, child, None) or ())
    for k in func.kernels:
        walk(k.body)
    return out


# ---- nan_propagate ------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["max", "min", "absmax"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_nan_propagate_selects_nan_combines(kind, dtype, tmp_path):
    # TileLang HEAD takes nan_propagate on any out dtype (0.1.15 refused all but 16-bit
    # ones): float32 combines with max.NaN / min.NaN (cute.arch.fmax(nan=True)), float64
    # (no max.NaN.f64) with the NaN side selected in tcr.combine
    func = _row_max(dtype, kind, nan=True)
    (r,) = _reduces(func)
    assert r.nan_propagate and "nan_propagate=True" in func.script()
    source = emit_cute(lower(func, "sm_90a"))
    op = "min_nan" if kind == "min" else "max_nan"
    assert f'tcr.warp_allreduce(acc' not in source  # (names are tc_*)
    assert f'"{op}"' in source and source.count(f'"{op}"') >= 2  # in-thread and shuffles
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_nan_propagate_clear_false_updates_through_a_nan_select(dtype, tmp_path):
    # a shared destination with clear=False: the result meets dst in a T.Parallel update,
    # where a NaN on either side wins (x != x selects)
    func = _row_max(dtype, "max", nan=True, clear=False, src_scope="shared")
    text = run_passes(func, "sm_90a").script()
    assert "T.if_then_else(" in text and " != " in text, text
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("kind, instruction", [("max", "max.NaN.f32"), ("min", "min.NaN.f32"),
                                               ("absmax", "max.NaN.f32")])
def test_nan_propagate_float32_is_ptx_max_nan(kind, instruction, tmp_path, monkeypatch):
    import re

    import cutlass.cute as cute
    from tilecute.runtime.cubingen import import_source

    path = tmp_path / "kernel_cute.py"
    path.write_text(emit_cute(lower(_row_max("float32", kind, nan=True), "sm_90a")))
    module = import_source(str(path), f"tilecute_test_nan_{kind}")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    ptx = cute.compile(module.row_max, *module.placeholder_args(),
                       options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}").__ptx__
    found = set(re.findall(r"\b(?:max|min)\.[\w.]+", ptx))
    assert found == {instruction}, found


def test_nan_propagate_ignored_where_there_is_no_nan():
    # an integer out has no NaN to propagate (TileLang HEAD: plain max); reduce_sum has no
    # nan_propagate argument at all
    (r,) = _reduces(_row_max("int32", "max", nan=True))
    assert not r.nan_propagate
    with pytest.raises(FrontendError, match="nan_propagate"):
        _row_max("float16", "sum", nan=True)
    (r,) = _reduces(_row_max("float32", "max"))
    assert not r.nan_propagate


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["max", "min", "absmax"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_propagate_wider_floats_on_gpu(kind, dtype):
    import torch

    kernel = tilecute.compile(_row_max(dtype, kind, nan=True))
    x = torch.randn(8, 64, device="cuda", dtype=getattr(torch, dtype))
    x[1, 0] = x[4, 33] = float("nan")
    y = torch.empty(8, device="cuda", dtype=x.dtype)
    kernel(x, y)
    vals = x.abs() if kind == "absmax" else x  # torch's max / min propagate NaN
    ref = vals.min(dim=1).values if kind == "min" else vals.max(dim=1).values
    assert torch.isnan(y[1]) and torch.isnan(y[4])
    torch.testing.assert_close(y, ref, equal_nan=True)


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["max", "min", "absmax"])
@pytest.mark.parametrize("nan", [False, True])
def test_nan_propagate_on_gpu(kind, nan):
    import torch

    kernel = tilecute.compile(_row_max("float16", kind, nan=nan))
    x = torch.randn(8, 64, device="cuda", dtype=torch.float16)
    x[2, 5] = float("nan")
    x[6, 63] = float("nan")
    y = torch.empty(8, device="cuda", dtype=torch.float16)
    kernel(x, y)
    filled = torch.nan_to_num(x, nan=0.0)  # NaN-quiet: the other elements decide
    vals = filled.abs() if kind == "absmax" else filled
    ref = vals.min(dim=1).values if kind == "min" else vals.max(dim=1).values
    if nan:
        ref[2] = ref[6] = float("nan")
        assert torch.isnan(y[2]) and torch.isnan(y[6])
    else:
        # rows 2 and 6 without their NaN: the row's extreme of the other elements
        others = x.clone()
        others[2, 5] = others[2, 4]
        others[6, 63] = others[6, 62]
        v = others.abs() if kind == "absmax" else others
        ref = v.min(dim=1).values if kind == "min" else v.max(dim=1).values
    torch.testing.assert_close(y, ref, equal_nan=True)


# ---- batch ----------------------------------------------------------------------------------
@pytest.mark.parametrize("batch", [1, 2, 8])
def test_reduce_batch_is_a_hint(batch):
    base = emit_cute(lower(_row_max("float32", "sum"), "sm_90a"))
    assert emit_cute(lower(_row_max("float32", "sum", batch=batch), "sm_90a")) == base


@pytest.mark.parametrize("batch,message", [(0, "batch must be >= 1, got 0"),
                                           (-2, "batch must be >= 1, got -2"),
                                           (1.5, "batch=1.5: batch is an int >= 1")])
def test_reduce_batch_is_checked(batch, message):
    with pytest.raises(FrontendError, match=message) as e:
        _row_max("float32", "sum", batch=batch)
    assert "T.reduce_sum" in str(e.value) and "test_reduce_options.py" in str(e.value)


# ---- tl.reducer_force_baseline ----------------------------------------------------------------
def _reducer_sum(rows=16, cols=64):
    @T.prim_func
    def reducer_sum(A: T.Tensor((rows, cols), "float32"), B: T.Tensor((rows,), "float32")):
        with T.Kernel(1, threads=128):
            r = T.alloc_reducer(rows, "float32", op="sum", replication="all")
            T.clear(r)
            for i, j in T.Parallel(rows, cols):
                r[i] += A[i, j]
            T.finalize_reducer(r, batch=4)
            T.copy(r, B)
    return reducer_sum


@pytest.mark.parametrize("force", [False, True])
def test_reducer_force_baseline_is_what_tilecute_does(force, tmp_path):
    from tilecute.options import from_pass_configs
    assert from_pass_configs({"tl.reducer_force_baseline": force}) == {}
    func = _reducer_sum()
    assert 'tcr.block_allreduce(r, "sum", r_scratch, 4, 4)' in emit_cute(lower(func, "sm_90a"))
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


# ---- a plain Python helper called as a statement ----------------------------------------------
def _emit_reduction(lang, kind, src, dst, dim, batch=1):
    kwargs = {} if batch == 1 else {"batch": batch}
    if kind == "sum":
        lang.reduce_sum(src, dst, dim=dim, **kwargs)
    elif kind == "max":
        lang.reduce_max(src, dst, dim=dim, **kwargs)


@pytest.mark.parametrize("kind,batch", [("sum", 1), ("max", 4)])
def test_a_python_helper_emits_its_statements_inline(kind, batch):
    @T.prim_func
    def helper_reduce(X: T.Tensor((16, 64), "float32"), Y: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((16, 64), "float32")
            y = T.alloc_fragment((16,), "float32")
            T.copy(X, x)
            _emit_reduction(T, kind, x, y, 1, batch=batch)
            T.copy(y, Y)

    (r,) = _reduces(helper_reduce)
    assert (r.kind, r.src, r.dim) == (kind, "x", 1)


def _helper_with_a_value(x):
    if x is None:
        return x
    T.fill(x, 0)


def test_a_python_helper_that_returns_from_a_branch_decided_while_tracing():
    """``if x is None: return x`` in a helper is decided while the kernel is traced (as in
    TileLang 0.1.15's builder, which runs such a helper as Python): the fill runs."""
    @T.prim_func
    def returns(X: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32):
            _helper_with_a_value(X)

    src = tilecute.compile(returns).get_kernel_source()
    assert "X[" in src and "0.0" in src


# ---- the accumulator's dtype ------------------------------------------------------------------
@pytest.mark.parametrize("src,dst,kind", [("float8_e4m3fn", "float16", "absmax"),
                                          ("float16", "float32", "sum"),
                                          ("float32", "bfloat16", "max")])
def test_reductions_run_in_the_destinations_dtype(src, dst, kind, tmp_path):
    # TileLang's accumulator is dst's dtype: each element is converted before it is
    # combined (a float8 source combines float16s; a float16 sum accumulates in float32)
    @T.prim_func
    def convert_reduce(X: T.Tensor((4, 32), src), Y: T.Tensor((4,), dst)):
        with T.Kernel(1, threads=32):
            x = T.alloc_fragment((4, 32), src)
            y = T.alloc_fragment((4,), dst)
            T.copy(X, x)
            if kind == "absmax":
                T.reduce_absmax(x, y, dim=1)
            elif kind == "sum":
                T.reduce_sum(x, y, dim=1)
            else:
                T.reduce_max(x, y, dim=1)
            T.copy(y, Y)

    source = emit_cute(lower(convert_reduce, "sm_90a"))
    acc = {"float16": "cutlass.Float16", "float32": "cutlass.Float32",
           "bfloat16": "cutlass.BFloat16"}[dst]
    # (each row's result in its lane group's register, 8 threads x 4 registers a row)
    assert f"cute.make_rmem_tensor((1,), {acc})  # T.reduce_{kind}(x, y): a row is 8 threads" in source
    assert f"= {'cute.math.absf(' if kind == 'absmax' else ''}{acc}(x[" in source
    assert tilecute.build_cubin(convert_reduce, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_float8_absmax_into_float16_on_gpu():
    import torch

    @T.prim_func
    def fp8_absmax(X: T.Tensor((4, 32), "float8_e4m3fn"), Y: T.Tensor((4,), "float16")):
        with T.Kernel(1, threads=32):
            x = T.alloc_fragment((4, 32), "float8_e4m3fn")
            y = T.alloc_fragment((4,), "float16")
            T.copy(X, x)
            T.reduce_absmax(x, y, dim=1)
            T.copy(y, Y)

    base = torch.linspace(-2.0, 2.0, 128, device="cuda").reshape(4, 32)
    base[1, 7] = -6.5
    x = base.to(torch.float8_e4m3fn)
    y = torch.empty(4, device="cuda", dtype=torch.float16)
    tilecute.compile(fp8_absmax)(x, y)
    torch.testing.assert_close(y, x.float().abs().amax(dim=1).half(), atol=0, rtol=0)


@pytest.mark.parametrize("value", [False, True])
def test_enable_fadd2_is_accepted(value):
    # TileLang's packed FP32x2 sums (SM100+) switch: tilecute adds one value at a time
    base = emit_cute(lower(_row_max("float32", "sum"), "sm_90a"))
    hinted = _row_max("float32", "sum", annotations={"enable_fadd2": value})
    assert emit_cute(lower(hinted, "sm_90a")) == base


@pytest.mark.parametrize("annotations,message", [
    ({"enable_fadd2": "no"}, "enable_fadd2 must be a boolean"),
    ({"other": 1}, "annotations={'other': 1} is not supported"),
])
def test_other_reduce_annotations_are_refused(annotations, message):
    with pytest.raises(FrontendError, match=message):
        @T.prim_func
        def annotated(X: T.Tensor((8, 64), "float32"), Y: T.Tensor((8,), "float32")):
            with T.Kernel(1, threads=128):
                x = T.alloc_fragment((8, 64), "float32")
                y = T.alloc_fragment((8,), "float32")
                T.copy(X, x)
                T.reduce_sum(x, y, dim=1, annotations=annotations)
                T.copy(y, Y)


def test_the_validator_checks_nan_propagate():
    import dataclasses

    from tilecute.ir.validate import validate

    func = _row_max("int32", "max")

    def mark(stmts):
        return tuple(dataclasses.replace(s, nan_propagate=True) if isinstance(s, N.Reduce)
                     else s for s in stmts)
    kernel = func.kernels[0]
    bad = dataclasses.replace(func, kernels=(dataclasses.replace(kernel, body=mark(kernel.body)),))
    with pytest.raises(Exception, match="nan_propagate is for max, min and absmax into "
                                        r"a float dtype \(dst is int32\)"):
        validate(bad)
