"""TVM's thread all-reduce as TileLang's GEMV examples write it:

    with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, accum)]), "reduce_scope",
                T.reinterpret(T.uint64(0), dtype="handle")):
        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, red[0], tk, dtype="handle"))

Every thread of the block takes part; the threads that differ only in the listed thread
indices form a group and each gets its group's combination in ``red[0]`` (TVM's
``LowerThreadAllreduce``).  CPU: parsing, the steps, the generated code, cubins for 8 to
1024 threads, 2-D and 3-D blocks and every reducer kind; GPU: the results against torch."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.language import FrontendError
from tilecute.transform.analysis import AllReduceStep, allreduce_steps
from tilecute.transform.pipeline import lower


def _allreduce(threads, dims, dtype="float32", comb=lambda x, y: x + y, ident=0, cond=None):
    """Each thread loads A[its linear index], all-reduces over the thread dims ``dims``
    with ``comb`` and stores its result at C[its linear index]; with ``cond`` (a value)
    only threads whose element is not ``cond`` contribute."""
    threads = tuple(threads)
    X, Y, Z = threads + (1,) * (3 - len(threads))
    tvars = tuple(T.get_thread_binding(d) for d in dims)
    n = X * Y * Z

    @T.prim_func
    def allreduce(A: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
        with T.Kernel(1, threads=threads):
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            tz = T.get_thread_binding(2)
            t = tx + ty * X + tz * X * Y
            v = T.alloc_local((1,), dtype)
            red = T.alloc_local((1,), dtype)
            v[0] = A[t]
            with T.attr(T.comm_reducer(comb, [T.cast(ident, dtype)]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v[0],
                                                  True if cond is None else v[0] != cond,
                                                  red[0], *tvars, dtype="handle"))
            C[t] = red[0]
    return allreduce


def _source(func) -> str:
    return emit_cute(lower(func, "sm_90a"))


def _calls(source: str) -> list[str]:
    """The lines calling tilecute.runtime.cute.reduce, temporaries numbered from 1."""
    lines = [line.strip() for line in source.splitlines() if "tcr." in line]
    names: dict = {}
    return [re.sub(r"tc_([a-z]+)\d+", lambda m: names.setdefault(m.group(0), f"tc_{m.group(1)}{len(names) + 1}"), x)
            for x in lines]


# ---- the parsed statement --------------------------------------------------------------------
def test_parses_into_one_statement():
    func = _allreduce((4, 32), (1,))
    (s,) = [x for x in func.kernels[0].body if isinstance(x, N.ThreadAllReduce)]
    assert s.dims == (1,) and s.op == "sum" and s.dsts == ("red",)
    assert s.results[0] == N.BinOp("add", s.lhs[0], s.rhs[0], "float32")


@pytest.mark.parametrize("comb,op", [
    (lambda x, y: x + y, "sum"), (lambda x, y: y + x, "sum"), (lambda x, y: T.max(x, y), "max"),
    (lambda x, y: T.min(y, x), "min"), (lambda x, y: x * y, ""), (lambda x, y: x - y, "")])
def test_combiner_kinds(comb, op):
    (s,) = [x for x in _allreduce((64,), (0,), comb=comb).kernels[0].body
            if isinstance(x, N.ThreadAllReduce)]
    assert s.op == op


def test_round_trips_through_the_printer():
    func = _allreduce((4, 32), (1,), comb=lambda x, y: x * y, ident=1, cond=0.0)
    assert T.from_script(func.script()) == func


def test_named_combiner_function_and_int_identity():
    def add(a, b):
        return a + b

    (s,) = [x for x in _allreduce((32,), (0,), "int32", comb=add).kernels[0].body
            if isinstance(x, N.ThreadAllReduce)]
    assert s.op == "sum" and s.identity == (N.Const(0, "int32"),)


def test_condition_gives_the_identity():
    (s,) = [x for x in _allreduce((32,), (0,), comb=lambda x, y: T.max(x, y), ident=-1.0,
                                  cond=0.0).kernels[0].body if isinstance(x, N.ThreadAllReduce)]
    assert isinstance(s.values[0], N.Select) and s.values[0].b == N.Const(-1.0, "float32")


def test_threads_of_extent_one_store_the_value():
    # TVM: a reduction over one thread is the value itself (a thread dim of extent 1)
    func = _allreduce((32, 1), (1,))
    assert not any(isinstance(x, N.ThreadAllReduce) for x in func.kernels[0].body)
    assert any(isinstance(x, N.Store) and x.buffer == "red" for x in func.kernels[0].body)


def test_attr_written_as_a_statement_covers_the_rest_of_the_block():
    # TVMScript's frame form (TileLang's dequantize fine-grained example)
    @T.prim_func
    def frame(A: T.Tensor((128,), "float16"), C: T.Tensor((4,), "float16")):
        with T.Kernel(1, threads=(32, 4)):
            rk = T.get_thread_binding(0)
            ni = T.get_thread_binding(1)
            acc = T.alloc_local((1,), "float16")
            red = T.alloc_local((1,), "float16")
            for n in T.serial(2):
                acc[0] = A[rk + ni * 32]
                T.attr(T.comm_reducer(lambda x, y: x + y, [T.float16(0)]), "reduce_scope",
                       T.reinterpret(T.uint64(0), dtype="handle"))
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, red[0], rk,
                                                  dtype="handle"))
                if rk == 0:
                    C[ni] = red[0]
    (loop,) = [s for s in frame.kernels[0].body if isinstance(s, N.For)]
    assert [type(s).__name__ for s in loop.body] == ["Store", "ThreadAllReduce", "If"]


def test_several_values_reduce_together():
    @T.prim_func
    def argmax(A: T.Tensor((256,), "float32"), V: T.Tensor((256,), "float32"),
               I: T.Tensor((256,), "int32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            rv = T.alloc_local((1,), "float32")
            ri = T.alloc_var(T.int32)
            with T.attr(T.comm_reducer(lambda v0, i0, v1, i1: (T.Select(v0 >= v1, v0, v1),
                                                               T.Select(v0 >= v1, i0, i1)),
                                       [T.min_value("float32"), -1]),
                        "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(2), A[tx], tx, True, rv[0], ri, tx,
                                                  dtype="handle"))
            V[tx] = rv[0]
            I[tx] = ri
    (s,) = [x for x in argmax.kernels[0].body if isinstance(x, N.ThreadAllReduce)]
    assert s.op == "" and s.dsts == ("rv", "ri") and len(s.results) == 2
    assert T.from_script(argmax.script()) == argmax
    calls = _calls(_source(argmax))
    assert "tcr.warp_allreduce(" in calls[0] and "tcr.gather_allreduce(" in calls[1]


# ---- refusals --------------------------------------------------------------------------------
def _program(body: str, threads="(32, 4)") -> str:
    return f'''
import tilecute.language as T

@T.prim_func
def k(A: T.Tensor((128,), "float32"), C: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads={threads}):
        tx = T.get_thread_binding(0)
        ty = T.get_thread_binding(1)
        v = T.alloc_local((1,), "float32")
        r = T.alloc_local((1,), "float32")
        s = T.alloc_shared((1,), "float32")
{body}
'''


_ATTR = ('        with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0)]), "reduce_scope", '
         'T.reinterpret(T.uint64(0), dtype="handle")):\n')


@pytest.mark.parametrize("body,match", [
    ('        with T.attr(0, "pragma_unroll", 1):\n            v[0] = A[0]',
     r":12: .*T.attr: attr_key='pragma_unroll' is not supported"),
    ('        with T.attr(0, "reduce_scope", 0):\n            v[0] = A[0]',
     r":12: .*the node must be T.comm_reducer\(combiner, identity\); got `0`"),
    ('        T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v[0], True, r[0], tx, dtype="handle"))',
     r":12: .*outside a `with T.attr\(T.comm_reducer"),
    (_ATTR + '            T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v[0], True, r[0], '
             'tx + 1, dtype="handle"))', r":13: .*reduced over thread indices.*`tx \+ 1`"),
    (_ATTR + '            T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v[0], True, s[0], '
             'tx, dtype="handle"))', r":13: .*element 0 of a local buffer"),
    (_ATTR + '            T.evaluate(T.tvm_thread_allreduce(T.uint32(2), v[0], True, r[0], '
             'tx, dtype="handle"))', r":13: .*T.uint32\(1\) for a reducer of 1"),
    ('        if tx < 8:\n    ' + _ATTR.replace("\n", "\n    ") +
     '            T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v[0], True, r[0], tx, '
     'dtype="handle"))', r":14: .*inside a T.ws region or a branch on the thread index"),
    ('        with T.attr(T.comm_reducer(lambda x, y: x + y, [T.float32(0), T.float32(0)]), '
     '"reduce_scope", 0):\n            v[0] = A[0]', r":12: .*takes 2 parameter\(s\); with 2 "
                                                  r"identity value\(s\) it takes 4"),
])
def test_refusals_name_the_form_and_line(body, match):
    with pytest.raises(FrontendError, match=match):
        T.from_script(_program(body))


def test_identity_of_another_dtype_with_a_condition_is_refused():
    body = ('        with T.attr(T.comm_reducer(lambda x, y: x + y, [T.int32(0)]), "reduce_scope", '
            '0):\n            T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v[0], v[0] > 0, '
            'r[0], tx, dtype="handle"))')
    with pytest.raises(FrontendError, match=r":13: .*contributes the identity, int32"):
        T.from_script(_program(body))


# ---- the steps ---------------------------------------------------------------------------------
@pytest.mark.parametrize("threads,dims,steps", [
    ((128,), (0,), [(1, 128, 32)]),
    ((8,), (0,), [(1, 8, 8)]),
    ((48,), (0,), [(1, 48, 1)]),                       # not a power of two: shared memory
    ((2, 32), (1,), [(2, 32, 16)]),                    # TileLang's GEMV: threads=(BLOCK_N, 32)
    ((32, 4), (0,), [(1, 32, 32)]),                    # the GEMV test: threads=(32, n_partition)
    ((32, 32), (1,), [(32, 32, 1)]),
    ((6, 16), (1,), [(6, 16, 1)]),
    ((4, 4, 4), (0, 2), [(1, 4, 4), (16, 4, 2)]),      # two runs: x, then z
    ((4, 1, 8), (0, 2), [(1, 32, 32)]),                # an extent-1 dim between: one run
    ((8, 4, 2), (0, 1), [(1, 32, 32)]),
])
def test_steps(threads, dims, steps):
    assert allreduce_steps(threads, dims) == [AllReduceStep(*s) for s in steps]


def test_generated_code_of_the_gemv_shape():
    calls = _calls(_source(_allreduce((2, 32), (1,))))
    assert calls == ['tc_ar1 = tcr.warp_allreduce(tc_ar1, "sum", 16, 2)',
                     'tc_ar1 = tcr.gather_allreduce(tc_ar1, "sum", allreduce_scratch0, tc_tid, '
                     'tc_tid % 2, 32, 2)']


def test_whole_warps_use_block_allreduce():
    calls = _calls(_source(_allreduce((256,), (0,))))
    assert calls[0] == 'tc_ar1 = tcr.warp_allreduce(tc_ar1, "sum", 32)'
    assert calls[1].startswith('tcr.block_allreduce(tc_red2, "sum", allreduce_scratch0, 8, 8)')


def test_custom_combiner_is_a_lambda_in_the_generated_code():
    calls = _calls(_source(_allreduce((16,), (0,), "int32", comb=lambda x, y: x * y, ident=1)))
    assert calls == ["tc_ar1 = tcr.warp_allreduce(tc_ar1, lambda x, y: x * y, 16)"]


# ---- cubins ------------------------------------------------------------------------------------
_SHAPES = [((32,), (0,)), ((64,), (0,)), ((128,), (0,)), ((256,), (0,)), ((512,), (0,)),
           ((1024,), (0,)), ((8,), (0,)), ((48,), (0,)), ((2, 32), (1,)), ((4, 8), (1,)),
           ((32, 32), (1,)), ((16, 64), (1,)), ((64, 4), (0,)), ((6, 16), (1,)),
           ((4, 4, 4), (0, 2)), ((2, 4, 8), (1,)), ((8, 8, 16), (1, 2)), ((2, 512), (1,))]


@pytest.mark.parametrize("threads,dims", _SHAPES)
def test_cubins_for_block_shapes(threads, dims, tmp_path):
    assert tilecute.build_cubin(_allreduce(threads, dims), "sm_90a", out_dir=str(tmp_path)).kernel_names


_REDUCERS = [
    ("sum", "float32", lambda x, y: x + y, 0),
    ("max", "float32", lambda x, y: T.max(x, y), -1e30),
    ("min", "float16", lambda x, y: T.min(x, y), 60000.0),
    ("prod", "float32", lambda x, y: x * y, 1),
    ("prod8", "int8", lambda x, y: x * y, 1),
    ("custom", "int32", lambda x, y: x + y + x * y, 0),
    ("bitand", "int32", lambda x, y: x & y, -1),
    ("bitor", "int32", lambda x, y: x | y, 0),
    ("umax", "uint32", lambda x, y: T.max(x, y), 0),
    ("bitxor", "int64", lambda x, y: x ^ y, 0),
    ("sum8", "int8", lambda x, y: x + y, 0),
    ("sum16", "int16", lambda x, y: x + y, 0),
    ("bf16", "bfloat16", lambda x, y: x + y, 0),
    ("f64", "float64", lambda x, y: T.max(x, y), -1e300),
]


@pytest.mark.parametrize("name,dtype,comb,ident", _REDUCERS, ids=[r[0] for r in _REDUCERS])
def test_cubins_for_reducers(name, dtype, comb, ident, tmp_path):
    for threads, dims in (((256,), (0,)), ((4, 16), (1,))):
        func = _allreduce(threads, dims, dtype, comb, ident)
        assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path / str(threads))).kernel_names


# ---- GPU ---------------------------------------------------------------------------------------
def _reference(a, threads, dims, fn):
    """Each element replaced by ``fn`` over its group (the elements that differ only in the
    reduced thread dims), as int64 / float64, in a's shape."""
    import torch

    X, Y, Z = tuple(threads) + (1,) * (3 - len(threads))
    x = a.reshape(Z, Y, X)
    axes = sorted({2 - d for d in dims}, reverse=True)
    r = x
    for ax in axes:
        r = fn(r, ax)
    return r.expand(Z, Y, X).reshape(-1)


@pytest.mark.gpu
@pytest.mark.parametrize("threads,dims", _SHAPES)
def test_sum_on_gpu(threads, dims):
    import torch

    kernel = tilecute.compile(_allreduce(threads, dims))
    X, Y, Z = tuple(threads) + (1,) * (3 - len(threads))
    a = torch.randn(X * Y * Z, device="cuda")
    c = torch.empty_like(a)
    kernel(a, c)
    ref = _reference(a.double(), threads, dims, lambda t, ax: t.sum(ax, keepdim=True))
    torch.testing.assert_close(c, ref.float(), rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("name,dtype,comb,ident", _REDUCERS, ids=[r[0] for r in _REDUCERS])
@pytest.mark.parametrize("threads,dims", [((8,), (0,)), ((256,), (0,)), ((4, 16), (1,)),
                                          ((32, 32), (1,)), ((6, 16), (1,))])
def test_reducers_on_gpu(name, dtype, comb, ident, threads, dims):
    import torch

    tdt = getattr(torch, dtype)
    X, Y, Z = tuple(threads) + (1,) * (3 - len(threads))
    n = X * Y * Z
    g = torch.Generator(device="cuda").manual_seed(0)
    if tdt.is_floating_point:
        if name == "prod":
            a = (1 + 0.01 * torch.randn(n, device="cuda", generator=g)).to(tdt)
        elif name == "bf16":  # partial sums that bfloat16 holds exactly, in any order
            a = torch.randint(-1, 2, (n,), device="cuda", generator=g).to(tdt)
        else:
            a = torch.randn(n, device="cuda", generator=g).to(tdt)
    else:
        lo, hi = (-3, 4) if name.startswith("prod") or name == "custom" else (-100, 100)
        if dtype == "uint32":  # (torch's uint32 lacks arithmetic: made from int64)
            a = torch.randint(0, 1 << 31, (n,), device="cuda", generator=g)
            a = (a * 2 + 1).to(tdt)
        else:
            a = torch.randint(lo, hi, (n,), device="cuda", generator=g).to(tdt)
    c = torch.empty_like(a)
    tilecute.compile(_allreduce(threads, dims, dtype, comb, ident))(a, c)
    if tdt.is_floating_point:
        wide = a.double()
    elif dtype == "uint32":
        wide = a.view(torch.int32).long() & 0xFFFFFFFF
    else:
        wide = a.long()

    def fold(f):
        def run(t, ax):
            parts = t.unbind(ax)
            acc = parts[0]
            for p in parts[1:]:
                acc = f(acc, p)
            return acc.unsqueeze(ax)
        return run
    keep = lambda f: lambda t, ax: f(t, ax, keepdim=True)  # noqa: E731
    fn = {"sum": keep(torch.sum), "sum8": keep(torch.sum), "sum16": keep(torch.sum),
          "bf16": keep(torch.sum), "max": keep(torch.amax), "f64": keep(torch.amax),
          "umax": keep(torch.amax), "min": keep(torch.amin), "prod": keep(torch.prod),
          "prod8": fold(lambda p, q: p * q), "custom": fold(lambda p, q: p + q + p * q),
          "bitand": fold(lambda p, q: p & q), "bitor": fold(lambda p, q: p | q),
          "bitxor": fold(lambda p, q: p ^ q)}[name]
    ref = _reference(wide, threads, dims, fn)
    if tdt.is_floating_point:
        tol = 1e-4 if dtype in ("float32", "float64") else 0  # (min and exact sums)
        torch.testing.assert_close(c.double(), ref.to(tdt).double(), rtol=tol, atol=tol)
    else:  # integers wrap at the element's width, on the device as in TVM's C++
        bits = tdt.itemsize * 8
        got = c.view(torch.int32).long() if dtype == "uint32" else c.long()
        if bits < 64:
            assert torch.equal((got - ref) % (1 << bits), torch.zeros_like(ref))
        else:
            assert torch.equal(got, ref)


@pytest.mark.gpu
def test_condition_on_gpu():
    import torch

    a = torch.randn(128, device="cuda")
    a[::3] = 0.0
    c = torch.empty_like(a)
    tilecute.compile(_allreduce((4, 32), (1,), comb=lambda x, y: T.max(x, y), ident=-1e30,
                                cond=0.0))(a, c)
    masked = torch.where(a != 0, a, torch.full_like(a, -1e30))
    ref = _reference(masked, (4, 32), (1,), lambda t, ax: t.amax(ax, keepdim=True))
    torch.testing.assert_close(c, ref)


@pytest.mark.gpu
@pytest.mark.parametrize("block_n,reduce_threads", [(2, 32), (4, 8), (32, 4), (8, 32), (1, 128)])
def test_gemv_on_gpu(block_n, reduce_threads):
    """TileLang's split-K GEMV with the thread all-reduce over threadIdx.y."""
    import torch

    N, K, tile_k = 256, 1024, 8
    block_k = reduce_threads * tile_k

    @T.prim_func
    def gemv(A: T.Tensor((K,), "float16"), B: T.Tensor((N, K), "float16"),
             C: T.Tensor((N,), "float16")):
        with T.Kernel(T.ceildiv(N, block_n), threads=(block_n, reduce_threads)) as bn:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            a = T.alloc_local((tile_k,), "float16")
            b = T.alloc_local((tile_k,), "float16")
            acc = T.alloc_local((1,), "float32")
            T.clear(acc)
            for bk in T.serial(T.ceildiv(K, block_k)):
                for k in T.vectorized(tile_k):
                    a[k] = A[bk * block_k + tk * tile_k + k]
                    b[k] = B[bn * block_n + tn, bk * block_k + tk * tile_k + k]
                for k in T.serial(tile_k):
                    acc[0] += a[k].astype("float32") * b[k].astype("float32")
            red = T.alloc_local((1,), "float32")
            with T.attr(T.comm_reducer(lambda x, y: x + y, [T.cast(0, "float32")]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, red[0], tk,
                                                  dtype="handle"))
            C[bn * block_n + tn] = red[0]

    a = torch.randn(K, device="cuda", dtype=torch.float16)
    b = torch.randn(N, K, device="cuda", dtype=torch.float16)
    c = torch.empty(N, device="cuda", dtype=torch.float16)
    tilecute.compile(gemv)(a, b, c)
    torch.testing.assert_close(c, (b.float() @ a.float()).half(), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("threads", [(1, 256), (4, 64), (2, 16), (3, 10)])
def test_argmax_on_gpu(threads):
    """A reducer of two values (TVM's argmax form): the greatest value and its ty."""
    import torch

    X, Y = threads
    n = X * Y

    @T.prim_func
    def argmax(A: T.Tensor((n,), "float32"), V: T.Tensor((n,), "float32"),
               I: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=threads):
            tx = T.get_thread_binding(0)
            ty = T.get_thread_binding(1)
            rv = T.alloc_local((1,), "float32")
            ri = T.alloc_var(T.int32)
            with T.attr(T.comm_reducer(lambda v0, i0, v1, i1: (T.Select(v0 >= v1, v0, v1),
                                                               T.Select(v0 >= v1, i0, i1)),
                                       [T.min_value("float32"), -1]),
                        "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(2), A[tx + ty * X], ty, True, rv[0],
                                                  ri, ty, dtype="handle"))
            V[tx + ty * X] = rv[0]
            I[tx + ty * X] = ri

    a = torch.randperm(n, device="cuda").float()
    v, i = torch.empty_like(a), torch.empty(n, device="cuda", dtype=torch.int32)
    tilecute.compile(argmax)(a, v, i)
    grid = a.reshape(Y, X)
    torch.testing.assert_close(v.reshape(Y, X), grid.amax(0, keepdim=True).expand(Y, X))
    assert torch.equal(i.reshape(Y, X).long(), grid.argmax(0, keepdim=True).expand(Y, X))
