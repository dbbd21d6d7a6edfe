"""Where the TMA pipeline waits: each load's mbarrier wait stands right before the first
statement that names its buffer, so the work before it (another copy's plain loads, a
``T.clear``) runs while the TMA lands; loads of one pipelined step read by different
statements (K by the first T.gemm, V by the second, as in flash decoding) get an mbarrier
array each, and the first GEMM waits for K alone; a load before a pipelined loop that
reads it is waited for after the loop's prologue has issued the first stages; one read
in a T.ws region (a consumer branch) is waited for at the region's start."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir.printer import print_func
from tilecute.transform.pipeline import run_passes


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def decode(seq=1024, heads=64, dim=128, block_n=64, stages=2):
    """A split of flash decoding; its one block would get a producer warpgroup by default
    (alone on its SM), which these tests of the threads' own pipeline turn off, as
    TileLang's decode example does (tl.disable_warp_specialized)."""
    scale = 0.125

    @T.prim_func
    def decode_split(Q: T.Tensor((heads, dim), "float16"), K: T.Tensor((seq, dim), "float16"),
                     V: T.Tensor((seq, dim), "float16"), mask: T.Tensor((seq,), "uint8"),
                     O: T.Tensor((heads, dim), "float16")):
        with T.Kernel(1, threads=128) as bx:
            Q_s = T.alloc_shared((heads, dim), "float16")
            K_s = T.alloc_shared((block_n, dim), "float16")
            V_s = T.alloc_shared((block_n, dim), "float16")
            s = T.alloc_fragment((heads, block_n), "float32")
            p = T.alloc_fragment((heads, block_n), "float16")
            m = T.alloc_fragment((block_n,), "uint8")
            o = T.alloc_fragment((heads, dim), "float32")
            mx = T.alloc_fragment((heads,), "float32")
            mx_prev = T.alloc_fragment((heads,), "float32")
            f = T.alloc_fragment((heads,), "float32")
            l_i = T.alloc_fragment((heads,), "float32")
            total = T.alloc_fragment((heads,), "float32")
            T.copy(Q, Q_s)
            T.fill(o, 0)
            T.fill(total, 0)
            T.fill(mx, -T.infinity("float32"))
            for k in T.Pipelined(seq // block_n, num_stages=stages, warp_specialize=False):
                T.copy(K[k * block_n:(k + 1) * block_n, :], K_s)
                T.copy(mask[k * block_n:(k + 1) * block_n], m)
                T.clear(s)
                T.gemm(Q_s, K_s, s, transpose_B=True)
                for i, j in T.Parallel(heads, block_n):
                    s[i, j] = T.if_then_else(m[j] != 0, s[i, j], -T.infinity("float32"))
                T.copy(mx, mx_prev)
                T.reduce_max(s, mx, dim=1, clear=False)
                for i in T.Parallel(heads):
                    f[i] = T.exp2(mx_prev[i] * scale - mx[i] * scale)
                for i, j in T.Parallel(heads, block_n):
                    s[i, j] = T.exp2(s[i, j] * scale - mx[i] * scale)
                T.reduce_sum(s, l_i, dim=1)
                for i in T.Parallel(heads):
                    total[i] = total[i] * f[i] + l_i[i]
                T.copy(s, p)
                for i, j in T.Parallel(heads, dim):
                    o[i, j] *= f[i]
                T.copy(V[k * block_n:(k + 1) * block_n, :], V_s)
                T.gemm(p, V_s, o)
            for i, j in T.Parallel(heads, dim):
                o[i, j] /= total[i]
            T.copy(o, O)
    return decode_split


def _lines(func):
    return [x.strip() for x in print_func(run_passes(func, "sm_90a", until="pipeline_tma_loads")).splitlines()]


def test_each_pipelined_load_is_waited_for_before_its_first_reader():
    lines = _lines(decode())
    loop = next(i for i, x in enumerate(lines) if x.startswith("for k in T.Pipelined("))
    body = lines[loop:]
    gemms = [i for i, x in enumerate(body) if x.startswith("T.gemm(")]
    waits = [i for i, x in enumerate(body) if x.startswith("T.mbarrier_wait_parity(")]
    assert len(gemms) == 2 and len(waits) == 2
    # K's wait right before the first GEMM (after the mask's plain copy and the clear),
    # V's right before the second, each on its own barrier array
    assert waits[0] == gemms[0] - 1 and waits[1] == gemms[1] - 1
    bar_k = body[waits[0]].split("(")[1].split("[")[0]
    bar_v = body[waits[1]].split("(")[1].split("[")[0]
    assert bar_k != bar_v
    copies = [x for x in body if x.startswith("T.tma_copy(")]
    assert any(x.startswith("T.tma_copy(K[") and f"barrier={bar_k}[" in x for x in copies)
    assert any(x.startswith("T.tma_copy(V[") and f"barrier={bar_v}[" in x for x in copies)
    assert any(f"{bar_k} = T.alloc_barrier([1] * 2)" == x for x in lines)
    assert any(f"{bar_v} = T.alloc_barrier([1] * 2)" == x for x in lines)
    # the mask's copy stays a plain copy ahead of the K wait
    mask_copy = next(i for i, x in enumerate(body) if x.startswith("T.copy(mask["))
    assert mask_copy < waits[0]


def test_a_load_before_the_loop_is_waited_for_after_the_prologue():
    lines = _lines(decode())
    loop = next(i for i, x in enumerate(lines) if x.startswith("for k in T.Pipelined("))
    q_load = next(i for i, x in enumerate(lines) if x.startswith("T.tma_copy(Q"))
    q_bar = lines[q_load].split("barrier=")[1].split("[")[0].split(",")[0]
    q_wait = next(i for i, x in enumerate(lines) if x.startswith(f"T.mbarrier_wait_parity({q_bar}"))
    prologue = [i for i, x in enumerate(lines[:loop]) if x.startswith(("T.tma_copy(K", "T.tma_copy(V"))]
    assert prologue and q_load < max(prologue) < q_wait < loop


def test_one_barrier_where_one_statement_reads_every_load():
    """A GEMM step (both tiles read by its one T.gemm) keeps one barrier and one wait."""
    @T.prim_func
    def mm(A: T.Tensor((128, 256), "float16"), B: T.Tensor((256, 128), "float16"),
           C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            acc = T.alloc_fragment((128, 128), "float32")
            T.clear(acc)
            # (its one block would get a producer warpgroup by default: off, as above)
            for k in T.Pipelined(4, num_stages=2, warp_specialize=False):
                T.copy(A[0, k * 64], A_s)
                T.copy(B[k * 64, 0], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C)
    lines = _lines(mm)
    assert sum(x.startswith("T.mbarrier_wait_parity(") for x in lines) == 1
    assert sum("T.alloc_barrier(" in x for x in lines) == 1



def _handoff(stages=2, n=4, rows=64, dim=64):
    """A tile TMA-loaded before ``if tx >= 128: <producer> else: <consumer>`` (a consumer
    reading it, the two sides handing K tiles over by mbarriers), as TileLang's
    hand-specialised kernels write it."""
    @T.prim_func
    def handoff(Q: T.Tensor((rows, dim), "float16"), K: T.Tensor((n * rows, dim), "float16"),
                O: T.Tensor((rows, rows), "float32")):
        with T.Kernel(1, threads=256) as bx:
            q_s = T.alloc_shared((rows, dim), "float16")
            k_s = T.alloc_shared((stages, rows, dim), "float16")
            acc = T.alloc_fragment((rows, rows), "float32")
            full = T.alloc_barrier([128] * stages)
            free = T.alloc_barrier([128] * stages)
            tx = T.get_thread_binding()
            T.copy(Q, q_s)
            if tx >= 128:
                for t in T.serial(n):
                    T.barrier_wait(free[t % stages], ((t // stages) & 1) ^ 1)
                    T.copy(K[t * rows:(t + 1) * rows, :], k_s[t % stages, :, :])
                    T.barrier_arrive(full[t % stages])
            else:
                T.clear(acc)
                for t in T.serial(n):
                    T.barrier_wait(full[t % stages], (t // stages) & 1)
                    T.gemm(q_s, k_s[t % stages, :, :], acc, transpose_B=True)
                    T.barrier_arrive(free[t % stages])
                T.copy(acc, O)
    return handoff


def test_a_load_read_in_a_ws_branch_is_waited_for_inside_it():
    """The wait for Q's TMA load stands at the start of the consumer's region: between the
    two regions it split them, and the barrier pass ordered the consumer after the whole
    producer with a block barrier (the producer waits on ``free``, which only the consumer
    arrives on: a hang)."""
    lines = _lines(_handoff())
    cons = lines.index("with T.ws(0):")
    assert lines[cons + 1].startswith("T.mbarrier_wait_parity(tc_bar")
    assert not any(x.startswith("T.mbarrier_wait_parity(tc_bar") for x in lines[:cons])
    src = tilecute.compile(_handoff(), target="sm_90a").get_kernel_source()
    between = src.split("if tc_tid >= 128:", 1)[1].split("if tc_tid < 128:", 1)[0]
    assert "sync_threads" not in between and "tct.wait(tc_bar" not in between
    assert "tct.wait(tc_bar" in src.split("if tc_tid < 128:", 1)[1].split("tcm.gemm", 1)[0]


@pytest.mark.gpu
def test_ws_branch_handoff_matches_torch():
    import torch

    q = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    k = torch.randn(256, 64, device="cuda", dtype=torch.float16)
    out = torch.empty(64, 64, device="cuda")
    tilecute.compile(_handoff(), target="sm_90a")(q, k, out)
    ref = sum(q.float() @ k[t * 64:(t + 1) * 64].float().T for t in range(4))
    torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-2)

def test_decode_builds(tmp_path):
    assert tilecute.build_cubin(decode(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [1, 2, 3])
def test_decode_matches_torch(stages):
    import torch

    seq, heads, dim = 1024, 64, 128
    kernel = tilecute.compile(decode(seq, heads, dim, stages=stages), out_idx=[4])
    torch.manual_seed(0)
    q = torch.randn(heads, dim, device="cuda", dtype=torch.float16)
    k = torch.randn(seq, dim, device="cuda", dtype=torch.float16)
    v = torch.randn(seq, dim, device="cuda", dtype=torch.float16)
    mask = torch.randint(0, 2, (seq,), device="cuda", dtype=torch.uint8)
    mask[0] = 1
    out = kernel(q, k, v, mask)
    s = (q.float() @ k.float().T) * 0.125 * 1.0  # exp2 of (s * 0.125): base-2 softmax
    s = s.masked_fill(mask[None, :] == 0, float("-inf"))
    p = torch.exp2(s - s.max(dim=1, keepdim=True).values)
    ref = (p.half().float() @ v.float()) / p.sum(dim=1, keepdim=True)
    assert torch.allclose(out.float(), ref, atol=1e-2, rtol=1e-2), (out.float() - ref).abs().max()
