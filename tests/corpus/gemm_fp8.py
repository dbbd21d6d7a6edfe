"""FP8 GEMM: C = A @ B^T with float8_e4m3 operands (K-major, as tensor cores take fp8),
fp32 accumulation and fp16 output (TileLang's fp8 example).  fp8 tensor-core MMAs need
sm_89+; tilecute runs them as wgmma on sm_90a."""

import tilecute.language as T

OUTPUTS = (2,)
ATOL, RTOL = 5e-2, 1e-2
SM80 = False
MISSING = None
IN_DTYPE = "float8_e4m3"


def program(M=256, N=256, K=512, block_M=128, block_N=128, block_K=64, dtype=IN_DTYPE,
            out_dtype="float16", accum_dtype="float32"):
    @T.prim_func
    def gemm_fp8(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_fp8


def make_args(device, torch_dtype="float8_e4m3fn"):
    import torch

    dt = getattr(torch, torch_dtype)
    a = torch.randn(256, 512, device=device, dtype=torch.float16).to(dt)
    b = torch.randn(256, 512, device=device, dtype=torch.float16).to(dt)
    return [a, b, torch.empty(256, 256, device=device, dtype=torch.float16)]


def reference(a, b, c):
    return ((a.float() @ b.float().T).half(),)
