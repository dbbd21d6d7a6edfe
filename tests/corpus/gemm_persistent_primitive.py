"""Persistent GEMM with TileLang's primitive: ``for bx, by in T.Persistent([m_blocks,
n_blocks], sm_num, block_id)`` walks this block's tiles wave by wave, in groups of 8
along the last dim."""

import tilecute.language as T

OUTPUTS = (2,)
ATOL, RTOL = 1e-2, 1e-2
SM80 = True
MISSING = None


def program(M=384, N=640, K=256, block_M=128, block_N=128, block_K=64, num_stages=2,
            sm_num=4, dtype="float16", accum_dtype="float"):
    @T.prim_func
    def gemm_persistent_primitive(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype),
                                  C: T.Tensor((M, N), dtype)):
        with T.Kernel(sm_num, threads=128) as block_id:
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            for bx, by in T.Persistent([T.ceildiv(M, block_M), T.ceildiv(N, block_N)], sm_num, block_id):
                T.clear(C_local)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                    T.copy(A[bx * block_M, k * block_K], A_shared)
                    T.copy(B[k * block_K, by * block_N], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
                T.copy(C_local, C[bx * block_M, by * block_N])

    return gemm_persistent_primitive


def make_args(device):
    import torch

    a = torch.randn(384, 256, device=device, dtype=torch.float16)
    b = torch.randn(256, 640, device=device, dtype=torch.float16)
    return [a, b, torch.empty(384, 640, device=device, dtype=torch.float16)]


def reference(a, b, c):
    return ((a.float() @ b.float()).half(),)
