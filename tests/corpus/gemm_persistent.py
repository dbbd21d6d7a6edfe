"""Persistent GEMM with the tile loop written out: one block per SM walks waves of
output tiles in groups of ``group_size`` columns of tiles, skipping the ids past the
grid (TileLang's persistent example, ``use_persistent_primitive=False``)."""

import tilecute.language as T

OUTPUTS = (2,)
ATOL, RTOL = 1e-2, 1e-2
SM80 = True
MISSING = None


def program(M=384, N=512, K=256, block_M=128, block_N=128, block_K=32, num_stages=3,
            sm_num=5, group_size=2, dtype="float16", accum_dtype="float"):
    m_blocks = T.ceildiv(M, block_M)
    n_blocks = T.ceildiv(N, block_N)
    waves = T.ceildiv(m_blocks * n_blocks, sm_num)

    @T.prim_func
    def gemm_persistent(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
                        C: T.Tensor((M, N), dtype)):
        with T.Kernel(sm_num, threads=128) as block_id:
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            C_shared = T.alloc_shared((block_M, block_N), dtype)
            for w in T.serial(waves):
                tile_id = sm_num * w + block_id
                bx = (tile_id // group_size) % m_blocks
                by = (tile_id % group_size) + (tile_id // group_size) // m_blocks * group_size
                if bx * block_M < M and by * block_N < N:
                    T.clear(C_local)
                    for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                        T.copy(A[bx * block_M, k * block_K], A_shared)
                        T.copy(B[k * block_K, by * block_N], B_shared)
                        T.gemm(A_shared, B_shared, C_local)
                    T.copy(C_local, C_shared)
                    T.copy(C_shared, C[bx * block_M, by * block_N])

    return gemm_persistent


def make_args(device):
    import torch

    a = torch.randn(384, 256, device=device, dtype=torch.float16)
    b = torch.randn(256, 512, device=device, dtype=torch.float16)
    return [a, b, torch.empty(384, 512, device=device, dtype=torch.float16)]


def reference(a, b, c):
    return ((a.float() @ b.float()).half(),)
