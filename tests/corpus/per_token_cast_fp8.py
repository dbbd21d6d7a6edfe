"""Per-token, per-group quantization to float8_e4m3: each (row block, 128-column group)
tile is scaled by its absolute maximum / 448 (TileLang's cast example, DeepGEMM's input
format)."""

import tilecute.language as T

OUTPUTS = (1, 2)
# one e4m3 step is 1/8 relative; the scales are exact up to fp32 rounding
ATOL, RTOL = (1e-2, 1e-6), (0.13, 1e-5)
SM80 = False  # fp8 conversions (cvt ... e4m3) need sm_89+
MISSING = None

GROUP = 128


def program(M=256, N=512, blk_m=32, dtype="float32"):
    fp8_max = 448.0

    @T.prim_func
    def per_token_cast_fp8(X: T.Tensor((M, N), dtype), X_fp8: T.Tensor((M, N), "float8_e4m3fn"),
                           X_scale: T.Tensor((M, T.ceildiv(N, GROUP)), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), T.ceildiv(N, GROUP), threads=128) as (bx, by):
            y = T.alloc_fragment((blk_m, GROUP), dtype)
            amax = T.alloc_fragment((blk_m,), dtype)
            scale = T.alloc_fragment((blk_m,), dtype)
            q = T.alloc_fragment((blk_m, GROUP), "float8_e4m3fn")
            T.copy(X[bx * blk_m:(bx + 1) * blk_m, by * GROUP:(by + 1) * GROUP], y)
            T.reduce_absmax(y, amax, dim=1)
            for i in T.Parallel(blk_m):
                scale[i] = T.max(amax[i], 1e-4) / fp8_max
            for i, j in T.Parallel(blk_m, GROUP):
                q[i, j] = T.clamp(y[i, j] / scale[i], -fp8_max, fp8_max)
            for i in T.Parallel(blk_m):
                X_scale[bx * blk_m + i, by] = scale[i]
            T.copy(q, X_fp8[bx * blk_m:(bx + 1) * blk_m, by * GROUP:(by + 1) * GROUP])

    return per_token_cast_fp8


def make_args(device):
    import torch

    x = torch.randn(256, 512, device=device) * 3
    return [x, torch.empty(256, 512, device=device, dtype=torch.float8_e4m3fn),
            torch.empty(256, 4, device=device)]


def reference(x, q, s):
    import torch

    g = x.view(256, 4, GROUP)
    scale = g.abs().amax(dim=-1).clamp(min=1e-4) / 448.0
    q_ref = (g / scale[..., None]).clamp(-448, 448).to(torch.float8_e4m3fn).view(256, 512)
    return (q_ref, scale)
