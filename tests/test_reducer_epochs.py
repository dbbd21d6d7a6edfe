"""TileLang's reducer epochs: ``T.alloc_reducer`` without ``replication``, opened by
``T.reducer_init(acc[, init])``, fed by ``T.reducer_update(acc[i], v)`` inside T.Parallel
loops (each logical iteration contributes once), closed by ``T.finalize_reducer(acc,
dst)`` (the init value combined once per output); the bitwise ops; the lifecycle checks."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.language.parser import FrontendError
from tilecute.transform.pipeline import lower


def _tally(n=8, threads=128, seed=None, dtype="float32", op="sum"):
    """n values summed by a block of `threads` (the T.Parallel loop has fewer iterations
    than the block has threads), plus a starting value."""
    @T.prim_func
    def tally(A: T.Tensor((n,), dtype), B: T.Tensor((1,), dtype)):
        with T.Kernel(1, threads=threads):
            vals = T.alloc_fragment((n,), dtype)
            T.copy(A, vals)
            total = T.alloc_reducer((1,), dtype, op=op)
            if seed is None:
                T.reducer_init(total)
            else:
                T.reducer_init(total, seed)
            for i in T.Parallel(n):
                T.reducer_update(total[0], vals[i])
            out = T.alloc_fragment((1,), dtype)
            T.finalize_reducer(total, out)
            if T.get_thread_binding() == 0:
                B[0] = out[0]
    return tally


def _row_bits(op, rows=16, cols=64, threads=128):
    @T.prim_func
    def row_bits(A: T.Tensor((rows, cols), "int32"), B: T.Tensor((rows,), "int32")):
        with T.Kernel(1, threads=threads):
            x = T.alloc_fragment((rows, cols), "int32")
            T.copy(A, x)
            acc = T.alloc_reducer((rows,), "int32", op=op)
            T.reducer_init(acc)
            for i, j in T.Parallel(rows, cols):
                T.reducer_update(acc[i], x[i, j])
            res = T.alloc_fragment((rows,), "int32")
            T.finalize_reducer(acc, res)
            T.copy(res, B)
    return row_bits


def test_epoch_lowers_to_identity_fill_updates_and_a_seeded_publish(tmp_path):
    func = _tally(seed=100.0)
    text = func.script()
    # identity fill, the update in the T.Parallel loop, the in-place combine, then dst
    # gets the combined copy plus the init value, once per element
    assert 'T.fill(total[0:1], T.float32(0.0))' in text
    assert "total[0] = total[0] + vals[i]" in text
    assert "T.finalize_reducer(total)" in text
    assert "out[r] = total[r] + T.float32(100.0)" in text
    source = emit_cute(lower(func, "sm_90a"))
    # the 8 updates run on the threads holding vals (once each), not on all 128
    assert "if tc_f" in source and 'tcr.block_allreduce(total, "sum", total_scratch, 4, 4)' in source
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_a_seed_expression_is_captured_at_the_init():
    @T.prim_func
    def captured(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=32):
            vals = T.alloc_fragment((8,), "float32")
            T.copy(A, vals)
            start = T.alloc_fragment((1,), "float32")
            start[0] = 5.0
            hi = T.alloc_reducer((1,), "float32", op="max")
            T.reducer_init(hi, start[0])
            start[0] = 100.0  # after the init: the epoch keeps 5
            for i in T.Parallel(8):
                T.reducer_update(hi[0], vals[i])
            out = T.alloc_fragment((1,), "float32")
            T.finalize_reducer(hi, out)
            B[0] = out[0]
    text = captured.script()
    assert text.index("hi_init[0] = start[0]") < text.index("start[0] = T.float32(100.0)")
    assert "out[r] = T.max(hi[r], hi_init[0])" in text


@pytest.mark.parametrize("op", ["bitand", "bitor", "bitxor"])
def test_bitwise_epochs_build(op, tmp_path):
    func = _row_bits(op)
    identity = "-1" if op == "bitand" else "0"
    assert f"T.fill(acc[0:16], {identity})" in func.script()
    assert f'"{op}"' in emit_cute(lower(func, "sm_90a"))
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_an_epoch_reopens_in_each_loop_iteration(tmp_path):
    # the running maximum of tiles: each tile's epoch starts from the maximum so far
    @T.prim_func
    def running(A: T.Tensor((512,), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128):
            tile = T.alloc_fragment((128,), "float32")
            best = T.alloc_fragment((1,), "float32")
            best[0] = -T.infinity("float32")
            for k in T.serial(4):
                T.copy(A[k * 128], tile)
                m = T.alloc_reducer((1,), "float32", op="max")
                T.reducer_init(m, best[0])
                for i in T.Parallel(128):
                    T.reducer_update(m[0], tile[i])
                got = T.alloc_fragment((1,), "float32")
                T.finalize_reducer(m, got)
                best[0] = got[0]
            if T.get_thread_binding() == 0:
                B[0] = best[0]
    assert tilecute.build_cubin(running, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_legacy_syntax_on_an_allocation_without_replication(tmp_path):
    # TileLang's pre-epoch default: T.clear, `r[i] += x`, an in-place finalize
    @T.prim_func
    def legacy(A: T.Tensor((16, 32), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=128):
            r = T.alloc_reducer((16,), "float32")
            T.clear(r)
            for i, j in T.Parallel(16, 32):
                r[i] += A[i, j]
            T.finalize_reducer(r, batch=4)
            T.copy(r, B)
    allocs = [s for s in legacy.kernels[0].body if isinstance(s, N.Allocate)]
    assert [a.reducer for a in allocs if a.reducer] == ["sum"]
    assert tilecute.build_cubin(legacy, "sm_90a", out_dir=str(tmp_path)).kernel_names


_EPOCH = '''
        vals = T.alloc_fragment((8,), "float32")
        T.copy(A, vals)
        acc = T.alloc_reducer((1,), "float32", op="sum")
        T.reducer_init(acc)
        for i in T.Parallel(8):
            T.reducer_update(acc[0], vals[i])
        out = T.alloc_fragment((1,), "float32")
        T.finalize_reducer(acc, out)
        B[0] = out[0]
'''


def _parse(body: str):
    text = ('@T.prim_func\ndef k(A: T.Tensor((8,), "float32"), B: T.Tensor((1,), "float32")):\n'
            '    with T.Kernel(1, threads=128):\n' + body)
    return T.from_script(text)


@pytest.mark.parametrize("old,new,message", [
    ("        T.reducer_init(acc)\n", "", "before T.reducer_init"),
    ("        T.reducer_init(acc)\n", "        T.reducer_init(acc)\n        T.reducer_init(acc)\n",
     "double T.reducer_init of reducer 'acc'"),
    ("        T.finalize_reducer(acc, out)\n        B[0] = out[0]\n", "", "never finalized"),
    ("            T.reducer_update(acc[0], vals[i])", "            acc[0] += vals[i]",
     "illegal store to reducer 'acc'"),
    ("        out = T.alloc", "        B[0] = acc[0]\n        out = T.alloc", "illegal read of reducer 'acc'"),
    ("        for i in T.Parallel(8):\n            T.reducer_update(acc[0], vals[i])",
     "        T.reducer_update(acc[0], vals[0])", "outside any T.Parallel loop"),
    ("        T.reducer_init(acc)\n        for i in T.Parallel(8):\n            T.reducer_update(acc[0], vals[i])",
     "        for t in T.serial(2):\n            T.reducer_init(acc)\n            for i in T.Parallel(8):\n"
     "                T.reducer_update(acc[0], vals[i])", "not in the scope of its T.reducer_init"),
    ("        out = T.alloc_fragment((1,), \"float32\")\n        T.finalize_reducer(acc, out)",
     "        out = T.alloc_fragment((1,), \"float32\")\n        for t in T.serial(2):\n"
     "            T.finalize_reducer(acc, out)", "not in the scope of its T.reducer_init"),
    ("T.reducer_init(acc)", "T.reducer_init(acc, T.float16(1.0))",
     "dtype float16 does not match reducer 'acc' dtype float32"),
    ('op="sum")', 'op="bitand")', "bitwise reducer op 'bitand' requires an integer dtype"),
    ("        T.reducer_init(acc)\n", "        T.clear(acc)\n",
     "used with the legacy reducer syntax"),
    ("        T.reducer_init(acc)\n", "        T.reducer_init(acc)\n        T.clear(acc)\n",
     "illegal use of reducer 'acc'"),
    ('out = T.alloc_fragment((1,), "float32")', 'out = T.alloc_fragment((2,), "float32")',
     "must be a fragment of reducer 'acc''s shape and dtype"),
    ("T.finalize_reducer(acc, out)", "T.finalize_reducer(acc)",
     "its T.finalize_reducer takes the destination fragment"),
])
def test_epoch_errors(old, new, message):
    _parse(_EPOCH)  # the unchanged program is fine
    assert old in _EPOCH
    with pytest.raises(FrontendError, match="prim_func 'k'") as e:
        _parse(_EPOCH.replace(old, new))
    assert message in str(e.value), str(e.value)


def test_finalize_may_sit_in_an_if_of_the_init_scope():
    _parse(_EPOCH.replace("        out = T.alloc_fragment((1,), \"float32\")\n"
                          "        T.finalize_reducer(acc, out)\n        B[0] = out[0]\n",
                          "        out = T.alloc_fragment((1,), \"float32\")\n"
                          "        if A[0] > 0:\n            T.finalize_reducer(acc, out)\n"
                          "            B[0] = out[0]\n"))


@pytest.mark.gpu
@pytest.mark.parametrize("seed", [None, 100.0])
def test_tally_on_gpu(seed):
    import torch

    kernel = tilecute.compile(_tally(seed=seed))
    a = torch.arange(1, 9, dtype=torch.float32, device="cuda")
    b = torch.empty(1, device="cuda")
    kernel(a, b)
    assert b.item() == 36.0 + (seed or 0.0)  # each of the 8 contributions once


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["bitand", "bitor", "bitxor"])
def test_bitwise_epochs_on_gpu(op):
    import functools
    import operator

    import torch

    kernel = tilecute.compile(_row_bits(op))
    a = torch.randint(0, 2**31 - 1, (16, 64), dtype=torch.int32, device="cuda")
    b = torch.empty(16, dtype=torch.int32, device="cuda")
    kernel(a, b)
    f = {"bitand": operator.and_, "bitor": operator.or_, "bitxor": operator.xor}[op]
    ref = functools.reduce(f, [a[:, j] for j in range(64)])
    assert torch.equal(b, ref)


@pytest.mark.parametrize("op,value,ok", [("sum", "0.0", True), ("sum", "1.0", False),
                                         ("max", "-1.0", True), ("min", "2.0", True)])
def test_a_legacy_fill_is_the_identity_or_an_idempotent_seed(op, value, ok):
    # TileLang's legacy shim: a max/min fill is a one-time start value (every copy holding
    # it changes nothing), a sum fill other than 0 would be counted once per thread
    body = f'''
        r = T.alloc_reducer((1,), "float32", op="{op}", replication="all")
        T.fill(r, {value})
        for i in T.Parallel(8):
            r[0] += A[i]
        T.finalize_reducer(r)
        B[0] = r[0]
'''
    if ok:
        _parse(body)
        return
    with pytest.raises(FrontendError, match="a legacy sum reducer 'r' is filled with its "
                                            r"identity \(0\) only"):
        _parse(body)
