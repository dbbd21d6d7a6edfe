"""TileLang's ordered single-element atomics: ``T.atomic_load(x[i], memory_order)`` (an
expression), ``T.atomic_store(x[i], v, memory_order)`` and ``T.atomic_or(x[i], bits,
memory_order)`` on global tensors and shared buffers (a flag one warp raises and another
spins on) at device scope, as cuda::atomic_ref's orders.
CPU: IR, printer round trip, serialization, generated source, the PTX of the runtime
helpers for every order, refusals naming form / argument / line, an sm_90a cubin of a
flag handoff between blocks; GPU: that handoff and a bit mask vs torch."""

import os
import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.serialize import from_json, to_json
from tilecute.ir.visitor import walk_stmts
from tilecute.language import FrontendError
from tilecute.transform.pipeline import lower


def handoff(n=128):
    """Block 0 doubles X into Out, records which threads ran in a bit mask and publishes
    a flag (release); block 1 waits for the flag (acquire) and adds the flag's value."""

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Flag: T.Tensor((2,), "int32"),
             Seen: T.Tensor((n // 32,), "uint32"), Out: T.Tensor((n,), "float32")):
        with T.Kernel(2, threads=n) as bx:
            tx = T.get_thread_binding()
            if bx == 0:
                Out[tx] = X[tx] * 2.0
                T.atomic_or(Seen[tx // 32], T.shift_left(T.uint32(1), tx % 32))
                T.sync_threads()
                if tx == 0:
                    T.atomic_store(Flag[0], 3, memory_order="release")
            else:
                while T.atomic_load(Flag[0], memory_order="acquire") == 0:
                    pass
                Out[tx] = Out[tx] + T.Cast("float32", T.atomic_load(Flag[0], "relaxed"))
                if tx == 0:
                    T.atomic_store(Flag[1], T.atomic_load(Flag[0]))  # seq_cst both
    return main


def shared_flag(n=256):
    """Warp 0 of each block writes a shared tile and raises a shared flag (release store);
    warp 1 spins on it (acquire loads) and copies the tile out: a handoff without a block
    barrier, as libcu++'s atomic_ref on a shared address (TileLang's AtomicStore / Load)."""

    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(n // 32, threads=64) as bx:
            tx = T.get_thread_binding()
            flag = T.alloc_shared((2,), "uint32")
            data = T.alloc_shared((32,), "float32")
            if tx == 0:
                flag[1] = 0
            T.sync_threads()
            if tx >= 32:
                while T.atomic_load(flag[1], memory_order="acquire") == 0:
                    pass
                Y[bx * 32 + tx - 32] = data[tx - 32]
            else:
                data[tx] = X[bx * 32 + tx] * 3.0
                T.sync_warp()
                if tx == 0:
                    T.atomic_store(flag[1], T.uint32(1), memory_order="release")
    return main


def _atomics(f):
    return [s for k in f.kernels for s in walk_stmts(k.body) if isinstance(s, N.AtomicAdd)]


def test_ir_orders_and_round_trip():
    f = handoff()
    ops = [(s.op, s.order) for s in _atomics(f)]
    assert ops == [("or", "relaxed"), ("store", "release"), ("store", "seq_cst")]
    text = print_func(f)
    assert 'T.atomic_store(Flag[0], 3, memory_order="release")' in text
    assert "T.atomic_store(Flag[1], T.atomic_load(Flag[0], memory_order=\"seq_cst\"))" in text
    assert 'while T.atomic_load(Flag[0], memory_order="acquire") == 0:' in text
    assert print_func(T.from_script(text)) == text
    assert from_json(to_json(f)) == f
    load = [c for c in _calls(f) if c.name == "atomic_load"]
    assert [N.MEMORY_ORDERS[c.args[1].value] for c in load] == ["acquire", "relaxed", "seq_cst"]


def _calls(f):
    from tilecute.ir.visitor import walk_nodes
    return [n for n in walk_nodes(f.kernels) if isinstance(n, N.Call)]


def test_generated_source_and_cubin(tmp_path):
    src = emit_cute(lower(handoff(), "sm_90a"))
    assert re.search(r'tca\.atomic_or\(Seen, \(tx // 32,\), .*, "relaxed"\)', src)
    assert 'tca.atomic_store(Flag, (0,), 3, "release")' in src
    assert 'while tca.atomic_load(Flag, (0,), "acquire") == 0:' in src
    assert 'tca.atomic_store(Flag, (1,), tca.atomic_load(Flag, (0,), "seq_cst"), "seq_cst")' in src
    info = tilecute.build_cubin(handoff(), "sm_90a", out_dir=str(tmp_path))
    assert len(info.kernels) == 1


def test_shared_or_source():
    f = T.from_script(_one('T.atomic_or(S[tx // 32], T.shift_left(1, tx % 32), memory_order="release")')
                      .replace("bx:", "bx:\n        tx = T.get_thread_binding()"))
    assert [(s.op, s.order) for s in _atomics(f)] == [("or", "release")]
    assert re.search(r'tca\.atomic_or\(S, tx // 32, .*, "release"\)', emit_cute(lower(f, "sm_90a")))


def test_shared_flag_source_and_cubin(tmp_path):
    src = emit_cute(lower(shared_flag(), "sm_90a"))
    assert 'while tca.atomic_load(flag, (1,), "acquire") == cutlass.Uint32(0):' in src
    assert 'tca.atomic_store(flag, 1, cutlass.Uint32(1), "release")' in src
    assert 'T.atomic_store(flag[1], T.uint32(1), memory_order="release")' in print_func(shared_flag())
    assert tilecute.build_cubin(shared_flag(), "sm_80", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_shared_flag_on_gpu():
    import torch
    X = torch.randn(256, device="cuda")
    Y = torch.zeros_like(X)
    tilecute.compile(shared_flag())(X, Y)
    torch.testing.assert_close(Y, X * 3.0)


# ---- the runtime helpers' PTX, every order ------------------------------------------------
cutlass = pytest.importorskip("cutlass")
cute = pytest.importorskip("cutlass.cute")
from tilecute.runtime.cute import atomic as tca  # noqa: E402

LOAD_ORDERS = ["relaxed", "consume", "acquire", "seq_cst"]
STORE_ORDERS = ["relaxed", "release", "seq_cst"]


@cute.kernel
def _ordered_kernel(p: cute.Pointer, q: cute.Pointer, order: cutlass.Constexpr,
                    kind: cutlass.Constexpr):
    x = cute.make_tensor(p, cute.make_layout((64,), stride=(1,)))
    y = cute.make_tensor(q, cute.make_layout((64,), stride=(1,)))
    tx, _, _ = cute.arch.thread_idx()
    if cutlass.const_expr(kind == "load"):
        y[tx] = tca.atomic_load(x, (tx,), order)
    elif cutlass.const_expr(kind == "store"):
        tca.atomic_store(x, (tx,), y[tx] + 1, order)
    elif cutlass.const_expr(kind == "shared"):  # a shared flag: .shared state space
        smem = cutlass.memory.SmemAllocator().allocate_tensor(x.element_type, cute.make_layout(64), 16)
        tca.atomic_store(smem, (tx,), y[tx] + 1, order[1])
        tca.atomic_or(smem, (tx // 2,), y[tx], order[1])
        y[tx] = tca.atomic_load(smem, ((tx + 1) % 64,), order[0])
    else:
        tca.atomic_or(x, (tx // 2,), y[tx], order)


@cute.jit
def _ordered_wrapper(p: cute.Pointer, q: cute.Pointer, order: cutlass.Constexpr,
                     kind: cutlass.Constexpr):
    _ordered_kernel(p, q, order, kind).launch(grid=(1, 1, 1), block=(64, 1, 1))


def _ptx(kind, order, dtype, tmp_path, monkeypatch):
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    ptr = cute.runtime.make_ptr(dtype, 0, cute.AddressSpace.gmem, assumed_align=16)
    compiled = cute.compile(_ordered_wrapper, ptr, ptr, order, kind,
                            options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}")
    return compiled.__ptx__


@pytest.mark.parametrize("order", LOAD_ORDERS)
def test_load_ptx(order, tmp_path, monkeypatch):
    ptx = _ptx("load", order, cutlass.Int32, tmp_path, monkeypatch)
    sem = "relaxed" if order == "relaxed" else "acquire"
    assert re.search(rf"ld\.{sem}\.gpu(\.global)?\.(b|s|u)32", ptx), ptx[-2000:]
    assert ("fence.sc.gpu" in ptx) == (order == "seq_cst")


@pytest.mark.parametrize("order", STORE_ORDERS)
def test_store_ptx(order, tmp_path, monkeypatch):
    ptx = _ptx("store", order, cutlass.Float32, tmp_path, monkeypatch)
    sem = "release" if order == "release" else "relaxed"
    assert re.search(rf"st\.{sem}\.gpu(\.global)?\.(b|f)32", ptx), ptx[-2000:]
    assert ("fence.sc.gpu" in ptx) == (order == "seq_cst")


@pytest.mark.parametrize("load,store", [("acquire", "release"), ("seq_cst", "relaxed")])
def test_shared_load_store_ptx(load, store, tmp_path, monkeypatch):
    ptx = _ptx("shared", (load, store), cutlass.Int32, tmp_path, monkeypatch)
    lsem = "relaxed" if load == "relaxed" else "acquire"
    ssem = "release" if store == "release" else "relaxed"
    assert re.search(rf"ld\.{lsem}\.gpu\.shared(::cta)?\.(b|s|u)32", ptx), ptx[-2000:]
    assert re.search(rf"st\.{ssem}\.gpu\.shared(::cta)?\.(b|s|u)32", ptx), ptx[-2000:]
    assert re.search(rf"red\.{store}\.gpu\.shared(::cta)?\.or\.b32", ptx), ptx[-2000:]
    assert ("fence.sc.gpu" in ptx) == (load == "seq_cst")


@pytest.mark.parametrize("order", list(N.MEMORY_ORDERS))
@pytest.mark.parametrize("dtype", ["Uint32", "Int64"])
def test_or_ptx(order, dtype, tmp_path, monkeypatch):
    ptx = _ptx("or", order, getattr(cutlass, dtype), tmp_path, monkeypatch)
    bits = 32 if dtype == "Uint32" else 64
    if order in ("relaxed", "release"):  # TileLang's red.{order}.gpu.global.or
        assert re.search(rf"red\.{order}\.gpu\.global\.or\.b{bits}", ptx), ptx[-2000:]
    else:
        sem = "acq_rel" if order == "acq_rel" else "acquire"
        # no scope written is .gpu (PTX's default for atom)
        assert re.search(rf"atom(\.global)?\.{sem}(\.gpu)?(\.global)?\.or\.b{bits}", ptx), ptx[-2000:]
    assert ("fence.sc.gpu" in ptx) == (order == "seq_cst")


# ---- refusals -------------------------------------------------------------------------------
def _one(stmt: str) -> str:
    return f'''import tilecute.language as T


@T.prim_func
def main(G: T.Tensor((8,), "int32"), F: T.Tensor((8,), "float32"), H: T.Tensor((8,), "float16")):
    with T.Kernel(1, threads=32) as bx:
        S = T.alloc_shared((8,), "int32")
        L = T.alloc_local((8,), "int32")
        {stmt}
'''


@pytest.mark.parametrize("stmt,msg", [
    ('T.atomic_store(G[0], 1, memory_order="acquire")',
     r"T.atomic_store does not support memory_order='acquire'; expected one of"),
    ('T.atomic_store(G[0], 1, memory_order="acq_rel")', "memory_order='acq_rel'"),
    ('T.atomic_store(G[0:2], 1)', r"T.atomic_store: dst must be one element \(`flag\[i\]`\)"),
    ('T.atomic_store(L[0], 1)', "'L' is a local buffer; tilecute's T.atomic_store writes an "
                                "element of a global tensor or a shared buffer"),
    ('T.atomic_or(L[0], 1)', "'L' is a local buffer; tilecute's T.atomic_or writes an element "
                             "of a global tensor or a shared buffer"),
    ('T.atomic_store(H[0], 1.0)', "'H' is float16; T.atomic_store writes 32 or 64 bits"),
    ('T.atomic_or(F[0], 1)', "'F' is float32; T.atomic_or writes a 32- or 64-bit integer"),
    ('T.atomic_or(G[0], F[0])', "T.atomic_or: value must be an integer, got a float32"),
    ('T.atomic_or(G[0], 1, memory_order="weak")', "T.atomic_or: memory_order='weak' is not supported"),
    ('G[1] = T.atomic_load(G[0], memory_order="release")',
     r"T.atomic_load does not support memory_order='release'"),
    ('G[1] = T.atomic_load(L[0])', "'L' is a local buffer; tilecute's atomic loads read an "
                                   "element of a global tensor or a shared buffer"),
    ('F[1] = T.atomic_load(H[0])', "'H' is float16; atomic loads read 32- or 64-bit"),
    ('G[1] = T.atomic_load(bx)', "src must be one element of a global tensor"),
    ('T.atomic_store(G[0], 1, "seq_cst", 4)', "T.atomic_store"),
])
def test_refusals_name_the_form_and_line(stmt, msg):
    with pytest.raises(FrontendError, match=msg) as e:
        T.from_script(_one(stmt))
    assert "<script>:9" in str(e.value)


def test_validator_takes_an_ordered_add_and_refuses_an_unknown_order():
    import dataclasses

    from tilecute.ir.validate import validate

    f = T.from_script(_one("T.atomic_add(G[0], 1)"))
    k = f.kernels[0]

    def with_order(order):
        body = tuple(dataclasses.replace(s, order=order) if isinstance(s, N.AtomicAdd) else s
                     for s in k.body)
        assert body != k.body
        return dataclasses.replace(f, kernels=(dataclasses.replace(k, body=body),))
    validate(with_order("release"))  # TileLang's memory_order on T.atomic_add
    with pytest.raises(Exception, match="T.atomic_add: memory order 'sequential'; expected one of"):
        validate(with_order("sequential"))


@pytest.mark.gpu
def test_gpu_handoff_and_mask():
    import torch

    kernel = tilecute.compile(handoff())
    x = torch.randn(128, device="cuda")
    flag = torch.zeros(2, device="cuda", dtype=torch.int32)
    seen = torch.zeros(4, device="cuda", dtype=torch.uint32)
    out = torch.zeros(128, device="cuda")
    kernel(x, flag, seen, out)  # block 1 spins until block 0's release: both resident
    torch.cuda.synchronize()
    torch.testing.assert_close(out, x * 2 + 3)
    assert flag.tolist() == [3, 3]
    assert seen.cpu().view(torch.int32).tolist() == [-1, -1, -1, -1]  # every thread's bit
