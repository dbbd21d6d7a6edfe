"""A fragment read through a reshape written by hand: an ``(I, G, C)`` fragment filled by a
``T.Parallel(I, G, C)`` nest and read as ``x[i, j // C, j % C]`` in a ``T.Parallel(I, G * C)``
nest (TileLang infers the second loop's layout from the fragment's; its element's row-major
flat index is the iteration's).  Layout inference takes the adjacent ``[e // C, e % C]`` pair
as one index ``e`` over both dims, so both nests walk the fragment blocked, each iteration in
its own register.  Before, the read was taken as across threads and ``x`` replicated: moved
to shared memory with barriers (as here for an index that is not the row-major order), or,
where the nest filling it also walks a distributed fragment (a GroupNorm backward's
``t[i, g, c] = dy[i, g, c] * gamma``), refused."""

import re

import pytest
import torch

import tilecute
import tilecute.language as T


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def regroup(M=64, G=4, C=16, block_M=8, threads=128, mod=None):
    """Y[r, j] = X[r, j] (1 + S[r, j // C]) + X[r, j], the first term staged in a (block_M, G, C)
    fragment and read back through [i, j // C, j % C] (``mod``: the divisor of the second
    index, C unless a test says otherwise)."""
    mod = mod or C

    @T.prim_func
    def main(X: T.Tensor((M, G * C), "float32"), S: T.Tensor((M, G), "float32"), Y: T.Tensor((M, G * C), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, G, C), "float32")
            y = T.alloc_fragment((block_M, G * C), "float32")
            for i, g, c in T.Parallel(block_M, G, C):
                x[i, g, c] = X[bx * block_M + i, g * C + c] * (1.0 + S[bx * block_M + i, g])
            for i, j in T.Parallel(block_M, G * C):
                y[i, j] = x[i, j // C, j % mod] + X[bx * block_M + i, j]
            T.copy(y, Y[bx * block_M, 0])

    return main


def _body(**kw):
    src = tilecute.compile(regroup(**kw), target="sm_90a").get_kernel_source()
    return src.split("\n@cute.kernel\n", 1)[1].split("\n@cute.jit", 1)[0]


def test_split_dims_read_stays_in_registers():
    body = _body()
    assert "x = cute.make_rmem_tensor((4,), cutlass.Float32)  # blocked" in body
    assert "replicated" not in body and "sync_threads" not in body
    # the second nest reads the register its own iteration wrote
    assert re.search(r"y\[(\w+)\] = x\[\1\] \+ ", body)


def test_split_dims_build(tmp_path):
    assert tilecute.build_cubin(regroup(), "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_split_dims_of_another_extent_are_not_merged():
    # j % 8 over a dim of 16: not the fragment's row-major order, so the read is across
    # threads: x is shared (every thread reads it after a barrier)
    body = _body(mod=8)
    assert "x = cute.make_rmem_tensor" not in body and "cute.arch.sync_threads()" in body
    assert "(j + tc_lane6) % 8" in body


@pytest.mark.gpu
def test_split_dims_match_torch():
    X = torch.randn(64, 64, device="cuda")
    S = torch.randn(64, 4, device="cuda")
    Y = torch.empty_like(X)
    tilecute.compile(regroup())(X, S, Y)
    want = X * (1 + S.repeat_interleave(16, dim=1)) + X
    torch.testing.assert_close(Y, want)
