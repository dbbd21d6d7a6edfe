"""Two layouts for fragments that were replicated (every thread holding all of it, in local
memory) where TileLang lays them out by the loop reading them:

* a ``(K, J)`` fragment read at ``[k, j]`` in a nest over ``(i, j)``, ``k`` an inner serial
  loop's (mixing ``K`` streams, mHC's post step): blocked with the nest's lanes, each
  thread holding every row of the columns it meets;
* a fragment replicated by a read no layout serves (``x[i, jj * 8 + j]`` under a nest over
  ``(i, 8)`` inside a serial ``jj``: a chunked sum of squares over a GEMM's A tile, mHC's
  pre step) and larger than 1 KiB: moved to shared memory when the kernel has room.

Programs written for these tests in TileLang's idioms."""

import re

import pytest
import torch

import tilecute
import tilecute.language as T


def stream_mix(n_tok=64, hc=4, hidden=2048, h_blk=512, threads=128):
    """out[t, o, h] = s[t, o] * y[t, h] + sum_k m[t, k, o] * x[t, k, h] (hc streams mixed)."""

    @T.prim_func
    def mix(M: T.Tensor((n_tok, hc, hc), "float32"), X: T.Tensor((n_tok, hc, hidden), "bfloat16"),
            S: T.Tensor((n_tok, hc), "float32"), Y: T.Tensor((n_tok, hidden), "bfloat16"),
            Out: T.Tensor((n_tok, hc, hidden), "bfloat16")):
        with T.Kernel(n_tok, threads=threads) as t:
            x_s = T.alloc_shared((hc, h_blk), "bfloat16")
            y_s = T.alloc_shared((h_blk,), "bfloat16")
            o_s = T.alloc_shared((hc, h_blk), "bfloat16")
            x_f = T.alloc_fragment((hc, h_blk), "float32")
            y_f = T.alloc_fragment((h_blk,), "float32")
            o_f = T.alloc_fragment((hc, h_blk), "float32")
            m_f = T.alloc_fragment((hc, hc), "float32")
            s_f = T.alloc_fragment((hc,), "float32")
            T.copy(M[t, 0, 0], m_f)
            T.copy(S[t, 0], s_f)
            for hb in T.Pipelined(T.ceildiv(hidden, h_blk), num_stages=2):
                T.copy(X[t, 0, hb * h_blk], x_s)
                T.copy(Y[t, hb * h_blk], y_s)
                T.copy(x_s, x_f)
                T.copy(y_s, y_f)
                for o, h in T.Parallel(hc, h_blk):
                    o_f[o, h] = s_f[o] * y_f[h]
                    for k in T.serial(hc):
                        o_f[o, h] += m_f[k, o] * x_f[k, h]
                T.copy(o_f, o_s)
                T.copy(o_s, Out[t, 0, hb * h_blk])

    return mix


def stream_mix_ref(m, x, s, y):
    return (s.unsqueeze(-1) * y.float().unsqueeze(1) + torch.bmm(m.transpose(1, 2), x.float())).bfloat16()


def project_with_sumsq(tokens=200, k_dim=1024, n_out=24, bt=32, bk=256, chunk=8):
    """out = X @ W^T in tf32 (W's rows padded to 32 in shared) and ss[t] = sum X[t, :]^2,
    the squares summed chunk by chunk from the GEMM's A tile in a loop over its columns."""
    nt = T.dynamic("nt")

    @T.prim_func
    def proj(X: T.Tensor((nt, k_dim), "bfloat16"), W: T.Tensor((n_out, k_dim), "float32"),
             Out: T.Tensor((nt, n_out), "float32"), SS: T.Tensor((nt,), "float32")):
        with T.Kernel(T.ceildiv(nt, bt), threads=128) as bx:
            acc = T.alloc_fragment((bt, 32), "float32")
            part = T.alloc_fragment((bt, chunk), "float32")
            T.clear(acc)
            T.clear(part)
            for kb in T.Pipelined(k_dim // bk, num_stages=2):
                x_s = T.alloc_shared((bt, bk), "bfloat16")
                w_s = T.alloc_shared((32, bk), "float32")
                T.copy(X[bx * bt, kb * bk], x_s)
                T.copy(W[0, kb * bk], w_s)
                x16 = T.alloc_fragment((bt, bk), "bfloat16")
                T.copy(x_s, x16)
                xf = T.alloc_fragment((bt, bk), "float32")
                T.copy(x16, xf)
                for c in T.serial(bk // chunk):
                    for i, j in T.Parallel(bt, chunk):
                        part[i, j] += xf[i, c * chunk + j] * xf[i, c * chunk + j]
                T.gemm(xf, w_s, acc, transpose_B=True)
            ss = T.alloc_fragment((bt,), "float32")
            T.reduce_sum(part, ss, dim=1)
            for i in T.Parallel(bt):
                if bx * bt + i < nt:
                    SS[bx * bt + i] = ss[i]
            for i, j in T.Parallel(bt, 32):
                if j < n_out and bx * bt + i < nt:
                    Out[bx * bt + i, j] = acc[i, j]

    return proj


def thread_stamped(threads=128):
    """A fragment every thread writes whole with its own thread index (a replicated nest),
    then reads at a row: each thread sees its own values, so it must stay in registers."""

    @T.prim_func
    def stamp(Out: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=threads) as _:
            tx = T.get_thread_binding()
            f = T.alloc_fragment((32, 16), "int32")
            for i, j in T.Parallel(32, 16):
                f[i, j] = tx * 100 + i + j
            for i in T.Parallel(32):
                Out[i] = f[i, 3]

    return stamp


def _rmem_sizes(src: str) -> dict:
    return {m.group(1): int(m.group(2)) for m in
            re.finditer(r"(\w+) = cute\.make_rmem_tensor\(\((\d+),\)", src)}


def test_streams_read_by_row_hold_only_their_columns():
    src = tilecute.compile(stream_mix()).get_kernel_source()
    sizes = _rmem_sizes(src)
    # 4 x 512 over 128 threads, 4 lanes: 16 registers each (it was all 2048)
    assert sizes["x_f"] == 16 and sizes["o_f"] == 16 and sizes["y_f"] == 4, sizes
    # the stream loop unrolls; row k of x_f is register k * 4 + lane
    assert "for k in cutlass.range_constexpr(0, 4):" in src
    assert re.search(r"x_f\[k \* 4 \+ tc_lane\d+\]", src), src


def test_narrower_rows_take_narrower_lanes():
    # 256 columns over 128 threads: whole rounds of 2-element pieces, not of 4
    src = tilecute.compile(stream_mix(h_blk=256)).get_kernel_source()
    sizes = _rmem_sizes(src)
    assert sizes["x_f"] == 8 and sizes["o_f"] == 8, sizes
    assert re.search(r"x_f\[k \* 2 \+ tc_lane\d+\]", src), src


def test_columns_short_of_a_round_stay_replicated():
    # 64 columns over 128 threads: no layout gives each thread whole columns of every row
    src = tilecute.compile(stream_mix(hidden=512, h_blk=64)).get_kernel_source()
    assert _rmem_sizes(src)["x_f"] == 4 * 64


def test_large_replicated_tile_moves_to_shared():
    src = tilecute.compile(project_with_sumsq()).get_kernel_source()
    sizes = _rmem_sizes(src)
    assert "xf" not in sizes, sizes  # no longer 8192 registers a thread
    assert sizes["x16"] == 64, sizes  # the bf16 tile it is filled from: blocked, 8 lanes
    assert re.search(r"xf = cute\.make_tensor\(cute\.recast_ptr\(tc_smem", src), src
    # the T.gemm reads it where it is, in the A operand's layout (no staging copy)
    assert "# T.gemm(xf, w_s, acc)" in src and "xf_shared" not in src


def _scope_of(func, name, **patch):
    from tilecute.ir import nodes as N
    from tilecute.ir.visitor import walk_stmts
    from tilecute.transform.pipeline import run_passes

    out = run_passes(func, "sm_90a", until="infer_layouts")
    return next(s.buffer.scope for k in out.kernels for s in walk_stmts(k.body)
                if isinstance(s, N.Allocate) and s.buffer.name == name)


def test_no_room_keeps_it_in_registers(monkeypatch):
    import types

    from tilecute.transform import layout_inference

    func = project_with_sumsq()
    assert _scope_of(func, "xf") == "shared"
    # with 96 KiB a block: the shared tiles (16 + 32 KiB, and the 32 KiB GEMM staging of
    # xf), counted with the loop's 2 stages, leave no room for 32 KiB more
    monkeypatch.setattr(layout_inference, "target",
                        lambda arch: types.SimpleNamespace(shared_per_block=96 * 1024))
    assert _scope_of(func, "xf") == "fragment"


def test_room_counts_packed_fp4_tiles_at_their_bytes():
    """The shared-memory room the move checks counts a float4_e2m1fn tile at half a byte an
    element (two a byte, as the shared-memory pass lays it out), each stage of it."""
    from tilecute.transform.layout_inference import _shared_estimate
    from tilecute.transform.pipeline import run_passes

    @T.prim_func
    def fp4_tiles(A: T.Tensor((256, 512), T.float4_e2m1fn), B: T.Tensor((256, 512), T.float16)):
        with T.Kernel(2, threads=128) as bx:
            a_s = T.alloc_shared((128, 512), T.float4_e2m1fn)
            o_s = T.alloc_shared((128, 64), T.float16)
            for k in T.Pipelined(8, num_stages=2):
                T.copy(A[bx * 128, 0], a_s)
                for i, j in T.Parallel(128, 64):
                    o_s[i, j] = T.cast(a_s[i, k * 64 + j], T.float16)
                T.copy(o_s, B[bx * 128, k * 64])

    kernel = run_passes(fp4_tiles, "sm_90a", until="infer_layouts").kernels[0]
    # 2 stages x (128 x 512 / 2 bytes + 128 x 64 x 2 bytes)
    assert _shared_estimate(kernel) == 2 * (128 * 512 // 2 + 128 * 64 * 2)


def test_thread_dependent_fragment_stays_in_registers():
    src = tilecute.compile(thread_stamped()).get_kernel_source()
    assert _rmem_sizes(src)["f"] == 32 * 16


@pytest.mark.gpu
@pytest.mark.parametrize("h_blk", [512, 256])
def test_stream_mix_gpu(h_blk):
    torch.manual_seed(0)
    n, hc, hidden = 64, 4, 2048
    m = torch.randn(n, hc, hc, device="cuda")
    x = torch.randn(n, hc, hidden, device="cuda").bfloat16()
    s = torch.randn(n, hc, device="cuda")
    y = torch.randn(n, hidden, device="cuda").bfloat16()
    out = torch.empty(n, hc, hidden, device="cuda", dtype=torch.bfloat16)
    tilecute.compile(stream_mix(n_tok=n, hc=hc, hidden=hidden, h_blk=h_blk))(m, x, s, y, out)
    torch.testing.assert_close(out.float(), stream_mix_ref(m, x, s, y).float(), atol=2e-2, rtol=2e-2)


@pytest.mark.gpu
def test_project_with_sumsq_gpu():
    torch.manual_seed(0)
    t, kd, n = 200, 1024, 24
    x = torch.randn(t, kd, device="cuda").bfloat16()
    w = torch.randn(n, kd, device="cuda") / 32
    out = torch.empty(t, n, device="cuda")
    ss = torch.empty(t, device="cuda")
    tilecute.compile(project_with_sumsq(tokens=t, k_dim=kd, n_out=n))(x, w, out, ss)
    torch.testing.assert_close(ss, x.float().pow(2).sum(1), atol=1e-2, rtol=1e-4)
    # tf32 products: about 10 mantissa bits
    torch.testing.assert_close(out, x.float() @ w.T, atol=5e-2, rtol=1e-2)


@pytest.mark.gpu
def test_thread_stamped_gpu():
    out = torch.empty(32, device="cuda", dtype=torch.int32)
    tilecute.compile(thread_stamped())(out)
    # iteration i of the reading nest runs on thread i, which wrote tx * 100 + i + 3
    assert out.tolist() == [i * 100 + i + 3 for i in range(32)]
