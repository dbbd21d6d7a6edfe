"""``T.tma_copy(..., leader_scope_threads=k)``: TileLang's leader-election scope of a TMA
copy.  Each group of ``k`` consecutive threads (k a multiple of the warp size) has one
thread issue the copy, with its own region and barrier (``tl_shuffle_elect<k>``); without
it one thread of the block issues it.  tilecute honors it on loads (``TmaCopy.leader_threads``:
the first thread of each group issues) and refuses it on a store (one thread issues a
store and waits for it) unless the group is the whole block.  CPU: IR, printing and round
trip, generated source, cubin, refusals with the line; GPU: every warp's own rows."""

import textwrap

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language.parser import FrontendError


def per_warp_rows(rows=64, depth=8, K=256, threads=128, leader=32):
    """Each warp of a block loads its own (depth, K) slab of A by TMA into its own matrix
    of a shared buffer, on its own barrier, and its lane 0 reads two elements back."""
    warps = threads // 32

    @T.prim_func
    def per_warp(A: T.Tensor((rows, depth, K), T.float32), B: T.Tensor((rows, 2), T.float32)):
        with T.Kernel(T.ceildiv(rows, warps), threads=threads) as pid:
            tid = T.get_thread_binding()
            warp = tid // 32
            row = pid * warps + warp
            slabs = T.alloc_shared((warps, depth, K), T.float32)
            bars = T.alloc_barrier([32] * warps)
            T.tma_copy(A[row, 0:depth, 0:K], slabs[warp, :, :], barrier=bars[warp],
                       leader_scope_threads=leader)
            T.mbarrier_arrive(mbarrier=bars[warp])
            T.mbarrier_wait_parity(mbarrier=bars[warp], parity=0)
            if tid % 32 == 0:
                B[row, 0] = slabs[warp, 0, 0]
                B[row, 1] = slabs[warp, depth - 1, K - 1]

    return per_warp


def _tma(func):
    return [s for k in func.kernels for s in walk_stmts(k.body) if isinstance(s, N.TmaCopy)]


def test_the_leader_scope_is_on_the_load_and_printed():
    f = per_warp_rows()
    (t,) = _tma(f)
    assert t.leader_threads == 32
    text = f.script()
    assert "leader_scope_threads=32)" in text
    assert T.from_script(text).script() == text


def test_a_scope_of_the_whole_block_is_the_plain_copy():
    (t,) = _tma(per_warp_rows(leader=128))
    assert t.leader_threads == 0


def test_each_group_leader_issues_its_own_load():
    src = tilecute.compile(per_warp_rows(), out_idx=[1]).get_kernel_source()
    line = next(ln for ln in src.splitlines() if "TMA load" in ln)
    assert line.strip().startswith("if tc_tid % 32 == 0:") and "one per 32 threads" in line
    plain = tilecute.compile(per_warp_rows(leader=128), out_idx=[1]).get_kernel_source()
    assert "if tc_tid == 0:  # TMA load" in plain


def test_cubin(tmp_path):
    info = tilecute.build_cubin(per_warp_rows(), "sm_90a", out_dir=str(tmp_path))
    assert len(info.kernels) == 1


def _script(call):
    return textwrap.dedent(f'''
        import tilecute.language as T

        @T.prim_func
        def kern(A: T.Tensor((64, 256), T.float32)):
            with T.Kernel(1, threads=128) as bx:
                s = T.alloc_shared((64, 256), T.float32)
                bar = T.alloc_barrier(128)
                {call}
    ''')


@pytest.mark.parametrize("call,message", [
    ("T.tma_copy(A[0, 0], s, barrier=bar[0], leader_scope_threads=48)",
     "T.tma_copy: leader_scope_threads=48 must be a multiple of warp size (32)"),
    ("T.tma_copy(A[0, 0], s, barrier=bar[0], leader_scope_threads=0)",
     "T.tma_copy: leader_scope_threads must be an int >= 1"),
    ("T.tma_copy(s, A[0, 0], leader_scope_threads=32)",
     "T.tma_copy: leader_scope_threads=32 on a store: tilecute issues a TMA store from one thread"),
])
def test_refused_with_the_line(call, message):
    text = _script(call)
    with pytest.raises(FrontendError) as e:
        T.from_script(text)
    msg = str(e.value)
    assert message in msg and "<script>:9:" in msg, msg


@pytest.mark.gpu
def test_every_warp_loads_its_own_rows():
    import torch

    a = torch.randn(64, 8, 256, device="cuda")
    out = tilecute.compile(per_warp_rows(), out_idx=[1])(a)
    torch.testing.assert_close(out, torch.stack([a[:, 0, 0], a[:, 7, 255]], dim=1))
