"""T.gemm with A read from registers on warp mma.sync (TileLang's gemm_rs on sm_80+): the
A fragment holds the registers of an accumulator with K columns, so an accumulator is
copied into it register by register; the fallback from wgmma takes it on sm_90a when the
block is not whole warpgroups."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.transform.pipeline import lower


def rs_chain(M=64, K=64, N=32, threads=64):
    """O = half(A @ B^T) @ V: the attention pattern (S in float32, cast into an A fragment)."""
    @T.prim_func
    def rs_chain(A: T.Tensor((M, 32), "float16"), B: T.Tensor((K, 32), "float16"),
                 V: T.Tensor((K, N), "float16"), O: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            A_s = T.alloc_shared((M, 32), "float16")
            B_s = T.alloc_shared((K, 32), "float16")
            V_s = T.alloc_shared((K, N), "float16")
            S = T.alloc_fragment((M, K), "float32")
            P = T.alloc_fragment((M, K), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.copy(V, V_s)
            T.clear(S)
            T.clear(acc)
            T.gemm(A_s, B_s, S, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
            T.copy(S, P)
            T.gemm(P, V_s, acc)
            T.copy(acc, O)
    return rs_chain


def rs_direct(M=64, K=32, N=64, threads=128):
    """C = A @ B with A copied from global memory straight into its register fragment."""
    @T.prim_func
    def rs_direct(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
                  C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            A_f = T.alloc_fragment((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            C_f = T.alloc_fragment((M, N), "float32")
            T.copy(A, A_f)
            T.copy(B, B_s)
            T.clear(C_f)
            T.gemm(A_f, B_s, C_f)
            T.copy(C_f, C)
    return rs_direct


def test_a_fragment_takes_mma_sync_layout():
    plan = lower(rs_chain(), "sm_90a")
    layouts = {s.buffer.name: s.layout for k in plan.func.kernels for s in _allocs(k.body)}
    # 2 warps, both along M (each 32 rows: two m16 steps), for S, P and acc alike
    assert layouts["P"].kind == "mma" and layouts["P"].mma == "mma"
    assert layouts["P"].operand == "A" and layouts["P"].warps == (2, 1)
    assert layouts["S"].warps == (2, 1) and layouts["S"].operand == ""
    src = emit_cute(plan)
    assert 'tcm.a_fragment("mma", (2, 1), (64, 64), cutlass.Float16' in src
    assert "tcm.gemm_warp(" in src and "a_regs=True" in src


def _allocs(body):
    from tilecute.ir.visitor import walk_stmts
    from tilecute.ir import nodes as N
    return [s for s in walk_stmts(body) if isinstance(s, N.Allocate)]


@pytest.mark.parametrize("make,arch", [(rs_chain, "sm_90a"), (rs_direct, "sm_80"),
                                       (lambda: rs_direct(threads=32), "sm_90a")])
def test_a_from_registers_on_mma_sync_builds(make, arch, tmp_path):
    assert tilecute.build_cubin(make(), arch, out_dir=str(tmp_path)).kernel_names


def test_a_fragment_without_whole_rows_per_warp_goes_through_shared():
    # 8 warps along M would need M a multiple of 128: A_f is staged through shared memory
    # and the T.gemm reads that tile (the warps then tile M and N as usual)
    plan = lower(rs_direct(threads=256), "sm_80")
    (g,) = [s for s in walk_stmts(plan.func.kernels[0].body) if isinstance(s, N.Gemm)]
    assert g.a == "A_f_shared" and g.family == "mma"


@pytest.mark.gpu
@pytest.mark.parametrize("threads", [32, 64])
def test_rs_chain_matches_torch(threads):
    import torch

    a = torch.randn(64, 32, device="cuda", dtype=torch.float16)
    b = torch.randn(64, 32, device="cuda", dtype=torch.float16)
    v = torch.randn(64, 32, device="cuda", dtype=torch.float16)
    o = torch.empty(64, 32, device="cuda")
    tilecute.compile(rs_chain(threads=threads))(a, b, v, o)
    p = (a.float() @ b.float().T).half().float()
    torch.testing.assert_close(o, p @ v.float(), atol=5e-2, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("threads", [32, 128])
def test_rs_direct_matches_torch(threads):
    import torch

    a = torch.randn(64, 32, device="cuda", dtype=torch.float16)
    b = torch.randn(32, 64, device="cuda", dtype=torch.float16)
    c = torch.empty(64, 64, device="cuda")
    tilecute.compile(rs_direct(threads=threads))(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-2, rtol=1e-2)


def test_wgmma_a_fragment_holds_an_accumulators_registers():
    """One warpgroup over 128 rows (two 64-row wgmma steps): P = T.copy(S) goes register by
    register, so P's registers must be in S's order (the A partition's own order lists K
    steps before M steps: P's rows came out mixed, TileLang's 128 x 128 attention tiles on
    128 threads wrong on an H100)."""
    plan = lower(rs_chain(M=128, K=64, N=64, threads=128), "sm_90a")
    layouts = {s.buffer.name: s.layout for k in plan.func.kernels for s in _allocs(k.body)}
    assert layouts["P"].mma == "wgmma" and layouts["P"].operand == "A"
    src = emit_cute(plan)
    assert 'tcm.a_fragment("wgmma", (1, 1), (128, 64), cutlass.Float16' in src
    assert "P[tc_r" in src and "= cutlass.Float16(S[tc_r" in src  # register by register


@pytest.mark.parametrize("M, threads", [(128, 128), (192, 128), (256, 256)])
def test_wgmma_a_from_registers_of_several_m_steps_builds(M, threads, tmp_path):
    assert tilecute.build_cubin(rs_chain(M=M, K=64, N=64, threads=threads), "sm_90a",
                                out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("M, K, threads", [(64, 64, 128), (128, 64, 128), (128, 128, 128),
                                           (192, 64, 128), (256, 64, 256)])
def test_wgmma_rs_chain_of_several_m_steps_matches_torch(M, K, threads):
    import torch

    a = torch.randn(M, 32, device="cuda", dtype=torch.float16)
    b = torch.randn(K, 32, device="cuda", dtype=torch.float16)
    v = torch.randn(K, 64, device="cuda", dtype=torch.float16)
    o = torch.empty(M, 64, device="cuda")
    tilecute.compile(rs_chain(M=M, K=K, N=64, threads=threads))(a, b, v, o)
    p = (a.float() @ b.float().T).half().float()
    torch.testing.assert_close(o, p @ v.float(), atol=5e-2, rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("M, threads", [(128, 128), (192, 128)])
def test_wgmma_rs_direct_of_several_m_steps_matches_torch(M, threads):
    import torch

    a = torch.randn(M, 32, device="cuda", dtype=torch.float16)
    b = torch.randn(32, 64, device="cuda", dtype=torch.float16)
    c = torch.empty(M, 64, device="cuda")
    tilecute.compile(rs_direct(M=M, threads=threads))(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-2, rtol=1e-2)


def test_wgmma_a_fragment_with_warpgroups_along_n_goes_through_shared():
    """An RS T.gemm whose warpgroups split N (policy=Square with one 64-row step over two
    warpgroups) would need each warpgroup to hold all K columns of its rows, which a copy
    from an accumulator split the same way does not give: P is staged through shared memory
    (was: read from registers, 93% of a flash-attention tile's outputs wrong on an H100)."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    import unseen_programs8 as P8

    plan = lower(P8.flash_fwd(seq=512, dim=64, block_M=64, block_N=128, threads=256,
                              policy="Square", stages=2), "sm_90a")
    (pv,) = [s for s in walk_stmts(plan.func.kernels[0].body)
             if isinstance(s, N.Gemm) and s.c == "o"]
    assert pv.a == "p_shared" and pv.family == "wgmma"
    # every warpgroup along M (FullRow over 128 rows): registers, as before
    plan = lower(rs_chain(M=128, K=64, N=64, threads=256), "sm_90a")
    (pv,) = [s for s in walk_stmts(plan.func.kernels[0].body) if isinstance(s, N.Gemm) and s.c == "acc"]
    assert pv.a == "P"


def test_gemm_operand_regions():
    """A region covering the whole buffer is the buffer; a matrix of a 3-D shared buffer
    (TileLang's 2-D operand) is that matrix (tests/test_gemm_matrix_operands.py)."""
    def prog(a_region):
        @T.prim_func
        def staged(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"),
                   C: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                A_s = T.alloc_shared((2, 64, 32), "float16")
                A_2 = T.alloc_shared((64, 32), "float16")
                B_s = T.alloc_shared((32, 64), "float16")
                C_f = T.alloc_fragment((64, 64), "float32")
                T.copy(A, A_2)
                T.copy(B, B_s)
                T.clear(C_f)
                if a_region:
                    T.gemm(A_s[bx % 2, :, :], B_s[0:32, 0:64], C_f)
                else:
                    T.gemm(A_2[:, :], B_s[0:32, 0:64], C_f[:, :])
                T.copy(C_f, C)
        return staged

    assert "T.gemm(A_2, B_s, C_f, " in prog(False).script()
    assert "T.gemm(A_s[bx % 2, :, :], B_s, C_f, " in prog(True).script()
