"""2-D convolution as an implicit GEMM: NHWC input, (KH*KW*C, F) filter, each K step
gathers its (block_M, block_K) im2col tile into shared memory with a T.Parallel loop
(zero padding through T.if_then_else), then multiplies (TileLang's convolution
example, with the im2col gather written out)."""

import tilecute.language as T

OUTPUTS = (2,)
ATOL, RTOL = 5e-2, 1e-2
SM80 = True
MISSING = None

CONFIG = dict(N=2, C=64, H=16, W=16, F=128, K=3, S=1, D=1, P=1)


def program(N=2, C=64, H=16, W=16, F=128, K=3, S=1, D=1, P=1, block_M=64, block_N=128,
            block_K=32, num_stages=2, threads=128, dtype="float16", accum_dtype="float"):
    KH, KW = K, K
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1

    @T.prim_func
    def conv2d_im2col(data: T.Tensor((N, H, W, C), dtype), kernel: T.Tensor((KH * KW * C, F), dtype),
                      out: T.Tensor((N * OH * OW, F), dtype)):
        with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(N * OH * OW, block_M), threads=threads) as (bx, by):
            data_shared = T.alloc_shared((block_M, block_K), dtype)
            kernel_shared = T.alloc_shared((block_K, block_N), dtype)
            out_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            out_shared = T.alloc_shared((block_M, block_N), dtype)
            T.clear(out_local)
            for k_iter in T.Pipelined(T.ceildiv(KH * KW * C, block_K), num_stages=num_stages):
                for i, j in T.Parallel(block_M, block_K):
                    k = k_iter * block_K + j
                    m = by * block_M + i
                    access_h = m % (OH * OW) // OW * S + k // (KW * C) * D - P
                    access_w = m % OW * S + k // C % KW * D - P
                    in_bound = (access_h >= 0) and (access_w >= 0) and (access_h < H) and (access_w < W)
                    data_shared[i, j] = T.if_then_else(in_bound, data[m // (OH * OW), access_h, access_w, k % C], 0)
                T.copy(kernel[k_iter * block_K, bx * block_N], kernel_shared)
                T.gemm(data_shared, kernel_shared, out_local)
            T.copy(out_local, out_shared)
            T.copy(out_shared, out[by * block_M, bx * block_N])

    return conv2d_im2col


def make_args(device):
    import torch

    c = CONFIG
    a = torch.randn(c["N"], c["H"], c["W"], c["C"], device=device, dtype=torch.float16)
    b = torch.randn(c["K"], c["K"], c["C"], c["F"], device=device, dtype=torch.float16)
    return [a, b.reshape(-1, c["F"]), torch.empty(c["N"] * c["H"] * c["W"], c["F"], device=device,
                                                   dtype=torch.float16)]


def reference(a, b, out):
    import torch

    c = CONFIG
    w = b.reshape(c["K"], c["K"], c["C"], c["F"]).permute(3, 2, 0, 1).float()
    y = torch.nn.functional.conv2d(a.permute(0, 3, 1, 2).float(), w, stride=c["S"], padding=c["P"],
                                   dilation=c["D"])
    return (y.permute(0, 2, 3, 1).reshape(-1, c["F"]).half(),)
