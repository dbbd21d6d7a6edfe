"""2-D convolution with TileLang's own im2col tile op: ``T.im2col(data, data_shared, by,
k_iter, KH, S, D, P)`` gathers each (block_M, block_K) input tile (zero padding), the
filter comes as its (KH * KW * C, F) matrix and the output as (N * OH * OW, F)
(TileLang's convolution example)."""

import tilecute.language as T

OUTPUTS = (2,)
ATOL, RTOL = 5e-2, 1e-2
SM80 = True
MISSING = None

from .conv2d_im2col import CONFIG  # noqa: E402


def program(N=2, C=64, H=16, W=16, F=128, K=3, S=1, D=1, P=1, block_M=64, block_N=128,
            block_K=32, num_stages=2, threads=128, dtype="float16", accum_dtype="float"):
    KH, KW = K, K
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1

    @T.prim_func
    def conv2d_tl_im2col(data: T.Tensor((N, H, W, C), dtype), kernel: T.Tensor((KH * KW * C, F), dtype),
                         out: T.Tensor((N * OH * OW, F), dtype)):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(N * OH * OW, block_M), threads=threads) as (bx, by):
            data_shared = T.alloc_shared((block_M, block_K), dtype)
            kernel_shared = T.alloc_shared((block_K, block_N), dtype)
            out_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(out_local)
            for k_iter in T.Pipelined(T.ceildiv(KH * KW * C, block_K), num_stages=num_stages):
                T.im2col(data, data_shared, by, k_iter, KH, S, D, P)
                T.copy(kernel[k_iter * block_K, bx * block_N], kernel_shared)
                T.gemm(data_shared, kernel_shared, out_local)
            T.copy(out_local, out[by * block_M, bx * block_N])

    return conv2d_tl_im2col


from .conv2d_im2col import make_args, reference  # noqa: E402,F401  (the same problem)
