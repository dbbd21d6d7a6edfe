"""TileLang's surface in tilecute's frontend: every ``T.*`` form binds its arguments to
TileLang's signature (positional and keyword spellings alike), refuses what it does not
honor at the line that says it, and what it honors compiles to a cubin."""

import inspect
import textwrap

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.language import FrontendError
from tilecute.language.forms import FORMS
from tilecute.transform.pipeline import lower

HEADER = '''import tilecute.language as T


@T.prim_func
def walk({params}A: T.Tensor((64, 64), "float16"), C: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((64, 64), "float16")
        t = T.alloc_shared((64, 64), "float16")
        acc = T.alloc_fragment((64, 64), "float32")
        row = T.alloc_fragment((64,), "float32")
        bar = T.alloc_barrier(1)
        x = T.float32(1.0)
'''

# every T.* name a program can call: where it stands and the fewest arguments it takes
CALLS = {
    "Kernel": ("with", "1"), "ClusterKernel": ("with", "1, cluster_dims=2"),
    "attr": ("region", 'T.comm_reducer(lambda a, b: a + b, [0]), "reduce_scope", 0'),
    "comm_reducer": ("expr", "lambda a, b: a + b, [0]"),
    "tvm_thread_allreduce": ("stmt", "T.uint32(1), x, True, x, 0"),
    "ws": ("region", "0"), "WarpSpecialize": ("region", "0"),
    "Parallel": ("for", "4"), "serial": ("for", "4"), "Serial": ("for", "4"),
    "unroll": ("for", "4"), "Unroll": ("for", "4"), "Pipelined": ("for", "4, num_stages=1"),
    "vectorized": ("for", "4"), "Vectorized": ("for", "4"), "Persistent": ("for", "[4], 1, bx"),
    "alloc_shared": ("alloc", '(4,), "float32"'), "alloc_fragment": ("alloc", '(4,), "float32"'),
    "alloc_local": ("alloc", '(4,), "float32"'), "alloc_var": ("alloc", '"float32"'),
    "alloc_barrier": ("alloc", "1"), "alloc_global": ("alloc", '(4,), "float32"'),
    "alloc_buffer": ("alloc", '(4,), "float32"'),
    "copy": ("stmt", "A[0, 0], s"), "async_copy": ("stmt", "A[0, 0], s"), "copy_cluster": ("stmt", "A[0, 0], s"), "fill": ("stmt", "acc, 0"), "clear": ("stmt", "acc"),
    "gemm": ("stmt", "s, t, acc"), "wgmma_gemm": ("stmt", "s, t, acc"),
    "gemm_sp": ("stmt", "s, s, t, acc"),
    "Broadcast": ("expr", "1.0, 4"), "Ramp": ("expr", "bx, 1, 4"),
    "extract_lane": ("expr", "T.float32x2(x, x), 0"), "Shuffle": ("expr", "[x, x], [1, 0]"),
    **{name: ("expr", "C[T.Ramp(0, 1, 2)], C[T.Ramp(2, 1, 2)]")
       for name in ("add2", "sub2", "mul2", "max2", "min2")},
    "fma2": ("expr", "C[0:4:2], C[1:5:2], C[T.Ramp(0, 1, 2)]"), "abs2": ("expr", "C[0:2:1]"),
    "reduce": ("stmt", 'acc, row, "sum", 1, True'),
    **{f"reduce_{k}": ("stmt", "acc, row") for k in
       ("sum", "max", "min", "abssum", "absmax", "bitand", "bitor", "bitxor")},
    "atomic_add": ("stmt", "C[0], 1.0"), "atomic_max": ("stmt", "C[0], 1.0"),
    "atomic_min": ("stmt", "C[0], 1.0"), "evaluate": ("stmt", "x"), "sync_threads": ("stmt", ""),
    "tma_copy": ("stmt", "A[0, 0], s, barrier=bar[0]"), "mbarrier_arrive": ("stmt", "bar[0]"),
    "mbarrier_wait_parity": ("stmt", "bar[0], 0"), "use_swizzle": ("stmt", "8"),
    "set_max_nreg": ("stmt", "240, 1"), "wait_wgmma": ("stmt", "0"), "warpgroup_wait": ("stmt", "0"),
    "barrier_arrive": ("stmt", "bar[0]"), "barrier_wait": ("stmt", "bar[0], 0"),
    "cumsum": ("stmt", "s"), "transpose": ("stmt", "s, t"), "cummax": ("stmt", "s"), "finalize_reducer": ("stmt", "acc"),
    "reducer_init": ("stmt", "acc"), "reducer_update": ("stmt", "acc[0, 0], 1.0"),
    "alloc_reducer": ("alloc", '(4,), "float32", "sum", "all"'),
    "im2col": ("stmt", "A, s, bx, 0, 3, 1, 1, 1"), "c2d_im2col": ("stmt", "A, s, bx, 0, 3, 1, 1, 1"),
    **{name: ("expr", "x, 1") for name in ("shfl_xor", "shfl_down", "shfl_up", "shfl_sync")},
    **{name: ("expr", "0xFFFFFFFF, x, 1, 32, 32")
       for name in ("tvm_warp_shuffle", "tvm_warp_shuffle_down", "tvm_warp_shuffle_up")},
    **{name: ("expr", "bx > 0") for name in ("any_sync", "all_sync", "ballot_sync", "ballot",
                                             "syncthreads_count", "syncthreads_and",
                                             "syncthreads_or")},
    "activemask": ("expr", ""), "shuffle_elect": ("expr", "128"),
    **{name: ("stmt", "") for name in ("cluster_sync", "cluster_arrive", "cluster_arrive_relaxed",
                                       "cluster_wait")},
    "block_rank_in_cluster": ("expr", ""), "alloc_cluster_barrier": ("alloc", "1"),
    # TileLang 0.1.15's (tests/test_surface_audit.py)
    "fmul": ("expr", "1.0, 2.0"), "ignore_loop_partition": ("expr", "x > 0.0"),
    **{name: ("expr", "0") for name in ("get_cluster_id", "get_cluster_extent")},
    **{name: ("unpack", "") for name in ("get_cluster_dims", "get_cluster_extents")},
    "get_cluster_ids": ("expr", ""), "get_cluster_size": ("expr", ""),
    "Tensor": ("param", '(4,), "float32"'), "StridedTensor": ("param", '(4,), (1,), "float32"'),
    "Buffer": ("param", '(4,), "float32"'), "buffer": ("param", '(4,), "float32"'),
    "buffer_decl": ("param", '(4,), "float32"'),
    "handle": ("param", ""), "var": ("expr", '"int32"'),
    "meta_var": ("expr", "x"), "decl_buffer": ("alloc", '(4,), "float32"'),
    "match_buffer": ("match", "Z, (4,)"), "make_tensor": ("match", "Z, (4,)"),
    **{name: ("param", '(4,), "float32"') for name in ("SharedBuffer", "FragmentBuffer", "LocalBuffer")},
    "grid": ("for", "4"), "parallel": ("for", "4"),
    **{name: ("expr", "0") for name in ("get_block_binding", "get_thread_extent", "get_block_extent")},
    "thread_binding": ("expr", '0, 128, "threadIdx.x"'),
    "pdl_sync": ("stmt", ""), "pdl_trigger": ("stmt", ""), "fence_proxy_async": ("stmt", ""), "sync_grid": ("stmt", ""),
    "ptx_cp_async": ("stmt", 'T.access_ptr(s[0, 0], "w", 8), T.access_ptr(A[0, 0], "r", 8), 8'),
    "ptx_commit_group": ("stmt", ""), "ptx_wait_group": ("stmt", "0"),
    "cp_async_barrier_noinc": ("stmt", "bar[0]"), "let": ("stmt", "x, 1"),
    "rng_init": ("stmt", "1"), "rng_rand": ("expr", ""), "rng_rand_float": ("expr", ""),
    **{name: ("unpack", "") for name in ("get_thread_bindings", "get_block_bindings",
                                         "get_thread_extents", "get_block_extents")}, "inc_max_nreg": ("stmt", "240"), "dec_max_nreg": ("stmt", "40"),
    **{name: ("expr", "x") for name in ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh",
                                        "sin", "cos", "floor", "ceil", "sigmoid", "abs")},
    **{name: ("expr", "x") for name in ("tan", "atan", "acos", "asin", "sinh", "cosh", "erf",
                                        "log10", "log1p", "exp10", "trunc", "round", "isnan",
                                        "isinf", "isfinite")},
    **{name: ("expr", "x, x") for name in ("pow", "fmod", "atan2")},
    "truncdiv": ("expr", "bx, 2"), "truncmod": ("expr", "bx, 2"), "popcount": ("expr", "bx"),
    "clz": ("expr", "bx"), "likely": ("expr", "bx > 0"),
    **{name: ("expr", "") for name in ("get_lane_idx", "get_warp_idx", "get_warp_idx_sync",
                                       "get_warp_group_idx")},
    "sync_warp": ("stmt", ""), "named_barrier_arrive": ("stmt", "1, 128"),
    "tvm_storage_sync": ("stmt", "\"shared\""),
    "annotate_layout": ("stmt", "{}"), "annotate_min_blocks_per_sm": ("stmt", "1"),
    "annotate_safe_value": ("stmt", "{}"), "annotate_l2_hit_ratio": ("stmt", "{}"),
    "annotate_restrict_buffers": ("stmt", "A"),
    "launch_thread": ("expr", '"threadIdx.x", 128'),
    "sblock": ("region", ""), "reads": ("stmt", ""), "writes": ("stmt", ""),
    "tma_store_wait": ("stmt", ""), "tma_store_arrive": ("stmt", ""),
    "annotate_producer_reg_dealloc": ("stmt", ""), "annotate_consumer_reg_alloc": ("stmt", ""),
    "no_set_max_nreg": ("stmt", ""), "disable_warp_group_reg_alloc": ("stmt", ""),
    **{f"warp_reduce_{k}": ("expr", "bx") for k in ("sum", "max", "min", "bitand", "bitor")},
    "max": ("expr", "x, 1.0"), "min": ("expr", "x, 1.0"), "clamp": ("expr", "x, 0.0, 1.0"),
    "fma": ("expr", "x, x, x"), "ceildiv": ("expr", "bx, 2"), "cdiv": ("expr", "bx, 2"),
    "floordiv": ("expr", "bx, 2"), "floormod": ("expr", "bx, 2"),
    **{name: ("expr", "bx, 1") for name in ("bitwise_and", "bitwise_or", "bitwise_xor",
                                            "shift_left", "shift_right")},
    "bitwise_not": ("expr", "bx"), "Cast": ("expr", '"float16", x'), "cast": ("expr", 'x, "float16"'),
    "if_then_else": ("expr", "bx > 0, x, x"), "Select": ("expr", "bx > 0, x, x"),
    "And": ("expr", "bx > 0, bx < 4"), "Or": ("expr", "bx > 0, bx < 4"), "Not": ("expr", "bx > 0"),
    **{name: ("expr", "bx, 1") for name in ("EQ", "NE", "LT", "LE", "GT", "GE")},
    "infinity": ("expr", '"float32"'), "max_value": ("expr", '"float32"'),
    "min_value": ("expr", '"float32"'), "get_thread_binding": ("expr", "0"),
    "loop_break": ("stmt", ""), "thread_return": ("stmt", ""), "atomic_addx2": ("stmt", "C[0], C[0]"),
    "atomic_addx4": ("stmt", "C[0], C[0]"), "print": ("stmt", "x"),
    "device_assert": ("stmt", "bx >= 0"), "assume": ("stmt", "bx >= 0"),
    "align_up": ("expr", "bx, 2"), "index_to_coordinates": ("unpack", "bx, (2, 4, 16)"), "atomic_load": ("expr", "C[0]"),
    "atomic_store": ("stmt", "C[0], 1.0"), "atomic_or": ("stmt", "C[0], 1"), "dp4a": ("stmt", "s[0, 0], t[0, 0], C[0]"), "reinterpret": ("expr", 'x, "int32"'),
    "any_of": ("expr", "row"), "all_of": ("expr", "row"), "tvm_storage_sync": ("stmt", '"shared"'),
    "ldg32": ("expr", "C[0]"), "ldg64": ("expr", "C[0:2]"), "ldg128": ("expr", "C[0:4]"),
    "ldg256": ("expr", "C[0:8]"), "lds32": ("expr", "s[0, 0:2]"), "lds64": ("expr", "s[0, 0:4]"),
    "lds128": ("expr", "s[0, 0:8]"), "__ldg": ("expr", "C[0]"),
    **{name: ("expr", "x") for name in ("__exp", "__exp10", "__log", "__log2", "__log10",
                                        "__sin", "__cos", "__tan")},
    **{name: ("expr", "x") for name in ("asinh", "acosh", "atanh", "nearbyint", "fabs",
                                        "ieee_frcp", "ieee_fsqrt", "ieee_frsqrt", "fast_rcp")},
    **{name: ("expr", "x, x") for name in ("copysign", "hypot", "nextafter", "ieee_add",
                                           "ieee_sub", "ieee_mul", "ieee_fdiv")},
    "ldexp": ("expr", "x, 2"), "ieee_fmaf": ("expr", "x, x, x"), "__ffs": ("expr", "bx"),
    "__fns": ("expr", "T.uint32(5), 0, 1"), "match_any_sync": ("expr", "bx"),
    "match_all_sync": ("expr", "bx"), "tvm_warp_activemask": ("expr", ""),
    "stg32": ("stmt", "C[0], bx"), "stg64": ("stmt", "C[0:2], T.ldg64(C[2:4])"),
    "stg128": ("stmt", "C[0:4], T.ldg128(C[4:8])"), "stg256": ("stmt", "C[0:8], T.ldg256(C[8:16])"),
    "sts32": ("stmt", "s[0, 0:2], bx"), "sts64": ("stmt", "s[0, 0:4], T.ldg64(C[0:2])"),
    "sts128": ("stmt", "s[0, 0:8], T.ldg128(C[0:4])"),
    "view": ("alloc", "s"), "reshape": ("alloc", "s, (4096,)"),
    "ptr": ("param", ""), "make_tensor": ("alloc", "A.data, (64,)"),
    "make_tensor_from_addr": ("alloc", "T.int64(0), (64,)"),
    "symbolic": ("dim", '"K"'), "dynamic": ("dim", '"K"'), "Layout": ("layout", '"blocked"'),
    "Fragment": ("layout", "(4,), lambda i, rep: (rep, i), replicate=128"),
    **{name: ("expr", "1.0") for name in T.DTYPE_NAMES},
}
NOT_CALLED = {"prim_func", "from_script", "FrontendError", "GemmWarpPolicy",
              "Var",  # a class: isinstance(M, T.Var) (tests/test_tilelang_broadcast_var.py)
              "Ref",  # a macro parameter annotation (tests/test_tilelang_macros.py)
              "macro",  # a decorator (tests/test_macro.py)
              "dtype"}  # a type (test_dtype_type_annotates_factory_arguments)


def program(name: str, args: str) -> tuple[str, int]:
    """A script that calls ``T.<name>(args)`` where the form stands; the call's line."""
    where, _ = CALLS[name]
    call = f"T.{name}({args})"
    if where == "param":
        return HEADER.format(params=f"Z: {call}, ") + "        C[0] = x\n", 5
    if where == "match":  # `M = T.match_buffer(Z, ...)` on a T.handle, atop the body
        text = HEADER.format(params="Z: T.handle, ").replace(
            "    with T.Kernel", f"    M = {call}\n    with T.Kernel")
        return text + "        C[0] = x\n", 6
    if where == "dim":
        return HEADER.format(params=f'Z: T.Tensor(({call},), "float32"), ') + "        C[0] = x\n", 5
    if where == "with":
        text = HEADER.format(params="").split("    with T.Kernel")[0]
        return text + f"    with {call} as bx:\n        C[0] = 1.0\n", text.count("\n") + 1
    lines = HEADER.format(params="")
    line = lines.count("\n") + 1
    body = {"for": f"for i in {call}:\n            C[0] = 1.0", "alloc": f"v = {call}",
            "stmt": call, "expr": f"y = {call}", "unpack": f"y0, y1, y2 = {call}",
            "region": f"with {call}:\n            C[0] = 1.0",
            "layout": f'v = T.alloc_fragment((4,), "float32", layout={call})'}[where]
    return lines + "        " + body + "\n", line


def _error(text: str) -> str:
    with pytest.raises(FrontendError) as e:
        T.from_script(text)
    return str(e.value)


def test_every_form_is_walked():
    """A new T.* name must join CALLS (and so the walks below)."""
    assert set(T.__all__) - NOT_CALLED == set(CALLS)


# forms whose fewest arguments are refused, or need more than the walk's kernel has
REFUSED_AS_CALLED = {
    "gemm_sp": "the metadata is an integer dtype",
    "reduce_bitand": "bitwise reductions take integers", "reduce_bitor": "bitwise reductions take integers",
    "reduce_bitxor": "bitwise reductions take integers",
    "im2col": "must be a 4-d (N, H, W, C) tensor parameter",
    "finalize_reducer": "'acc' is not a T.alloc_reducer buffer",
    "reducer_init": "'acc' is not a reducer of T.alloc_reducer without replication",
    "reducer_update": "'acc' is not a reducer of T.alloc_reducer without replication",
    "c2d_im2col": "must be a 4-d (N, H, W, C) tensor parameter",
    # T.macro parameter annotations: a prim_func parameter is a global tensor
    "SharedBuffer": "scope", "FragmentBuffer": "scope", "LocalBuffer": "scope",
    "loop_break": "T.loop_break outside a loop",
    # a T.handle parameter is the tensor a T.match_buffer binds (tests/test_match_buffer.py)
    "handle": "T.handle is bound by no `A = T.match_buffer(Z,",
    "atomic_or": "'C' is float32; T.atomic_or writes a 32- or 64-bit integer",
    "dp4a": "T.dp4a: requires int8 inputs, got A.dtype='float16'",
    "comm_reducer": 'only the node of `T.attr(T.comm_reducer(...), "reduce_scope", ...)`',
    "tvm_thread_allreduce": "outside a `with T.attr(T.comm_reducer",
    "reads": "T.reads annotates a TVM block", "writes": "T.writes annotates a TVM block",
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_every_form_takes_its_fewest_arguments(name):
    text, line = program(name, CALLS[name][1])
    if name in REFUSED_AS_CALLED:
        msg = _error(text)
        assert REFUSED_AS_CALLED[name] in msg and f"<script>:{line}:" in msg
    else:
        T.from_script(text)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_unknown_keyword_names_form_argument_and_line(name):
    args = CALLS[name][1]
    text, line = program(name, f"{args}, bogus_arg=1" if args else "bogus_arg=1")
    msg = _error(text)
    assert f"<script>:{line}:" in msg and "prim_func 'walk'" in msg
    assert f"T.{name}" in msg and "bogus_arg" in msg, msg


@pytest.mark.parametrize("name", sorted(CALLS))
def test_unknown_positional_names_form_argument_and_line(name):
    args = CALLS[name][1]
    positional = ", ".join(a for a in args.split(", ") if "=" not in a)
    keywords = ", ".join(a for a in args.split(", ") if "=" in a)
    extra = ", ".join(["7"] * 12)
    call_args = ", ".join(x for x in (positional, extra, keywords) if x)
    text, line = program(name, call_args)
    msg = _error(text)
    assert f"<script>:{line}:" in msg and "prim_func 'walk'" in msg
    if name in ("Kernel", "ClusterKernel"):  # *blocks: the extra ones are grid extents
        assert f"T.{name} takes 0 to 3 grid extents, got 13" in msg
    elif name in ("Parallel", "grid"):  # *extents: one loop variable per extent
        assert f"T.{name} has 13 extents but 1 loop variables" in msg
    elif name in ("ws", "WarpSpecialize"):  # *warp_group_idx: the extra ones are warpgroups
        assert "T.ws(0, 7): warpgroups that are not consecutive are not supported" in msg
    elif name == "annotate_restrict_buffers":  # *buffers: the extra ones are no buffers
        assert "T.annotate_restrict_buffers expects Buffer arguments, got `7`" in msg
    elif name == "tvm_thread_allreduce":  # *args: values, results, thread indices
        assert "T.tvm_thread_allreduce outside a `with T.attr(T.comm_reducer" in msg
    elif name in ("reads", "writes"):  # *buffer_slices: TVM's block regions
        assert f"T.{name} annotates a TVM block" in msg
    elif name == "Fragment":  # run as Python (its forward_fn is a lambda), as TileLang runs it
        assert "T.Fragment: unexpected positional argument 6 (`7`)" in msg, msg
    elif name == "alloc_var":  # *args: (init, scope) at most
        assert "T.alloc_var takes (dtype, init, scope) at most" in msg
    elif name in ("any_of", "all_of"):  # several arguments: each a condition
        assert f"T.{name}: argument 1 (`row`) is not a condition" in msg, msg
    elif name == "boolean":  # TVMScript's T.boolean(expr=None, is_size_var=False)
        assert "T.boolean: unexpected positional argument 3 (`7`)" in msg, msg
    elif name in T.DTYPE_NAMES:  # TileLang 0.1.15's T.<dtype>(*args): a vector of the values
        assert f"T.{name}: 13 values make a vector (TVM's Shuffle" in msg, msg
    else:
        assert f"T.{name}: unexpected positional argument" in msg and "(`7`)" in msg, msg


def test_positional_and_keyword_spellings_mean_the_same():
    def both(call_pos, call_kw):
        a = T.from_script(program("gemm", "s, t, acc")[0].replace("T.gemm(s, t, acc)", call_pos))
        b = T.from_script(program("gemm", "s, t, acc")[0].replace("T.gemm(s, t, acc)", call_kw))
        return a, b

    a, b = both("T.gemm(s, t, acc, True, False, T.GemmWarpPolicy.Square, True)",
                "T.gemm(s, t, acc, clear_accum=True, transpose_A=True)")
    assert a == b
    gemm = [s for s in a.kernels[0].body if isinstance(s, N.Gemm)][0]
    assert (gemm.transpose_a, gemm.transpose_b, gemm.clear_accum) == (True, False, True)
    a, b = both("T.reduce_max(acc, row, 1, False)", "T.reduce_max(acc, row, clear=False, dim=1)")
    assert a == b


# ---- what is honored, with TileLang's meaning ----------------------------------------------
def _script(body: str, params: str = 'A: T.Tensor((256, 64), "float16"), '
                                     'B: T.Tensor((256, 64), "float16")', grid: str = "4",
            head: str = "") -> str:
    return (f"import tilecute.language as T\n{head}\n\n@T.prim_func\n"
            f"def kern({params}):\n    with T.Kernel({grid}, threads=128) as bx:\n"
            + textwrap.indent(textwrap.dedent(body), "        "))


def _kernel(body: str, **kw) -> N.PrimFunc:
    f = T.from_script(_script(body, **kw))
    assert T.from_script(f.script()) == f  # the printer writes what the frontend reads back
    return f


def _stmts(func, cls):
    from tilecute.ir.visitor import walk_stmts

    return [s for s in walk_stmts(func.kernels[0].body) if isinstance(s, cls)]


def test_slices_fold_their_extent():
    f = _kernel("""
        s = T.alloc_shared((64, 64), "float16")
        T.copy(A[bx * 64:(bx + 1) * 64, :], s)
        T.copy(s, B[bx * 64:bx * 64 + 64, 0:64])
    """)
    c1, c2 = _stmts(f, N.Copy)
    assert c1.src.extents == (N.Const(64, "int32"), N.Const(64, "int32"))
    assert (c1.src.starts, c1.src.extents) == (c2.dst.starts, c2.dst.extents)


def test_gemm_positional_transposes_are_honored():
    f = _kernel("""
        a = T.alloc_shared((64, 64), "float16")
        b = T.alloc_shared((64, 64), "float16")
        c = T.alloc_fragment((64, 64), "float32")
        T.gemm(a, b, c, True, False)
        T.gemm(a, b, c, False, True, T.GemmWarpPolicy.Square, True)
    """)
    g1, g2 = _stmts(f, N.Gemm)
    assert (g1.transpose_a, g1.transpose_b, g1.clear_accum) == (True, False, False)
    assert (g2.transpose_a, g2.transpose_b, g2.clear_accum) == (False, True, True)


def test_alloc_scope_argument_is_honored():
    f = _kernel("""
        a = T.alloc_fragment((4,), "float32", "local")
        b = T.alloc_local((4,), "float32")
        c = T.alloc_shared((4,), "float32", scope="shared")
        d = T.alloc_fragment((64,), "float32")
    """)
    assert [s.buffer.scope for s in _stmts(f, N.Allocate)] == ["local", "local", "shared", "fragment"]


def test_reduce_dim_defaults_to_the_last_axis_as_in_tilelang():
    f = _kernel("""
        x = T.alloc_fragment((64, 32), "float32")
        r = T.alloc_fragment((64,), "float32")
        T.reduce_max(x, r)
        T.reduce_absmax(x, r, -1, False)
        T.reduce(x, r, "sum", 1, True)
        T.reduce_abssum(x, r)
    """)
    assert [(r.kind, r.dim, r.clear) for r in _stmts(f, N.Reduce)] == [
        ("max", 1, True), ("absmax", 1, False), ("sum", 1, True), ("abssum", 1, True)]


def test_alloc_barrier_takes_tilelangs_arrive_count():
    f = _kernel("""
        one = T.alloc_barrier(128)
        four = T.alloc_barrier([64] * 4)
    """)
    one, four = _stmts(f, N.Allocate)
    assert (one.buffer.shape, one.layout.threads) == ((N.Const(1, "int32"),), 128)
    assert (four.buffer.shape, four.layout.threads) == ((N.Const(4, "int32"),), 64)
    assert "one = T.alloc_barrier(128)" in f.script() and "T.alloc_barrier([64] * 4)" in f.script()
    assert T.from_script(f.script()) == f


def test_pipelined_without_num_stages_is_a_serial_loop_as_in_tilelang():
    f = _kernel("""
        for k in T.Pipelined(4):
            B[k, 0] = A[k, 0]
        for k in T.Pipelined(0, 4, 2):
            B[k, 0] = A[k, 0]
    """)
    loops = _stmts(f, N.For)
    assert [(x.kind, x.num_stages) for x in loops] == [("serial", 0), ("pipelined", 2)]


def test_constants_and_casts():
    f = _kernel("""
        v = -T.infinity("float16")
        w = T.max_value("int8") + T.min_value("int8")
        y = (A[0, 0] * 2).astype("float32")
        z = T.cast(A[0, 0], "float32") + T.Cast("float32", A[0, 0])
        B[0, 0] = v
    """)
    lets = {s.var.name: s.value for s in _stmts(f, N.Let)}
    assert lets["v"] == N.Const(float("-inf"), "float16")
    assert lets["w"] == N.Const(-1, "int8")
    assert lets["y"].dtype == "float32" and isinstance(lets["y"], N.Cast)
    assert lets["z"].a == lets["z"].b


def test_bitwise_operators_on_integers():
    f = _kernel("""
        u = (bx >> 1) & 3 | (bx << 2) ^ ~bx
    """, params='A: T.Tensor((4,), "int32")')
    (let,) = _stmts(f, N.Let)
    assert let.value.dtype == "int32" and "~" not in f.script()


def test_serial_step_walks_every_step():
    f = _kernel("""
        for k in T.serial(2, 64, 16):
            B[k, 0] = A[k, 0]
    """)
    (loop,) = _stmts(f, N.For)
    assert loop.extent == N.Const(4, "int32")
    let = loop.body[0]
    assert isinstance(let, N.Let) and let.var.name == "k"


def test_dynamic_names_several_symbols():
    M, K = T.dynamic("M, K")
    assert (M.name, K.name) == ("M", "K") and T.dynamic("a b")[1].name == "b"
    assert T.symbolic("N", multiple_of=8).multiple == 8


def test_cluster_kernel_normalizes_cluster_dims():
    f = T.from_script(textwrap.dedent('''
        import tilecute.language as T

        @T.prim_func
        def k(A: T.Tensor((256,), "float32")):
            with T.ClusterKernel(4, cluster_dims=2, threads=64) as bx:
                A[bx] = 0.0
    '''))
    assert f.kernels[0].cluster == (2, 1, 1)


# ---- what is refused, and why ------------------------------------------------------------------
REFUSED = [
    ('T.gemm(a, b, c, k_pack=4)', "T.gemm: k_pack=4; TileLang's T.gemm takes 1 or 2"),
    ('T.gemm(a, b, c, mbar=bars[0])', "T.gemm: mbar="),
    ('T.copy(A[0, 0], a, eviction_policy="evict_first")', "T.copy: eviction_policy='evict_first' is not supported"),
    ('T.copy(A[0, 0], a, coalesced_width=0)', "T.copy: coalesced_width=0: coalesced_width must be an int >= 1"),
    ('T.reduce_sum(c, r, batch=0)', "T.reduce_sum: batch must be >= 1, got 0"),
    ('T.reduce_max(c, r, annotations={"x": 1})', "T.reduce_max: annotations={'x': 1} is not supported"),
    ('T.reduce_bitand(c, r)', "T.reduce_bitand: 'c' is float32; bitwise reductions take integers"),
    ('T.reduce(c, r, "bitor", 1, True)', "T.reduce: 'c' is float32; bitwise reductions take integers"),
    ('T.reduce(c, r, "prod", 1, True)', "T.reduce: reduce_type='prod' is not supported"),
    ('T.atomic_add(B[0, 0], 1.0, memory_order="seqcst")', "T.atomic_add: memory_order='seqcst' is not a memory order"),
    ('v = T.atomic_add(B[0, 0], 1.0, return_prev=True, memory_order="seqcst")', "T.atomic_add: memory_order='seqcst' is not a memory order"),
    ('v = T.atomic_max(B[0, 0], 1.0)', "T.atomic_max: returns a value only with return_prev=True"),
    ('T.atomic_max(B[0, 0], 1.0, memory_order=5)', "T.atomic_max: memory_order=5 is not a memory order"),
    ('v = T.atomic_min(c[0, 0], 1.0, return_prev=True)', "T.atomic_min: return_prev=True: 'c' is a fragment buffer"),
    ('v = T.atomic_add(B[0:2, 0], 1.0, return_prev=True)', "T.atomic_add: return_prev=True takes one element"),
    ('T.sync_threads(1, 48)', "T.sync_threads: arrive_count=48: 48 threads: a named barrier counts whole warps"),
    ('T.mbarrier_arrive(bars[0], 1.5)', "T.mbarrier_arrive: cta_id must be an integer"),
    ('T.fill(c, 0, annotations={"x": 1})', "T.fill: annotations={'x': 1} is not supported"),
    ('for i in T.Parallel(4, loop_layout=1):\n    pass', "T.Parallel: loop_layout is a T.Fragment over the loop's extents, got 1"),
    ('for i in T.Parallel(4, prefer_async=1):\n    pass', "T.Parallel: prefer_async=1 must be True or False"),
    ('for i in T.unroll(4, explicit=True, unroll_factor=2):\n    pass',
     "T.unroll: T.unroll's explicit and unroll_factor params are mutually exclusive"),
    ('for i in T.unroll(4, unroll_factor=0):\n    pass', "T.unroll: unroll_factor=0 must be an int >= 1"),
    ('for i in T.Pipelined(4, stage=[0, 1, 0, 1], order=[1, 0, 3, 2]):\n    T.copy(A[0, 0], a)\n    T.gemm(a, b, c)\n    T.copy(A[0, 0], b)\n    T.gemm(a, b, c)',
     "T.Pipelined: order=(1, 0, 3, 2) issues the copy into shared memory at line"),
    ('for i in T.Pipelined(4, stage=[1, 1]):\n    T.copy(A[0, 0], a)\n    T.gemm(a, b, c)',
     "T.Pipelined: stage=(1, 1): a copy into shared memory at line"),
    ('for i in T.Pipelined(4, stage=[0, 0, 1]):\n    T.copy(A[0, 0], a)\n    T.fill(c, 0)\n    T.gemm(a, b, c)',
     "T.Pipelined: stage=(0, 0, 1): a statement other than a global-to-shared copy at line"),
    ('for i in T.Pipelined(4, stage=[0]):\n    T.copy(A[0, 0], a)\n    T.gemm(a, b, c)',
     "T.Pipelined: stage=(0,) has 1 entries but the loop body has 2 scheduled statements"),
    ('for i in T.Pipelined(4, num_stages=1, stage=[0, 1], order=[1, 0]):\n    T.copy(A[0, 0], a)\n    T.gemm(a, b, c)',
     "T.Pipelined: num_stages=1 with order=(1, 0): the order issues copies after the step's other statements"),
    ('for i in T.Pipelined(4, num_stages=2, group=[[0]]):\n    pass', "T.Pipelined: group=((0,),): tilecute takes groups"),
    ('v = T.alloc_shared((4,), "float32", "global")', "T.alloc_shared: 'v': scope='global' is not supported"),
    ('v = T.alloc_local((4,), "float17")', "T.alloc_local: 'v': unknown dtype 'float17'; tilecute dtypes are"),
    ('v = T.alloc_barrier([32, 64])', "T.alloc_barrier: 'v': arrive counts [32, 64] differ"),
    ('v = T.cast(A[0, 0], "float32", round="rz")', "T.cast: round='rz'"),
    ('v = T.infinity("int32")', "T.infinity('int32'): only float dtypes have an infinity"),
    ('v = T.cast("float32", A[0, 0])', "T.cast takes (value, dtype), as in TileLang; T.Cast takes (dtype, value)"),
    ('if a:\n    pass', "buffer 'a' used as a value"),
    ('v = T.alloc_tmem((4,), "float32")', "T.alloc_tmem is a TileLang form that tilecute does not support"),
    ('T.reducer_init(c)', "T.reducer_init: 'c' is not a reducer of T.alloc_reducer without replication"),
    ('for i in T.vectorized(4, annotations={"x": 1}):\n    pass', "T.vectorized: annotations={'x': 1} is not supported"),
    ('for i, j in T.Persistent([4], 1, bx):\n    pass', "T.Persistent has 1 domain dims but 2 loop variables"),
    ('v, w = 1, 2, 3', "cannot unpack 3 values into 2 names"),
    ('v = A[0, 0] & 1', "bitwise operator & takes integers, got float16"),
]


@pytest.mark.parametrize("stmt,message", REFUSED, ids=[m.split(":")[0].split(" ")[0] for _, m in REFUSED])
def test_refused_arguments_name_form_argument_and_line(stmt, message):
    body = textwrap.dedent("""
        a = T.alloc_shared((64, 64), "float16")
        b = T.alloc_shared((64, 64), "float16")
        c = T.alloc_fragment((64, 64), "float32")
        r = T.alloc_fragment((64,), "float32")
        bars = T.alloc_barrier(1)
    """) + stmt + "\n"
    text = _script(body)
    with pytest.raises(FrontendError) as e:
        T.from_script(text)
    msg = str(e.value)
    assert message in msg, msg
    line = text.splitlines().index("        " + stmt.splitlines()[0]) + 1
    assert f"<script>:{line}:" in msg and "prim_func 'kern'" in msg  # the statement's own line


def test_tensor_annotation_arguments_are_checked_at_the_parameter():
    def f(A: T.Tensor((4,), "float16", data=1), B: T.Tensor((4,), "float16")):
        with T.Kernel(1, threads=32) as bx:
            B[0] = A[0]

    with pytest.raises(FrontendError, match=r"parameter 'A': T.Tensor\(data=1\) is not supported"):
        T.prim_func(f)

    def g(A: T.Tensor((4,), "float16", bogus=1)):
        with T.Kernel(1, threads=32) as bx:
            A[0] = 0.0

    with pytest.raises(FrontendError) as e:
        T.prim_func(g)
    line = inspect.getsourcelines(g)[1]
    assert f":{line}:" in str(e.value) and "T.Tensor: got an unexpected keyword argument 'bogus'" in str(e.value)


def test_a_prim_func_typed_into_a_repl_says_what_to_do():
    namespace = {"T": T}
    exec("def k(A: T.Tensor((4,), 'float32')):\n    pass\n", namespace)  # no source file
    with pytest.raises(FrontendError, match=r"put the kernel in a \.py file.*T\.from_script\(text\)"):
        T.prim_func(namespace["k"])


# ---- honored forms compile to cubins ---------------------------------------------------------------
def _build(func, tmp_path):
    plan = lower(func, "sm_90a")
    assert emit_cute(plan)
    return tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path))


def test_tilelang_idioms_compile_softmax(tmp_path):
    """A T.dynamic row count, slices with folded extents, -T.infinity, the last-axis
    reduce default, exp2, clamp to T.max_value, astype, T.cast, a fragment allocated
    "local"."""
    f = _kernel("""
        s = T.alloc_shared((16, 128), "float16")
        x = T.alloc_fragment((16, 128), "float32")
        m = T.alloc_fragment((16,), "float32")
        l = T.alloc_fragment((16,), "float32")
        scale = T.alloc_fragment((1,), "float32", "local")
        scale[0] = T.log2(T.float32(2.0)) * T.rsqrt(T.float32(1.0))
        T.copy(A[bx * 16:(bx + 1) * 16, :], s)
        T.copy(s, x)
        T.fill(m, -T.infinity("float32"))
        T.reduce_max(x, m, clear=False)
        for i, j in T.Parallel(16, 128):
            x[i, j] = T.exp2((x[i, j] - m[i]) * scale[0] * 1.4426950408889634)
        T.reduce_sum(x, l)
        for i, j in T.Parallel(16, 128):
            v = T.clamp(T.abs(x[i, j] / l[i]), T.min_value("float16"), T.max_value("float16"))
            s[i, j] = T.if_then_else(v > 0.5, v.astype("float16"), T.cast(v * 0.5, "float16"))
        T.copy(s, B[bx * 16:(bx + 1) * 16, :])
    """, params='A: T.Tensor((M, 128), "float16"), B: T.Tensor((M, 128), "float16")',
                grid="T.ceildiv(M, 16)", head='M = T.dynamic("M")')
    assert [s.name for s in f.symbols] == ["M"]
    assert _build(f, tmp_path).kernels


def test_tilelang_idioms_compile_gemm_with_positional_transposes(tmp_path):
    f = _kernel("""
        a = T.alloc_shared((64, 32), "float16")
        b = T.alloc_shared((64, 32), "float16")
        c = T.alloc_fragment((64, 64), "float32")
        T.clear(c)
        for k in T.Pipelined(2, num_stages=2):
            T.copy(A[0, k * 32], a)
            T.copy(W[0, k * 32], b)
            T.gemm(a, b, c, False, True, T.GemmWarpPolicy.Square)
        T.copy(c, C[bx * 64:(bx + 1) * 64, 0:64])
    """, params='A: T.Tensor((64, 64), "float16"), W: T.Tensor((64, 64), "float16"), '
                'C: T.Tensor((256, 64), "float32")')
    (gemm,) = _stmts(f, N.Gemm)
    assert gemm.transpose_b and not gemm.transpose_a
    assert _build(f, tmp_path).kernels


def test_tilelang_idioms_compile_scalars_loops_and_bits(tmp_path):
    """T.alloc_var carried through a stepped serial loop, T.Pipelined without stages,
    bitwise operators, T.Parallel(coalesced_width=...), generic T.reduce."""
    f = _kernel("""
        total = T.alloc_var(T.int32, 0)
        for k in T.serial(0, 64, 8):
            total += (k >> 3) & 7 | (bx << 1) ^ ~k
        for k in T.Pipelined(4):
            total = total + T.shift_left(k, 1)
        x = T.alloc_fragment((4, 128), "float32")
        r = T.alloc_fragment((4,), "float32")
        for i, j in T.Parallel(4, 128, coalesced_width=2):
            x[i, j] = T.Cast("float32", A[i, j] + total)
        T.reduce(x, r, "absmax", 1, True)
        for i in T.Parallel(4):
            B[bx * 4 + i] = r[i] + T.sigmoid(T.float32(0.0))
    """, params='A: T.Tensor((4, 128), "int32"), B: T.Tensor((256,), "float32")', grid="64")
    loops = _stmts(f, N.For)
    assert [lp.vector_width for lp in loops if lp.kind == "parallel"][:2] == [1, 2]
    assert _build(f, tmp_path).kernels


# ---- forms added for the corpus (tests/corpus) ------------------------------------------------
def _eval(e, env):
    """The value of an int32 IR expression of Vars, Consts and + * // % min max."""
    if isinstance(e, N.Const):
        return int(e.value)
    if isinstance(e, N.Var):
        return env[e.name]
    if isinstance(e, N.Call) and e.name == "ceildiv":
        a, b = (_eval(x, env) for x in e.args)
        return -(-a // b)
    a, b = _eval(e.a, env), _eval(e.b, env)
    ops = {"add": int.__add__, "sub": int.__sub__, "mul": int.__mul__, "floordiv": int.__floordiv__,
           "mod": int.__mod__, "min": min, "max": max}
    return ops[e.op](a, b)


@pytest.mark.parametrize("domain, waves, group", [((3, 5), 4, 8), ((4, 7), 5, 2), ((2, 3, 5), 7, 2),
                                                   ((6,), 4, 4)])
def test_persistent_walks_every_tile_once(domain, waves, group):
    """T.Persistent(domain, wave_size, index, group_size) is TileLang's loop: over all blocks
    and waves, every tile of the domain runs exactly once."""
    names = ", ".join(f"v{i}" for i in range(len(domain)))
    f = _kernel(f"""
        for {names} in T.Persistent({list(domain)}, {waves}, bx, {group}):
            B[0, 0] = T.float16(v0)
    """, grid=str(waves))
    (loop,) = [s for s in _stmts(f, N.For)]
    assert loop.kind == "serial"
    lets = [s for s in loop.body if isinstance(s, N.Let)]
    (guard,) = [s for s in loop.body if isinstance(s, N.If)]
    seen = []
    for bx in range(waves):
        for w in range(_eval(loop.extent, {})):
            env = {"bx": bx, loop.var.name: w}
            for let in lets:
                env[let.var.name] = _eval(let.value, env)
            last = env[lets[-1].var.name]
            if last < _eval(guard.cond.b, env):
                seen.append(tuple(env[let.var.name] for let in lets[1:]))
    import itertools
    assert sorted(seen) == sorted(itertools.product(*(range(d) for d in domain)))


def test_vectorized_is_a_per_thread_loop():
    f = _kernel("""
        x = T.alloc_local((8,), "float16")
        for i in T.vectorized(8):
            x[i] = A[bx, i]
        for i in T.Vectorized(2, 6):
            B[bx, i] = x[i]
    """)
    loops = _stmts(f, N.For)
    assert [(lp.kind, _eval(lp.start, {}), _eval(lp.extent, {})) for lp in loops] == \
        [("unrolled", 0, 8), ("unrolled", 2, 4)]


def test_tuple_assignment_reads_every_value_first():
    f = _kernel("""
        bb, bh = bx // 2, bx % 2
        bb, bh = bh, bb
        B[bb, bh] = A[bh, bb]
    """)
    lets = _stmts(f, N.Let)
    env = {"bx": 5}
    for let in lets:
        env[let.var.name] = _eval(let.value, env)
    (store,) = _stmts(f, N.Store)
    assert [_eval(i, env) for i in store.indices] == [1, 2]


def test_pipelined_stage_and_order_as_tilecute_schedules():
    """stage= puts the global-to-shared copies in stage 0 and the rest in the last stage:
    num_stages = max(stage) + 1; scalar bindings do not count; all in stage 0 is a serial
    loop."""
    body = """
        a = T.alloc_shared((64, 64), "float16")
        b = T.alloc_shared((64, 64), "float16")
        c = T.alloc_fragment((64, 64), "float32")
        for k in T.Pipelined(4, stage={stage}, order={order}):
            base = k * 64
            T.copy(A[base, 0], a)
            T.copy(A[base, 0], b)
            T.gemm(a, b, c)
    """
    for stage, order, want in (([0, 0, 2], [0, 1, 2], ("pipelined", 3)), ([0, 0, 1], None, ("pipelined", 2)),
                               ([0, 0, 0], [0, 1, 2], ("serial", 0))):
        f = _kernel(body.format(stage=stage, order=order))
        (loop,) = _stmts(f, N.For)
        assert (loop.kind, loop.num_stages) == want


def test_atomic_max_and_min(tmp_path):
    f = _kernel("""
        x = T.alloc_fragment((64,), "float32")
        for i in T.Parallel(64):
            x[i] = T.Cast("float32", A[bx, i])
        for i in T.Parallel(64):
            T.atomic_max(M[0], x[i])
            T.atomic_min(M[1], x[i], memory_order="relaxed")
        T.atomic_max(M[2:4], x[0:2])
        T.atomic_add(M[2:4], x[2:4])
    """, params='A: T.Tensor((256, 64), "float16"), M: T.Tensor((4,), "float32")')
    # a sliced value is a tile (it used to be read as an element and refused)
    assert [(a.op, isinstance(a.value, N.Region)) for a in _stmts(f, N.AtomicAdd)] == \
        [("max", False), ("min", False), ("max", True), ("add", True)]
    assert "T.atomic_min(M[1], x[i_1])" in f.script()
    src = emit_cute(lower(f, "sm_90a"))
    assert "tca.atomic_max(M, (0,), " in src and "tca.atomic_min(M, (1,), " in src
    assert _build(f, tmp_path).kernels
    from tilecute.ir.validate import ValidationError

    with pytest.raises(ValidationError, match=r"T.atomic_max into 'B' \(float64\): atomic max/min take "
                                              "float32, int32, uint32, int64, uint64, float16, bfloat16"):
        _kernel("T.atomic_max(B[0, 0], 1.0)", params='B: T.Tensor((4, 4), "float64")')


def test_bitwise_reductions(tmp_path):
    f = _kernel("""
        x = T.alloc_fragment((4, 128), "int32")
        r = T.alloc_fragment((4,), "int32")
        T.copy(A[bx * 4, 0], x)
        T.reduce_bitor(x, r, dim=1)
        T.reduce(x, r, "bitxor", 1, False)
        for i in T.Parallel(4):
            B[bx * 4 + i] = r[i]
    """, params='A: T.Tensor((256, 128), "int32"), B: T.Tensor((256,), "int32")')
    assert [(s.kind, s.clear) for s in _stmts(f, N.Reduce)] == [("bitor", True), ("bitxor", False)]
    src = emit_cute(lower(f, "sm_90a"))
    assert "tcr.warp_allreduce(" in src and "\"bitor\", 32)" in src and "tcr.combine(r[" in src
    assert _build(f, tmp_path).kernels


def test_wait_wgmma_is_honored(tmp_path):
    """T.wait_wgmma(n) / T.warpgroup_wait(n) after a T.gemm(..., wg_wait=1): the batches
    left in flight are waited for there (and the accumulator read after it)."""
    import tilecute
    from tilecute.ir import nodes as N

    src = '''
@T.prim_func
def g(A: T.Tensor((128, 64), "float16"), B: T.Tensor((128, 64), "float16"), C: T.Tensor((128, 128), "float32")):
    with T.Kernel(1, threads=128) as bx:
        A_s = T.alloc_shared((128, 64), "float16")
        B_s = T.alloc_shared((128, 64), "float16")
        acc = T.alloc_fragment((128, 128), "float32")
        T.copy(A[0, 0], A_s)
        T.copy(B[0, 0], B_s)
        T.gemm(A_s, B_s, acc, transpose_B=True, clear_accum=True, wg_wait=1)
        WAIT
        T.copy(acc, C[0, 0])
'''
    for form in ("T.wait_wgmma(0)", "T.warpgroup_wait(0)"):
        f = T.from_script(src.replace("WAIT", form))
        assert [s.pending for s in f.kernels[0].body if isinstance(s, N.WaitWgmma)] == [0]
    tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path))
    assert "tcm.wait_batches(0)" in (tmp_path / "kernel_cute.py").read_text()
    with pytest.raises(Exception, match=r"T.wait_wgmma: id=-1"):
        T.from_script(src.replace("WAIT", "T.wait_wgmma(-1)"))


def test_barrier_arrive_and_wait_are_the_mbarrier_forms():
    """TileLang's T.barrier_arrive / T.barrier_wait are T.mbarrier_arrive /
    T.mbarrier_wait_parity; a wait without a parity is refused by name."""
    from tilecute.ir import nodes as N
    from tilecute.ir.visitor import walk_stmts

    src = '''
@T.prim_func
def k(A: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        bar = T.alloc_barrier([128])
        T.barrier_arrive(bar[0])
        T.barrier_wait(bar[0], 0)
        A[0] = 1.0
'''
    f = T.from_script(src)
    kinds = [type(s).__name__ for s in walk_stmts(f.kernels[0].body)]
    assert "MBarrierArrive" in kinds and "MBarrierWait" in kinds
    with pytest.raises(Exception, match=r"T.barrier_wait: missing a required argument: .parity."):
        T.from_script(src.replace("T.barrier_wait(bar[0], 0)", "T.barrier_wait(bar[0])"))


WORKSPACE = '''import tilecute.language as T
n = T.symbolic("n")


@T.prim_func
def two_pass(X: T.Tensor((n, 64), "float32"), Y: T.Tensor((n,), "float32")):
    partial = T.alloc_global({shape}, "float32")
    with T.Kernel(n, threads=64) as b:
        partial[b, T.get_thread_binding()] = X[b, T.get_thread_binding()] * 2
    with T.Kernel(n, threads=1) as b:
        acc = T.alloc_var("float32")
        for i in T.serial(64):
            acc += partial[b, i]
        Y[b] = acc
'''


def test_alloc_global_is_a_workspace_param():
    """T.alloc_global: a last, hidden param the launch ABI marks; the printed script
    re-parses to the same function."""
    from tilecute.transform.pipeline import lower

    func = T.from_script(WORKSPACE.format(shape="(n, 64)"))
    assert [p.name for p in func.params] == ["X", "Y", "partial"]
    assert func.workspaces == ("partial",)
    assert 'partial = T.alloc_global((n, 64), "float32")' in func.script()
    from tilecute.ir.serialize import canonical_json

    assert canonical_json(T.from_script(func.script())) == canonical_json(func)
    abi = lower(func, "sm_90a").abi
    assert [(a.name, a.workspace) for a in abi.args] == [("X", False), ("Y", False), ("partial", True)]


@pytest.mark.parametrize("shape,msg", [
    ("(n * 2, 64)", "dim 0 of a T.alloc_global is"),
    ("(T.symbolic('m'), 64)", "dim 0 of a T.alloc_global is"),
    ("(0, 64)", "dim 0 of a T.alloc_global is"),
])
def test_alloc_global_refuses_dims_no_call_can_size(shape, msg):
    with pytest.raises(FrontendError, match=msg):
        T.from_script(WORKSPACE.format(shape=shape))


def test_alloc_global_refuses_other_scopes():
    with pytest.raises(FrontendError, match="T.alloc_global allocates in 'global'"):
        T.from_script(WORKSPACE.format(shape='(n, 64), "float32", "shared"').replace(
            ', "float32")\n    with', ')\n    with', 1))


def test_dtype_type_annotates_factory_arguments():
    """TileLang's ``dtype: T.dtype = T.float16`` factory annotations: ``T.dtype`` is the type
    of ``T.float16``; called on a name or a torch dtype it gives the canonical dtype, which
    then declares a tensor like the ``T.*`` constant does."""
    import torch

    assert isinstance(T.float16, T.dtype) and T.dtype("half") == T.float16
    assert T.dtype(torch.bfloat16) == T.bfloat16 and T.dtype("float8_e4m3fn") == T.float8_e4m3

    def make(n: int, dtype: T.dtype = T.float16):
        @T.prim_func
        def neg(A: T.Tensor((n,), dtype), B: T.Tensor((n,), T.dtype("float"))):
            with T.Kernel(1, threads=128) as _:
                for i in T.Parallel(n):
                    B[i] = -T.Cast("float32", A[i])
        return neg

    func = make(128, T.dtype(torch.bfloat16))
    assert [p.dtype for p in func.params] == ["bfloat16", "float32"]
    with pytest.raises(ValueError, match="float17"):
        T.dtype("float17")


def test_thread_binding_is_the_kernels_thread_index():
    """TVM's ``T.thread_binding(0, n, thread=...)`` as TileLang kernels use it (``tx =
    T.thread_binding(0, 128, "threadIdx.x")``): the T.Kernel's thread index of that dim;
    another range than the launched one is refused naming it."""
    text = HEADER.format(params="") + (
        "        tx = T.thread_binding(0, 128, thread=\"threadIdx.x\")\n"
        "        ty = T.thread_binding(0, 1, \"threadIdx.y\")\n"
        "        C[tx + ty] = T.float32(1.0)\n")
    script = T.from_script(text).script()
    assert "tx = T.get_thread_binding(0)" in script and "ty = T.get_thread_binding(1)" in script
    assert "the range must be 0..128" in _error(text.replace("0, 128, thread", "0, 64, thread"))
    one_bound = text.replace("(0, 128, thread", "(128, thread")  # TVM: one bound is the extent
    assert "tx = T.get_thread_binding(0)" in T.from_script(one_bound).script()
    assert "thread= is required" in _error(text.replace(', thread=\"threadIdx.x\"', ""))
    assert "thread='blockIdx.x' is not supported" in _error(
        text.replace('thread=\"threadIdx.x\"', 'thread=\"blockIdx.x\"'))


def test_an_unknown_t_statement_is_named():
    """A ``T.<name>(...)`` statement tilecute does not have is an error naming
    ``T.<name>`` at its line, not a generic one; a name of TileLang's language namespace
    (``T.tma_gather4``, ``T.add2``, TVM's ``T.call_packed``) says it is TileLang's."""
    msg = _error(HEADER.format(params="") + "        T.no_such_form(1)\n")
    assert "T.no_such_form is not a tilecute form" in msg and "<script>:" in msg
    for call in ("T.tma_gather4(C, C)", "T.call_packed(1)", "C[0] = T.vscale()",
                 "C[0] = T.q_multiply_shift(bx, 2, 31, 0)"):
        msg = _error(HEADER.format(params="") + f"        {call}\n")
        name = call.split("T.")[1].split("(")[0]
        assert f"T.{name} is a TileLang form that tilecute does not support" in msg, msg
        assert "<script>:" in msg


def test_select_with_a_constant_condition_builds(tmp_path):
    """``T.if_then_else(True, a, b)`` / ``T.Select(False, a, b)`` (a condition known at parse
    time, as TileLang's select test writes) is the chosen value: CuTe DSL's select_ takes
    runtime conditions only."""
    import tilecute

    text = HEADER.format(params="") + (
        "        C[0] = T.if_then_else(True, x, T.float32(0))\n"
        "        C[1] = T.Select(False, x, T.float32(2))\n")
    func = T.from_script(text)
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names
    src = (tmp_path / "kernel_cute.py").read_text()
    assert "select_(True" not in src and "select_(False" not in src


FILL_WHOLE = '''import tilecute.language as T


@T.prim_func
def fill_all(A: T.Tensor((32,), "float16"), B: T.Tensor((4, 64), "float32")):
    with T.Kernel(1, threads=32) as _:
        T.fill(A, T.infinity("float16"))
        T.fill(B, 1.5)
'''


def test_fill_of_a_whole_global_buffer(tmp_path):
    """``T.fill(A, v)`` with a bare global tensor fills all of it (TileLang's get_inf kernel
    idiom), where ``T.fill(A[0, 0], v)`` is the one element (tests/test_argument_audit.py)."""
    import tilecute

    func = T.from_script(FILL_WHOLE)
    assert "T.fill(A[0:32]" in func.script() and "T.fill(B[0:4, 0:64]" in func.script()
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_fill_of_a_whole_global_buffer_on_gpu():
    import torch

    import tilecute

    kernel = tilecute.compile(T.from_script(FILL_WHOLE))
    a = torch.zeros(32, device="cuda", dtype=torch.float16)
    b = torch.zeros(4, 64, device="cuda")
    kernel(a, b)
    assert torch.isinf(a).all() and (b == 1.5).all()


def test_alloc_var_refuses_an_initializer_its_dtype_cannot_hold():
    """``T.alloc_var(T.float32, init=1e300)`` is an error naming the value and the dtype (as
    in TileLang), not a silent infinity; float64 holds it."""
    text = HEADER.format(params="") + "        v = T.alloc_var(T.float32, init=1e300)\n"
    assert "init=1e+300 exceeds maximum of float32" in _error(text)
    T.from_script(text.replace("T.float32, init", "T.float64, init"))
