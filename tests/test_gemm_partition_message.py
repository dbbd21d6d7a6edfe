"""A T.gemm whose warps cannot cover the tile is refused with TileLang's diagnostic
("No valid warp partition", its gemm.cc) besides tilecute's reason (issue 17)."""

import pytest

import tilecute
import tilecute.language as T


def _gemm(M, N, K, threads, policy, options=None):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=threads):
            a_s = T.alloc_shared((M, K), "float16")
            b_s = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.clear(acc)
            T.copy(A, a_s)
            T.copy(B, b_s)
            T.gemm(a_s, b_s, acc, policy=policy)
            T.copy(acc, C)
    return main


@pytest.mark.parametrize("shape, options, detail", [
    ((64, 40, 32, 384, T.GemmWarpPolicy.FullCol), None,
     r"no arrangement of 3 warpgroup\(s\) tiles 64 x 40 with policy FullCol"),
    # M = 16 on two warpgroups: TileLang (and tilecute) fall back to mma.sync, whose 8 warps
    # cannot tile 16 x 8 either: the message says both
    ((16, 8, 32, 256, T.GemmWarpPolicy.Square), None,
     r"no arrangement of 2 warpgroup\(s\) tiles 16 x 8 .* 64-row steps; nor does any "
     r"arrangement of 8 warps on mma.sync tile it in 16 x 8 steps"),
    ((48, 40, 32, 128, T.GemmWarpPolicy.FullCol), {"disable_wgmma": True},
     r"no arrangement of 4 warps tiles 48 x 40 in 16 x 8 steps with policy FullCol"),
])
def test_uncoverable_partitions_use_tilelangs_words(shape, options, detail, tmp_path):
    with pytest.raises(ValueError, match=r"No valid warp partition .*" + detail):
        tilecute.build_cubin(_gemm(*shape), "sm_90a", out_dir=str(tmp_path), options=options) \
            if options else tilecute.build_cubin(_gemm(*shape), "sm_90a", out_dir=str(tmp_path))
