"""A thirtieth set of programs in TileLang's idioms (tests/unseen_programs30.py).

Hopper schedules written by hand (``T.ws`` and ``tx``-range producer / consumer roles, rings
of mbarriers fed by ``T.tma_copy``, register budgets, ``T.Persistent``, ``T.wgmma_gemm`` +
``T.wait_wgmma`` overlaps, ``T.fence_proxy_async``, named barriers, ``wg_wait``,
``order``/``stage``/``group``, ``k_pack`` + ``clear_accum``) and the sm_80 target
(``target="cuda -arch=sm_80"``, sm_86, sm_89: mma.sync in fp16 / bf16 / tf32, SIMT int8 /
fp8, cp.async pipelines, a register-A GEMM, transposes, attention, a dequantizing GEMM).
CPU: each builds to a cubin for its arch and what matters is read in the generated source;
what sm_80 cannot run is refused naming the form and the arch.
GPU: each matches a torch reference (``pytest -m gpu tests/test_unseen_programs30.py``)."""

import pytest

import tilecute
import rounds
import unseen_programs30 as P

HOPPER = ["ws_attention_tma_ring", "ws_rowsum_tma_ring", "persistent_gemm_primitive",
          "persistent_serial_swizzled_gemm", "wgmma_scores_overlap_rowmax", "fence_thread_scaled_operand",
          "ws_named_barrier_colmax", "gemm_wg_wait_two_accumulators", "gemm_order_stage_group_epilogue",
          "gemm_kpack_clear_accum_fullcol", "ws_annotated_regs_gemm_bias",
          "ws_producer_thread_copies_split_gemm", "ws_tma_store_epilogue_ring",
          "ws_ring_release_previous_stage", "wgmma_register_p_attention", "ws_pingpong_consumers_gemm",
          "wgmma_split_d_scores_wait_one", "gemm_annotation_waits_0115"]
# prim_func factories of the sm_80 half and the arch each is built for
SM80 = {"sm80_gemm_tf32": "sm_80", "sm80_gemm_int8_tn": "sm_80", "sm89_gemm_fp8_e4m3": "sm_89",
        "sm80_transpose_pipelined": "sm_80", "sm80_flash_fwd_causal": "sm_80",
        "sm80_dequant_uint4_gemm": "sm_80", "sm80_gemm_register_a_gelu": "sm_80",
        "sm80_layernorm_pipelined": "sm_80", "sm80_splitk_atomic_gemm": "sm_80",
        "sm80_ws_mbarrier_handoff": "sm_80", "sm80_flash_order_stage_group": "sm_80"}
# @tilecute.jit programs carrying their own target
JIT_TARGETS = {"sm80_gemm_fp16_swizzled": 80, "sm86_gemm_bf16_nt_ragged": 86, "a100_tag_softmax_rows": 80}
# Hopper programs sm_80 refuses, and the words naming the form and the arch
SM80_REFUSED = {
    "ws_attention_tma_ring": "T.tma_copy needs TMA \\(sm_90 or newer\\); the target is sm_80",
    "ws_rowsum_tma_ring": "T.tma_copy needs TMA \\(sm_90 or newer\\); the target is sm_80",
    "ws_tma_store_epilogue_ring": "T.tma_copy needs TMA \\(sm_90 or newer\\); the target is sm_80",
    "wgmma_scores_overlap_rowmax": "T.wgmma_gemm runs on wgmma only: wgmma needs sm_90a; the target is sm_80",
    "fence_thread_scaled_operand": "T.wgmma_gemm runs on wgmma only: wgmma needs sm_90a; the target is sm_80",
    "ws_ring_release_previous_stage": "T.tma_copy needs TMA \\(sm_90 or newer\\); the target is sm_80",
    "wgmma_register_p_attention": "T.wgmma_gemm runs on wgmma only: wgmma needs sm_90a; the target is sm_80",
    "ws_pingpong_consumers_gemm": "T.tma_copy needs TMA \\(sm_90 or newer\\); the target is sm_80",
    "wgmma_split_d_scores_wait_one": "T.wgmma_gemm runs on wgmma only: wgmma needs sm_90a; the target is sm_80",
}


_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")
_body = rounds.kernel_body


def body(name, arch="sm_90a", **kw):
    return _body(tilecute.compile(getattr(P, name)(**kw), target=arch).get_kernel_source())


def test_every_program_is_listed():
    import types
    defined = {n for n, f in vars(P).items()
               if isinstance(f, types.FunctionType) or hasattr(f, "get_tir") or hasattr(f, "compile")}
    assert defined - {"tilecute", "T"} == set(HOPPER) | set(SM80) | set(JIT_TARGETS) | set(P.EAGER_SHAPES)


# ---- every program builds for its arch ------------------------------------------------------
@pytest.mark.parametrize("name", HOPPER)
def test_hopper_program_builds_a_cubin(name, tmp_path):
    assert tilecute.build_cubin(getattr(P, name)(), "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("name", sorted(SM80))
def test_sm80_program_builds_a_cubin(name, tmp_path):
    assert tilecute.build_cubin(getattr(P, name)(), SM80[name], out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("name", sorted(JIT_TARGETS))
def test_jit_target_decides_the_cubin_arch(name):
    """``@tilecute.jit(target="cuda -arch=sm_80")`` / ``target="sm_86"`` build for that arch
    whatever TILECUTE_ARCH says (sm_90a here): the cubin's ELF flags carry the SM number."""
    from elftools.elf.elffile import ELFFile

    path = getattr(P, name)().ensure_cubin()
    with open(path, "rb") as f:
        assert ELFFile(f).header.e_flags & 0xFF == JIT_TARGETS[name]


@pytest.mark.parametrize("name", sorted(SM80_REFUSED))
def test_sm80_refuses_hopper_forms_by_name(name, tmp_path):
    with pytest.raises(Exception, match=SM80_REFUSED[name]):
        tilecute.build_cubin(getattr(P, name)(), "sm_80", out_dir=str(tmp_path))


@pytest.mark.parametrize("name", sorted(set(HOPPER) - set(SM80_REFUSED) - {"ws_rowsum_tma_ring"}))
def test_hopper_schedules_without_tma_or_wgmma_build_for_sm80(name, tmp_path):
    """The rest of the Hopper half has nothing sm_80 lacks (T.gemm falls to mma.sync, tile
    copies to cp.async, T.ws roles and mbarriers exist there; the register annotations
    name no instruction without a producer warpgroup)."""
    assert tilecute.build_cubin(getattr(P, name)(), "sm_80", out_dir=str(tmp_path)).kernel_names


def test_sm80_refuses_fp8_gemm_and_setmaxnreg(tmp_path):
    with pytest.raises(Exception, match="T.gemm on float8_e4m3 operands: float8 values convert only on sm_89\\+ "
                                        ".*the target is sm_80"):
        tilecute.build_cubin(P.sm89_gemm_fp8_e4m3(), "sm_80", out_dir=str(tmp_path))
    import tilecute.language as T

    @T.prim_func
    def regs(X: T.Tensor((256,), T.float32), Y: T.Tensor((256,), T.float32)):
        with T.Kernel(1, threads=256) as bx:
            with T.ws(1):
                T.dec_max_nreg(40)
                Y[T.get_thread_binding() - 128] = X[T.get_thread_binding() - 128]
            with T.ws(0):
                T.inc_max_nreg(232)

    with pytest.raises(Exception, match="T.set_max_nreg \\(T.dec_max_nreg\\(40\\)\\) is setmaxnreg, an sm_90a instruction; "
                                        "the target is sm_80"):
        tilecute.build_cubin(regs, "sm_80", out_dir=str(tmp_path))


def test_sm80_refuses_shuffle_elect_by_name(tmp_path):
    """T.shuffle_elect is elect.sync (sm_90+; TileLang's tl_shuffle_elect static_asserts
    below it): on sm_80 it was a ptxas failure with no line; now the statement reading it
    is refused, naming the form and the arch.  sm_90a builds it."""
    import tilecute.language as T

    @T.prim_func
    def elect(X: T.Tensor((256,), T.int32)):
        with T.Kernel(1, threads=256) as bx:
            tx = T.get_thread_binding()
            if T.shuffle_elect(128):
                X[tx] = 1

    with pytest.raises(Exception, match="T.shuffle_elect is elect.sync, sm_90\\+ .*; the target is sm_80"):
        tilecute.build_cubin(elect, "sm_80", out_dir=str(tmp_path))
    with pytest.raises(Exception, match="T.shuffle_elect is elect.sync, sm_90\\+ .*; the target is sm_86"):
        tilecute.build_cubin(elect, "sm_86", out_dir=str(tmp_path))
    assert tilecute.build_cubin(elect, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_sm80_refuses_remote_arrive_by_name(tmp_path):
    """T.mbarrier_arrive(bar, cta_id) (an arrive on another block's barrier: mapa +
    shared::cluster, sm_90+) in a kernel not launched in clusters built for sm_80 crashed
    inside CuTe DSL ("Unsupported GPU architecture 'sm_80'"); now it is refused by name."""
    import tilecute.language as T

    @T.prim_func
    def remote(X: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            bar = T.alloc_cluster_barrier(128)
            T.mbarrier_arrive(bar, 0)
            T.mbarrier_wait_parity(bar, 0)
            X[T.get_thread_binding()] = 1.0

    with pytest.raises(Exception, match=r"T.mbarrier_arrive\(mbarrier, cta_id\) arrives on a barrier of another "
                                        r"block of the cluster \(distributed shared memory, sm_90\+\); the target "
                                        r"is sm_80"):
        tilecute.build_cubin(remote, "sm_80", out_dir=str(tmp_path))
    assert tilecute.build_cubin(remote, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("target", ["cuda -arch=sm_90", "sm_90", {"kind": "cuda", "arch": "sm_90"}])
def test_sm90_target_builds_sm90a_code(target):
    """TileLang compiles a compute-9.0 target as sm_90a (its nvcc ``get_target_arch``); a
    plain ``sm_90`` target was planned for wgmma / setmaxnreg / TMA like sm_90a and then
    crashed inside CuTe DSL ("expects arch to be sm_90a, but got sm_90", or libNVVM's
    "unsupported operation" for setmaxnreg).  Its cubin is now an sm_90a one."""
    from elftools.elf.elffile import ELFFile

    def flags(name, t):
        with open(tilecute.compile(getattr(P, name)(), target=t).ensure_cubin(), "rb") as f:
            return ELFFile(f).header.e_flags

    for name in ("ws_rowsum_tma_ring", "wgmma_scores_overlap_rowmax"):
        assert flags(name, target) == flags(name, "sm_90a")


def test_tvm_cuda_tags_name_their_arch():
    """TileLang hands its target to TVM's Target, so a CUDA tag (``"nvidia/nvidia-a100"``) is
    a target it takes; it was refused as "not an architecture tilecute supports"."""
    import tilecute.language as T
    from tilecute.api import _arch
    from tilecute.runtime.arch import TargetError

    assert [_arch(t, "f") for t in ("nvidia/nvidia-a100", "nvidia/geforce-rtx-3090", "nvidia/geforce-rtx-4090",
                                    "nvidia/jetson-agx-orin-64gb", "nvidia/nvidia-h100")] == \
        ["sm_80", "sm_86", "sm_89", "sm_87", "sm_90a"]
    with pytest.raises(TargetError, match="f: target 'nvidia/geforce-rtx-2080': a TVM target tag of a GPU "
                                          "tilecute does not build for"):
        _arch("nvidia/geforce-rtx-2080", "f")

    # a tag of an older GPU is refused when compiled, not when decorated (TileLang reads it then)
    @tilecute.jit(target="nvidia/geforce-rtx-2080")
    def old(N=128):
        @T.prim_func
        def main(X: T.Tensor((N,), T.float32)):
            with T.Kernel(1, threads=N) as bx:
                X[T.get_thread_binding()] = 0.0
        return main

    with pytest.raises(TargetError, match="nvidia/geforce-rtx-2080"):
        old()


def test_device_arch():
    from tilecute.runtime.arch import device_arch

    assert [device_arch(a) for a in ("sm_90", "sm_90a", "sm_80", "sm_89")] == ["sm_90a", "sm_90a", "sm_80", "sm_89"]


def _gemm_with(call, wgmma=False):
    import tilecute.language as T

    return T.from_script(
        "@T.prim_func\n"
        "def g(A: T.Tensor((64, 64), 'float16'), B: T.Tensor((64, 64), 'float16'),"
        " C: T.Tensor((64, 64), 'float32')):\n"
        "    with T.Kernel(1, threads=128) as bx:\n"
        "        As = T.alloc_shared((64, 64), 'float16')\n"
        "        Bs = T.alloc_shared((64, 64), 'float16')\n"
        "        c = T.alloc_fragment((64, 64), 'float32')\n"
        "        T.copy(A, As)\n"
        "        T.copy(B, Bs)\n"
        "        T.clear(c)\n"
        f"        {call}\n"
        + ("        T.wait_wgmma(0)\n" if wgmma else "") +
        "        T.copy(c, C)\n")


def test_gemm_knobs_in_annotations():
    """TileLang 0.1.15's T.gemm has no k_pack / wg_wait keywords: they ride in
    ``annotations`` (its GEMM op reads the keys "k_pack" and "wg_wait"; T.wgmma_gemm sets
    "wg_wait" -1 only where it is not given).  They were refused ("tilecute takes no
    annotations")."""
    from tilecute.ir import nodes as N
    from tilecute.language import FrontendError

    from tilecute.ir.visitor import walk_stmts

    def gemm(call, wgmma=False):
        func = _gemm_with(call, wgmma)
        (g,) = [s for k in func.kernels for s in walk_stmts(k.body) if isinstance(s, N.Gemm)]
        return g

    assert gemm("T.gemm(As, Bs, c, annotations={'wg_wait': 1})").wg_wait == 1
    assert gemm("T.gemm(As, Bs, c, annotations={'wg_wait': -1})").wg_wait == N.NO_WAIT
    assert gemm("T.gemm(As, Bs, c, annotations={'k_pack': 2, 'wg_wait': 0})").wg_wait == 0
    assert gemm("T.gemm(As, Bs, c, wg_wait=1, annotations={'wg_wait': 1})").wg_wait == 1
    assert gemm("T.wgmma_gemm(As, Bs, c)", True).wg_wait == N.NO_WAIT
    # T.wgmma_gemm with a wait: the batch issued, then waited for right there
    func = _gemm_with("T.wgmma_gemm(As, Bs, c, annotations={'wg_wait': 0})")
    body = [s for k in func.kernels for s in walk_stmts(k.body) if isinstance(s, (N.Gemm, N.WaitWgmma))]
    assert [type(s).__name__ for s in body] == ["Gemm", "WaitWgmma"]
    assert body[0].wgmma_only and body[0].wg_wait == N.NO_WAIT and body[1].pending == 0
    with pytest.raises(FrontendError, match=r"T.gemm: annotations=\{'wg_wait': 0\} and wg_wait=1 disagree"):
        gemm("T.gemm(As, Bs, c, wg_wait=1, annotations={'wg_wait': 0})")
    with pytest.raises(FrontendError, match=r"T.gemm: k_pack=4; TileLang's T.gemm takes 1 or 2"):
        gemm("T.gemm(As, Bs, c, annotations={'k_pack': 4})")
    with pytest.raises(FrontendError, match=r"T.gemm: annotations=\{'is_wgmma': True\} is not supported: "
                                            "TileLang's T.wgmma_gemm sets it"):
        gemm("T.gemm(As, Bs, c, annotations={'is_wgmma': True})")
    with pytest.raises(FrontendError, match=r"T.wgmma_gemm: annotations=\{'color': 1\} is not supported: "
                                            "tilecute does not know this annotation"):
        gemm("T.wgmma_gemm(As, Bs, c, annotations={'color': 1})", True)
    # the wait reaches the generated code
    src = _body(tilecute.compile(_gemm_with("T.gemm(As, Bs, c, annotations={'wg_wait': -1})"),
                                 target="sm_90a").get_kernel_source())
    assert "wait=None)" in src and src.index("tcm.gemm(") < src.index("tcm.drain(c)")


# ---- what the generated source says: Hopper ----------------------------------------------------
def test_ws_attention_ring_roles():
    src = body("ws_attention_tma_ring")
    prod, cons = src.split("# T.ws(1): threads 128..255")[1].split("# T.ws(0): threads 0..127")
    assert "cute.arch.setmaxregister_decrease(40)" in prod and "cute.arch.setmaxregister_increase(232)" in cons
    # the producer waits for the stage to be free on the phase before, loads by TMA, arrives
    assert "tct.wait(k_free + t % 2, t // 2 & 1 ^ 1)" in prod and "tct.arrive(k_full + t % 2)" in prod
    assert prod.count("tct.load(") == 3 and "tcm.gemm" not in prod
    # the consumer waits on full, and frees K's stage right after its GEMM, V's after the second
    assert cons.index("tct.wait(k_full + t_1_ % 2") < cons.index("tcm.gemm(") < cons.index("tct.arrive(k_free")
    assert cons.index("tct.wait(v_full + t_1_ % 2") < cons.rindex("tcm.gemm(") < cons.index("tct.arrive(v_free")


def test_tx_range_rowsum_ring():
    src = body("ws_rowsum_tma_ring")
    assert "cute.arch.setmaxregister_decrease(40)" in src and "cute.arch.setmaxregister_increase(232)" in src
    assert "tct.init_barriers(full, 3, 1)" in src and "tct.init_barriers(empty, 3, 128)" in src
    # the one thread tx == 128 (the region's thread 0) issues each stage's TMA and arrives
    assert "if tx == 128:" in src and "if tc_wtid1 == 0:" in src
    assert "full + k % 3, (k * 256, bx * 64), 65536, arrive=False)" in src
    assert "X_s.iterator + cute.assume(k_1_ % 3 * 16384 + i * 256 + j" in src  # stage k % 3 read


def test_persistent_walks():
    src = body("persistent_gemm_primitive")
    # TileLang's T.Persistent: waves of 7 over the 3 x 5 tiles padded to groups of 4 columns
    assert "for w in cutlass.range(0, 4):" in src and "tile_id = w * 7 + wid" in src
    assert "tm = tile_id // 4 - tile_id // 4 // 3 * 3" in src
    assert "tn = tile_id // 4 // 3 * 4 + (tile_id - tile_id // 4 * 4)" in src and "if tn < 5:" in src
    src = body("persistent_serial_swizzled_gemm")
    assert "if tm * 64 < 320 and tn * 128 < 384:" in src and "accumulate=not k == 0" in src


def test_wgmma_overlaps():
    src = body("wgmma_scores_overlap_rowmax")
    # the bias loads run while the wgmma batch is in flight; the scores are read after the wait
    gemm = src.index("tcm.gemm(tc_mma0")
    assert "wait=None" in src[gemm:src.index("\n", gemm)]
    assert gemm < src.index("bias.iterator") < src.index("tcm.wait_batches(0)") < src.index("* cutlass.Float32(0.125)")
    src = body("fence_thread_scaled_operand")
    loop = src[src.index("for k in cutlass.range(0, 4):"):]
    # the threads' stores are fenced for the async proxy before the barrier before wgmma
    stores = loop.index("s[k * 64")
    assert stores < loop.index('cute.arch.fence_proxy("async.shared", space="cta")', stores) < \
        loop.index("tcm.gemm(tc_mma0") < loop.index("tcm.wait_batches(0)")
    src = body("gemm_wg_wait_two_accumulators")
    g = src.index("tcm.gemm(tc_mma0")
    u = src.index("tcm.gemm(tc_mma1")
    assert "wait=None" in src[g:src.index("\n", g)] and "wait=None" not in src[u:src.index("\n", u)]
    assert u < src.index("tcm.fence_registers(g)")


def test_named_barriers_per_role():
    src = body("ws_named_barrier_colmax")
    r0, r1 = src.split("# T.ws(0): threads 0..127")[1].split("# T.ws(1): threads 128..255")
    assert "cute.arch.barrier(barrier_id=1, number_of_threads=128)" in r0
    assert "cute.arch.barrier(barrier_id=2, number_of_threads=128)" in r1
    assert "sync_threads()" not in r0 + r1


def test_gemm_arguments():
    src = body("gemm_kpack_clear_accum_fullcol")
    # FullCol: two warpgroups side by side along N; A read MN-major; cleared by the first step
    assert 'tcm.tiled_mma("wgmma", cutlass.BFloat16, cutlass.BFloat16, cutlass.Float32, True, True, (1, 2), 256)' in src
    assert "accumulate=not k == 0" in src
    src = body("ws_annotated_regs_gemm_bias")
    assert "cute.arch.setmaxregister_decrease(24)" in src and "cute.arch.setmaxregister_increase(240)" in src
    src = body("gemm_order_stage_group_epilogue")
    assert src.count("tct.load(") == 2 and "tcm.gemm(tc_mma0" in src


def test_split_warpgroups_and_store_ring():
    src = body("ws_producer_thread_copies_split_gemm")
    assert src.count("tcm.gemm(") == 2
    src = body("ws_tma_store_epilogue_ring")
    cons = src.split("# T.ws(0): threads 0..127")[1]
    # the consumer's stores into C_s are fenced and met at barrier 1 before one thread's TMA store
    assert cons.index('cute.arch.fence_proxy("async.shared", space="cta")') < \
        cons.index("cute.arch.barrier(barrier_id=1, number_of_threads=128)") < cons.index("tct.store(C_desc")


def test_one_batch_in_flight_frees_the_stage_before():
    src = body("ws_ring_release_previous_stage")
    cons = src.split("# T.ws(0): threads 0..127")[1]
    gemm = cons.index("tcm.gemm(tc_mma0")
    assert cons[gemm:cons.index("\n", gemm)].endswith("wait=1)")  # one batch left in flight
    assert "if k_1_ > 0:\n                tct.arrive(empty + ((k_1_ - 1) - (k_1_ - 1) // 3 * 3))" in cons
    # after the loop: every batch waited for, then the last stage (15 % 3 == 0) freed
    assert cons.index("tcm.wait_batches(0)") < cons.index("tct.arrive(empty)\n")


def test_register_p_second_wgmma():
    src = body("wgmma_register_p_attention")
    assert 'tcm.a_fragment("wgmma", (1, 1), (64, 256), cutlass.Float16, tc_tid)' in src
    assert "tcm.gemm(tc_mma1, tc_tid, o, p, " in src and "a_regs=True, wait=None)" in src
    assert src.index("p[tc_r3 + tc_lane4] = cutlass.Float16(s[tc_r3 + tc_lane4])") < src.index("tcm.gemm(tc_mma1")
    assert src.index("tcm.gemm(tc_mma1") < src.rindex("tcm.wait_batches(0)") < src.index("/ sm[")


def test_pingpong_consumers_take_turns():
    src = body("ws_pingpong_consumers_gemm")
    wg0 = src.split("# T.ws(0): threads 0..127")[1].split("# T.ws(1)")[0]
    wg1 = src.split("# T.ws(1): threads 128..255")[1]
    # warp group 0 waits for its turn (5) before its GEMM and passes the turn (6) after it
    assert wg0.index("cute.arch.barrier(barrier_id=5, number_of_threads=256)") < wg0.index("tcm.gemm(") < \
        wg0.index("cute.arch.barrier_arrive(barrier_id=6, number_of_threads=256)")
    # warp group 1 lets warp group 0 go first, then alternates; its last turn is not passed on
    assert wg1.index("cute.arch.barrier_arrive(barrier_id=5, number_of_threads=256)") < wg1.index("for k_2_")
    assert "if k_2_ < 7:\n                cute.arch.barrier_arrive(barrier_id=5, number_of_threads=256)" in wg1
    # each consumer multiplies its own 64 rows of the stage (warp group 1's start 64 rows in)
    assert "tcm.gemm(tc_mma1, tc_wtid7, c1, tcm.operand(tc_smem + cute.assume(8192 + (k_2_ % 2) * 16384" in wg1
    assert "if tcvote.elect_one_sync(tc_tx // 32 % 4 == 0):" in src


def test_eager_ring_in_one_barrier_array():
    k = P.eager_ws_one_barrier_array.compile(**P.EAGER_SHAPES["eager_ws_one_barrier_array"])
    assert k.ensure_cubin()
    src = _body(k.get_kernel_source())
    assert "tct.init_barriers(mbars, 6, 128)" in src
    prod, cons = src.split("# T.ws(1): threads 128..255")[1].split("# T.ws(0): threads 0..127")[:2]
    # the producer waits on the empty half (k % 3 + 3), loads into and arrives on the full half
    assert "tct.wait(mbars + (k % 3 + 3), k // 3 & 1 ^ 1)" in prod and "tct.arrive(mbars + k % 3)" in prod
    assert "tct.wait(mbars + k % 3, k // 3 & 1)" in cons and "tct.arrive(mbars + (k % 3 + 3))" in cons


def test_annotation_waits_program():
    src = body("gemm_annotation_waits_0115")
    g1 = src.index("tcm.gemm(tc_mma0")
    g2 = src.index("tcm.gemm(tc_mma1")
    assert "wait=None)" in src[g1:src.index("\n", g1)] and "wait=None" not in src[g2:src.index("\n", g2)]
    assert "accumulate=not k == 0" in src[g1:src.index("\n", g1)]


def test_split_d_scores_and_wait_one():
    src = body("wgmma_split_d_scores_wait_one")
    # two batches into one accumulator, the row-max copy between them and the wait
    assert src.count("tcm.gemm(") == 4 and src.count("wait=None)") == 4
    assert src.index("tcm.gemm(tc_mma1") < src.index("mp[tc_q4] = mx[tc_q4]") < src.index("tcm.wait_batches(0)")
    # wait_wgmma(1) before the first half of P is zeroed; the zeros never reach the GEMMs
    # (the block barrier before the stores drains the batch still in flight)
    one = src.index("tcm.wait_batches(1)")
    assert src.index("tcm.gemm(tc_mma3") < one < src.index("tcm.drain(o)") < src.index("cutlass.Float16(0.0)")
    assert src.index("cutlass.Float16(0.0)") < src.rindex("tcm.wait_batches(0)") < src.index("/ sm[")


# ---- what the generated source says: sm_80 -------------------------------------------------------
def test_sm80_gemm_families():
    src = _body(P.sm80_gemm_fp16_swizzled().get_kernel_source())
    assert 'tcm.tiled_mma("mma", cutlass.Float16, cutlass.Float16, cutlass.Float32' in src
    assert "cute.arch.cp_async_wait_group(6)" in src  # 4 stages, two copies each: 3 steps ahead
    assert "by_1_ = panel_offset" in src  # T.use_swizzle's rasterization
    src = _body(P.sm86_gemm_bf16_nt_ragged().get_kernel_source())
    assert 'tcm.tiled_mma("mma", cutlass.BFloat16, cutlass.BFloat16, cutlass.Float32, False, False' in src
    src = body("sm80_gemm_tf32", "sm_80")
    assert 'tcm.tiled_mma("mma", cutlass.TFloat32, cutlass.TFloat32, cutlass.Float32' in src
    # int8: warp mma.sync m16n8k32 (inline PTX); fp8 on sm_89: scalar multiply-adds
    assert 'tcm.tiled_mma("mma", cutlass.Int8, cutlass.Int8, cutlass.Int32' in \
        body("sm80_gemm_int8_tn", "sm_80")
    assert "cutlass.Float8E4M3FN, 64, 64, False)" in body("sm89_gemm_fp8_e4m3", "sm_89")


def test_sm80_pipelines_and_register_a():
    src = body("sm80_gemm_register_a_gelu", "sm_80")
    assert "a_regs=True" in src and "tcm.gemm_warp(tc_mma0, tc_tid, acc, A_f," in src
    src = body("sm80_flash_fwd_causal", "sm_80")
    assert "for t in cutlass.range(0, bx + 1 - 0):" in src and src.count("tcm.gemm_warp(") == 2
    src = body("sm80_ws_mbarrier_handoff", "sm_80")
    # sm_80's mbarriers: test_wait loops, .cta arrives, no fence.mbarrier_init
    assert "tct.wait_test(empty + k % 2, k // 2 & 1 ^ 1)" in src and "tct.arrive_cta(full + k % 2)" in src
    assert "tct.init_barriers(full, 2, 128, fence=False)" in src
    # the copies of the slot are waited on by each thread before it arrives
    assert src.index("cute.arch.cp_async_wait_group(0)  # this thread's cp.async") < src.index("tct.arrive_cta(full")
    src = body("sm80_flash_order_stage_group", "sm_80")
    # before sm_90 the scheduled attention runs in source order, P from registers (mma.sync)
    assert src.count("tcm.gemm_warp(") == 2 and "a_regs=True" in src
    assert src.index("tcm.gemm_warp(tc_mma0") < src.index("T.reduce_max") < src.index("tcm.gemm_warp(tc_mma1")
    src = body("sm80_splitk_atomic_gemm", "sm_80")
    assert "tca.atomic_add(C, (by * 64 + i7, bx * 64 + (i8 + tc_lane22)), acc[tc_r21 + tc_lane22])" in src


# ---- GPU: against torch ----------------------------------------------------------------------
_close = rounds.close


def _on_gpu(func, arch, out_idx=None):
    """``func`` built to run on the GPU at hand: for ``arch``, or where that is an sm_8x
    arch and the GPU a Hopper (an sm_8x cubin's SASS does not load on sm_90), for the GPU
    with wgmma and TMA off -- the same mma.sync / cp.async / SIMT paths."""
    import torch
    if torch.cuda.get_device_capability()[0] >= 9 and arch.startswith("sm_8"):
        return tilecute.compile(func, out_idx=out_idx, target="sm_90a",
                                options={"disable_wgmma": True, "disable_tma": True})
    return tilecute.compile(func, out_idx=out_idx, target=arch)


def _run(name, arch, *args):
    return _on_gpu(getattr(P, name)(), arch)(*args)


def _attn(q, k, v, causal=False):
    import torch
    s = q.float() @ k.float().transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v.float()


@pytest.mark.gpu
def test_hopper_schedules_on_gpu():
    import torch
    torch.manual_seed(0)
    dev = "cuda"
    h = torch.float16

    q, k, v = (torch.randn(1, 256, 2, 64, device=dev, dtype=h) for _ in range(3))
    o = torch.empty_like(q)
    _run("ws_attention_tma_ring", "sm_90a", q, k, v, o)
    want = _attn(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
    _close(o, want, 2e-2)

    x = torch.randn(256, 2048, device=dev)
    y = torch.empty(256, device=dev)
    _run("ws_rowsum_tma_ring", "sm_90a", x, y)
    _close(y, (x * x).sum(1), 1e-2)

    a, b = torch.randn(384, 256, device=dev, dtype=h), torch.randn(256, 320, device=dev, dtype=h)
    c = torch.zeros(384, 320, device=dev, dtype=h)
    _run("persistent_gemm_primitive", "sm_90a", a, b, c)
    _close(c, a.float() @ b.float(), 5e-2)

    a = torch.randn(320, 128, device=dev, dtype=torch.bfloat16)
    b = torch.randn(384, 128, device=dev, dtype=torch.bfloat16)
    c = torch.full((320, 384), float("nan"), device=dev)
    _run("persistent_serial_swizzled_gemm", "sm_90a", a, b, c)
    _close(c, a.float() @ b.float().T, 2e-2)

    q, kt = torch.randn(128, 64, device=dev, dtype=h), torch.randn(256, 64, device=dev, dtype=h)
    bias = torch.randn(256, device=dev)
    o = torch.empty(128, 256, device=dev)
    _run("wgmma_scores_overlap_rowmax", "sm_90a", q, kt, bias, o)
    _close(o, torch.softmax(q.float() @ kt.float().T * 0.125 + bias * 0.5, -1), 1e-3)

    a, b = torch.randn(256, 256, device=dev, dtype=h), torch.randn(256, 128, device=dev, dtype=h)
    s = torch.rand(256, device=dev, dtype=h) + 0.5
    c = torch.empty(256, 128, device=dev)
    _run("fence_thread_scaled_operand", "sm_90a", a, b, s, c)
    _close(c, a.float() @ (b * s[:, None]).float(), 5e-2)

    x = torch.randn(256, 256, device=dev)
    y = torch.empty(8, 256, device=dev)
    _run("ws_named_barrier_colmax", "sm_90a", x, y)
    _close(y, x.abs().view(8, 32, 256).amax(1), 0)


@pytest.mark.gpu
def test_hopper_gemm_arguments_on_gpu():
    import torch
    torch.manual_seed(1)
    dev = "cuda"
    h = torch.float16

    x = torch.randn(256, 512, device=dev, dtype=h) / 8
    wg, wu = torch.randn(512, 128, device=dev, dtype=h) / 8, torch.randn(512, 128, device=dev, dtype=h) / 8
    y = torch.empty(256, 128, device=dev, dtype=h)
    _run("gemm_wg_wait_two_accumulators", "sm_90a", x, wg, wu, y)
    g, u = x.float() @ wg.float(), x.float() @ wu.float()
    _close(y, torch.nn.functional.silu(g) * u, 2e-2)

    a, b = torch.randn(256, 512, device=dev, dtype=h), torch.randn(512, 256, device=dev, dtype=h)
    r = torch.randn(256, device=dev)
    c = torch.empty(256, 256, device=dev)
    _run("gemm_order_stage_group_epilogue", "sm_90a", a, b, r, c)
    _close(c, (a.float() @ b.float()) * r[:, None], 5e-2)

    a = torch.randn(256, 256, device=dev, dtype=torch.bfloat16)  # stored (K, M)
    b = torch.randn(256, 256, device=dev, dtype=torch.bfloat16)
    c = torch.full((256, 256), float("nan"), device=dev, dtype=torch.bfloat16)
    _run("gemm_kpack_clear_accum_fullcol", "sm_90a", a, b, c)
    _close(c, a.float().T @ b.float(), 2e-1)

    a, b = torch.randn(256, 384, device=dev, dtype=h), torch.randn(384, 256, device=dev, dtype=h)
    bias = torch.randn(256, device=dev)
    c = torch.empty(256, 256, device=dev, dtype=h)
    _run("ws_annotated_regs_gemm_bias", "sm_90a", a, b, bias, c)
    _close(c, a.float() @ b.float() + bias, 1e-1)

    a, b = torch.randn(128, 256, device=dev, dtype=h), torch.randn(256, 256, device=dev, dtype=h)
    c = torch.empty(128, 256, device=dev, dtype=h)
    _run("ws_producer_thread_copies_split_gemm", "sm_90a", a, b, c)
    _close(c, a.float() @ b.float(), 1e-1)

    a, b = torch.randn(256, 256, device=dev, dtype=h), torch.randn(256, 256, device=dev, dtype=h)
    c = torch.empty(256, 256, device=dev, dtype=h)
    _run("ws_tma_store_epilogue_ring", "sm_90a", a, b, c)
    _close(c, a.float() @ b.float(), 1e-1)

    a, b = torch.randn(256, 1024, device=dev, dtype=h), torch.randn(1024, 256, device=dev, dtype=h)
    c = torch.empty(256, 256, device=dev)
    _run("ws_ring_release_previous_stage", "sm_90a", a, b, c)
    _close(c, a.float() @ b.float(), 1e-1)

    a, b = torch.randn(256, 512, device=dev, dtype=h), torch.randn(512, 256, device=dev, dtype=h)
    c = torch.empty(256, 256, device=dev)
    _run("ws_pingpong_consumers_gemm", "sm_90a", a, b, c)
    _close(c, a.float() @ b.float(), 1e-1)

    q, k, v = (torch.randn(256, 64, device=dev, dtype=h) for _ in range(3))
    o = torch.empty(256, 64, device=dev)
    _run("wgmma_register_p_attention", "cuda -arch=sm_90", q, k, v, o)  # TileLang's sm_90: sm_90a
    p = torch.exp((q.float() @ k.float().T - (q.float() @ k.float().T).amax(1, keepdim=True)) * 0.125)
    _close(o, p.half().float() @ v.float() / p.sum(1, keepdim=True), 2e-2)

    a, b = torch.randn(256, 512, device=dev, dtype=h), torch.randn(256, 512, device=dev, dtype=h)
    sc = torch.rand(256, device=dev) + 0.5
    _close(P.eager_ws_one_barrier_array(a, b, sc), (a.float() @ b.float().T) * sc, 1e-1)

    x = torch.randn(128, 256, device=dev, dtype=torch.bfloat16) / 4
    w1, w2 = (torch.randn(256, 256, device=dev, dtype=torch.bfloat16) / 4 for _ in range(2))
    y = torch.empty(128, 256, device=dev, dtype=torch.bfloat16)
    _run("gemm_annotation_waits_0115", "sm_90a", x, w1, w2, y)
    _close(y, (x.float() @ w1.float()) * torch.sigmoid(x.float() @ w2.float()), 3e-2)

    q, k, v = (torch.randn(128, 128, device=dev, dtype=h) for _ in range(3))
    o = torch.empty(128, 128, device=dev)
    _run("wgmma_split_d_scores_wait_one", "sm_90a", q, k, v, o)
    s = q.float() @ k.float().T
    p = torch.exp2((s - s.amax(1, keepdim=True)) * 0.1275)
    _close(o, p.half().float() @ v.float() / p.sum(1, keepdim=True), 2e-2)


@pytest.mark.gpu
def test_sm80_gemms_on_gpu():
    """The sm_80 / sm_86 / sm_89 programs (on a Hopper: their paths, built for it)."""
    import torch
    torch.manual_seed(2)
    dev = "cuda"
    h = torch.float16

    a, b = torch.randn(512, 512, device=dev, dtype=h), torch.randn(512, 384, device=dev, dtype=h)
    _close(_on_gpu(P.sm80_gemm_fp16_swizzled.get_tir(), "sm_80", out_idx=[2])(a, b), a.float() @ b.float(), 1e-1)

    a = torch.randn(200, 328, device=dev, dtype=torch.bfloat16)
    b = torch.randn(136, 328, device=dev, dtype=torch.bfloat16)
    _close(_on_gpu(P.sm86_gemm_bf16_nt_ragged.get_tir(), "sm_86", out_idx=[2])(a, b), a.float() @ b.float().T, 5e-2)

    a, b = torch.randn(256, 256, device=dev), torch.randn(256, 256, device=dev)
    c = torch.empty(256, 256, device=dev)
    _run("sm80_gemm_tf32", "sm_80", a, b, c)
    _close(c, a @ b.T, 5e-2)  # tf32 products

    a = torch.randint(-128, 128, (256, 512), device=dev, dtype=torch.int8)
    b = torch.randint(-128, 128, (256, 512), device=dev, dtype=torch.int8)
    c = torch.empty(256, 256, device=dev, dtype=torch.int32)
    _run("sm80_gemm_int8_tn", "sm_80", a, b, c)
    assert torch.equal(c.cpu(), (a.cpu().long() @ b.cpu().long().T).int())

    a = (torch.randn(128, 256, device=dev) * 2).to(torch.float8_e4m3fn)
    b = (torch.randn(128, 256, device=dev) * 2).to(torch.float8_e4m3fn)
    c = torch.empty(128, 128, device=dev)
    _run("sm89_gemm_fp8_e4m3", "sm_89", a, b, 0.25, c)
    _close(c, (a.float() @ b.float().T) * 0.25, 1e-2)

    a, b = torch.randn(128, 1024, device=dev, dtype=h), torch.randn(1024, 128, device=dev, dtype=h)
    c = torch.zeros(128, 128, device=dev)
    _run("sm80_splitk_atomic_gemm", "sm_80", a, b, c)
    _close(c, a.float() @ b.float(), 1e-1)


@pytest.mark.gpu
def test_sm80_kernels_on_gpu():
    import torch
    torch.manual_seed(3)
    dev = "cuda"
    h = torch.float16

    x = torch.randn(512, 384, device=dev, dtype=h)
    y = torch.empty(384, 512, device=dev, dtype=h)
    _run("sm80_transpose_pipelined", "sm_80", x, y)
    assert torch.equal(y, x.T)

    q, k, v = (torch.randn(1, 4, 256, 64, device=dev, dtype=h) for _ in range(3))
    o = torch.empty_like(q)
    _run("sm80_flash_fwd_causal", "sm_80", q, k, v, o)
    _close(o, _attn(q, k, v, causal=True), 2e-2)

    a = torch.randn(128, 512, device=dev, dtype=h)
    w = torch.randint(0, 256, (256, 256), device=dev, dtype=torch.uint8)
    sc = torch.rand(256, 4, device=dev, dtype=h) * 0.1 + 0.01
    c = torch.empty(128, 256, device=dev, dtype=h)
    _run("sm80_dequant_uint4_gemm", "sm_80", a, w, sc, c)
    q4 = torch.stack([w & 15, w >> 4], -1).reshape(256, 512).float() - 8  # low nibble first
    wd = (q4 * sc.float().repeat_interleave(128, 1)).half().float()
    _close(c, a.float() @ wd.T, 5e-2)

    a, b = torch.randn(256, 256, device=dev, dtype=h), torch.randn(256, 128, device=dev, dtype=h)
    c = torch.empty(256, 128, device=dev)
    _run("sm80_gemm_register_a_gelu", "sm_80", a, b, c)
    ga = torch.nn.functional.gelu(a.float(), approximate="tanh").half().float()
    _close(c, ga @ b.float(), 5e-2)

    x = torch.randn(256, 1024, device=dev, dtype=h)
    g = torch.randn(1024, device=dev, dtype=h)
    y = torch.empty_like(x)
    _run("sm80_layernorm_pipelined", "sm_80", x, g, y)
    _close(y, torch.nn.functional.layer_norm(x.float(), (1024,), eps=1e-5) * g.float(), 2e-2)

    x = torch.randn(256, 512, device=dev)
    y = torch.empty(4, 512, device=dev)
    _run("sm80_ws_mbarrier_handoff", "sm_80", x, y)
    _close(y, x.view(4, 64, 512).sum(1), 1e-4)

    q, k, v = (torch.randn(256, 64, device=dev, dtype=h) for _ in range(3))
    o = torch.empty_like(q)
    _run("sm80_flash_order_stage_group", "sm_80", q, k, v, o)
    _close(o, _attn(q, k, v), 2e-2)

    x = torch.randn(256, 2048, device=dev, dtype=h) * 3
    _close(_on_gpu(P.a100_tag_softmax_rows.get_tir(), "sm_80", out_idx=[1])(x), torch.softmax(x.float(), -1), 2e-3)


def test_order_stage_group_with_wgmma_off_runs_in_source_order():
    """On sm_90a with wgmma off the T.gemms are warp mma.sync, whose overlap tilecute does
    not schedule: the loop runs in source order, as on sm_80 (it was an OverlapError)."""
    kernel = tilecute.compile(P.sm80_flash_order_stage_group(), target="sm_90a",
                              options={"disable_wgmma": True, "disable_tma": True})
    src = _body(kernel.get_kernel_source())
    assert src.count("tcm.gemm_warp(") == 2 and "wgmma" not in src
    assert src.index("tcm.gemm_warp(tc_mma0") < src.index("tcm.gemm_warp(tc_mma1")
