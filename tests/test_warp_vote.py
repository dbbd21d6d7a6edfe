"""TileLang's warp votes and elections (T.any_sync, T.all_sync, T.ballot_sync, T.ballot,
T.activemask, T.shuffle_elect) and block barriers on a predicate (T.syncthreads_count /
_and / _or): the IR calls, the CuTe DSL text, the PTX of an sm_90a build, the refusals,
and on a GPU the values against numpy."""

import glob
import importlib.util
import textwrap

import numpy as np
import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_nodes
from tilecute.language import FrontendError
from tilecute.transform.pipeline import lower

# B[tx, k]: one column per form; a 96-thread block (warps 0..2; warp 2 partly inactive in
# no lane: all lanes run every vote)
VOTES = """
import tilecute.language as T


@T.prim_func
def votes(B: T.Tensor((96, 11), "int64")):
    with T.Kernel(1, threads=96):
        tx = T.get_thread_binding()
        B[tx, 0] = T.cast(T.any_sync(tx == 40), "int64")
        B[tx, 1] = 1
        if tx % 2 == 1:  # a vote's lanes must all be in its mask (CUDA's rule)
            B[tx, 1] = T.cast(T.all_sync(tx % 2, 0xAAAAAAAA), "int64")
        B[tx, 2] = T.cast(T.ballot_sync(tx % 32 >= 7), "int64")
        B[tx, 3] = T.cast(T.ballot(1), "int64")
        B[tx, 4] = T.cast(T.activemask(), "int64")
        B[tx, 5] = T.cast(T.syncthreads_count(tx < 50), "int64")
        B[tx, 6] = T.cast(T.syncthreads_and(tx != 95), "int64")
        B[tx, 7] = T.cast(T.syncthreads_or(tx == 3), "int64")
        B[tx, 8] = T.cast(T.shuffle_elect(64), "int64")
        B[tx, 9] = T.cast(T.shuffle_elect(0), "int64")
        B[tx, 10] = T.cast(T.ballot_sync(tx < 80, T.activemask()), "int64")
"""


def _votes():
    return T.from_script(VOTES)


def _expected() -> np.ndarray:
    tx = np.arange(96)
    warp, lane = tx // 32, tx % 32
    out = np.zeros((96, 11), dtype=np.int64)
    out[:, 0] = warp == 1
    out[:, 1] = 1  # the odd lanes (mask 0xAAAAAAAA, the only ones voting) all have tx % 2
    out[:, 2] = 0xFFFFFF80
    out[:, 3] = 0xFFFFFFFF
    out[:, 4] = 0xFFFFFFFF
    out[:, 5] = 50
    out[:, 6] = 0
    out[:, 7] = 1
    out[:, 8] = (lane == 0) & (warp % 2 == 0)
    out[:, 9] = tx == 0
    out[:, 10] = np.where(warp < 2, 0xFFFFFFFF, 0x0000FFFF)  # warp 2: tx 64..79
    return out


def _calls(func) -> dict:
    return {x.name: x for k in func.kernels for x in walk_nodes(k.body) if isinstance(x, N.Call)}


def test_forms_parse_to_intrinsics():
    calls = _calls(_votes())
    for name, dtype in [("vote_any", "int32"), ("vote_all", "int32"), ("vote_ballot", "uint64"),
                        ("activemask", "uint64"), ("syncthreads_count", "int32"),
                        ("syncthreads_and", "int32"), ("syncthreads_or", "int32"),
                        ("elect_one_sync", "bool")]:
        assert calls[name].dtype == dtype, name
    # an integer predicate is compared with 0; the constant mask is a uint32
    assert calls["vote_all"].args[0] == N.Const(0xAAAAAAAA, "uint32")
    assert isinstance(calls["vote_all"].args[1], N.Cmp)
    assert calls["vote_ballot"].args[-1].dtype == "bool"


def test_cute_source():
    src = emit_cute(lower(_votes(), "sm_90a"))
    assert "from tilecute.runtime.cute import vote as tcvote" in src
    assert "cute.arch.vote_any_sync(tx == 40)" in src
    assert "mask=2863311530" in src
    assert "cutlass.Uint64(cutlass.Uint32(cute.arch.vote_ballot_sync(" in src
    assert "cutlass.Uint64(cute.arch.activemask())" in src
    assert "tcvote.syncthreads_count(tx < 50, 0, 0)" in src  # barrier 0, the whole block
    assert "tcvote.elect_one_sync(tc_tx // 32 % 2 == 0)" in src
    assert "tcvote.elect_one_sync(tc_tx // 32 == 0)" in src


def test_sm90a_ptx(tmp_path):
    """The build's PTX has one instruction per form (elect.sync once per call)."""
    import cutlass.cute as cute

    path = tmp_path / "k.py"
    path.write_text(emit_cute(lower(_votes(), "sm_90a")))
    spec = importlib.util.spec_from_file_location("tilecute_votes_ptx", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    cute.compile(module.votes, *module.placeholder_args(),
                 options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}")
    (ptx,) = glob.glob(str(tmp_path / "*.ptx"))
    text = open(ptx).read()
    assert "vote.sync.any.pred" in text and "vote.sync.all.pred" in text
    assert text.count("vote.sync.ballot.b32") == 3
    assert "cvt.u64.u32" in text  # the ballot zero-extended, not sign-extended
    assert "bar.red.popc.u32" in text and "bar.red.and.pred" in text
    assert "bar.red.or.pred" in text
    assert text.count("elect.sync") == 2


def test_sm90a_cubin(tmp_path):
    assert tilecute.build_cubin(_votes(), "sm_90a", out_dir=str(tmp_path)).kernel_names


def _ws_program(threads: int) -> str:
    return textwrap.dedent(f"""
    import tilecute.language as T


    @T.prim_func
    def k(B: T.Tensor(({threads},), "int32")):
        with T.Kernel(1, threads={threads}):
            tx = T.get_thread_binding()
            with T.ws(1):
                B[tx] = T.syncthreads_count(tx < 200)
    """)


def test_syncthreads_in_a_region_is_its_barrier():
    """Inside T.ws(1) the body maps onto warpgroup 1: the barrier is the region's named
    barrier over its 128 threads (as T.sync_threads there), not bar 0 over the block."""
    src = emit_cute(lower(T.from_script(_ws_program(256)), "sm_90a"))
    assert "tcvote.syncthreads_count(" in src
    assert ", 2, 128)" in src


def _error(body: str) -> str:
    text = textwrap.dedent("""
    import tilecute.language as T


    @T.prim_func
    def k(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "int32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
    """) + textwrap.indent(textwrap.dedent(body), "        ")
    with pytest.raises(FrontendError) as e:
        T.from_script(text)
    return str(e.value)


@pytest.mark.parametrize("form", ["any_sync", "all_sync", "ballot_sync", "ballot",
                                  "syncthreads_count", "syncthreads_and", "syncthreads_or"])
def test_float_predicate_refused(form):
    msg = _error(f"B[tx] = T.cast(T.{form}(A[tx]), 'int32')\n")
    assert f"T.{form} requires an integer or boolean predicate, but got float32" in msg
    assert msg.startswith("<script>:9:")  # the line of the call


def test_bad_mask_and_extent_refused():
    assert "mask=0x0 must be a nonzero 32-bit lane mask" in _error(
        "B[tx] = T.any_sync(tx == 0, 0)\n")
    assert "must be an integer lane mask" in _error("B[tx] = T.any_sync(tx == 0, A[0])\n")
    assert "thread_extent must be a constant integer" in _error(
        "B[tx] = T.cast(T.shuffle_elect(tx), 'int32')\n")


@pytest.mark.gpu
def test_votes_match_numpy():
    import torch

    kernel = tilecute.compile(_votes())
    b = torch.zeros((96, 11), dtype=torch.int64, device="cuda")
    kernel(b)
    np.testing.assert_array_equal(b.cpu().numpy(), _expected())
