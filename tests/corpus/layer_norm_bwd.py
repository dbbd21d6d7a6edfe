"""LayerNorm backward from the saved statistics: per row x_hat = (x - mean) * rstd,
dx = rstd * (dy * gamma - mean(dy * gamma) - x_hat * mean(dy * gamma * x_hat)); dgamma and
dbeta accumulate over a block's rows in fragments and go out with relaxed atomic adds
(TileLang's layernorm backward, one row at a time through (1, D) tiles)."""

import tilecute.language as T

OUTPUTS = (5, 6, 7)
ATOL, RTOL = (3e-2, 5e-3, 5e-3), (1e-2, 1e-3, 1e-3)
SM80 = True
MISSING = None


def program(N=128, D=512, blk_m=16, threads=128, in_dtype="bfloat16"):
    accum_dtype = "float"

    @T.prim_func
    def layer_norm_bwd(DY: T.Tensor((N, D), in_dtype), X: T.Tensor((N, D), in_dtype),
                       gamma: T.Tensor((D,), in_dtype), Mean: T.Tensor((N,), accum_dtype),
                       Rstd: T.Tensor((N,), accum_dtype), DX: T.Tensor((N, D), in_dtype),
                       DGamma: T.Tensor((D,), accum_dtype), DBeta: T.Tensor((D,), accum_dtype)):
        with T.Kernel(T.ceildiv(N, blk_m), threads=threads) as bx:
            DY_smem = T.alloc_shared((1, D), in_dtype)
            X_smem = T.alloc_shared((1, D), in_dtype)
            G_smem = T.alloc_shared((D,), in_dtype)
            DX_smem = T.alloc_shared((1, D), in_dtype)
            x_hat = T.alloc_fragment((1, D), accum_dtype)
            dx_hat = T.alloc_fragment((1, D), accum_dtype)
            dx_hat_x_hat = T.alloc_fragment((1, D), accum_dtype)
            sum_dx_hat = T.alloc_fragment((1,), accum_dtype)
            sum_dx_hat_x_hat = T.alloc_fragment((1,), accum_dtype)
            dgamma_acc = T.alloc_fragment((D,), accum_dtype)
            dbeta_acc = T.alloc_fragment((D,), accum_dtype)
            T.copy(gamma, G_smem)
            T.clear(dgamma_acc)
            T.clear(dbeta_acc)
            inv_D = T.float32(1.0 / D)
            for k in T.serial(blk_m):
                row = bx * blk_m + k
                T.copy(DY[row, 0], DY_smem)
                T.copy(X[row, 0], X_smem)
                m_v = Mean[row]
                r_v = Rstd[row]
                for i, j in T.Parallel(1, D):
                    x_hat[i, j] = (T.Cast(accum_dtype, X_smem[i, j]) - m_v) * r_v
                    dx_hat[i, j] = T.Cast(accum_dtype, DY_smem[i, j]) * T.Cast(accum_dtype, G_smem[j])
                    dx_hat_x_hat[i, j] = dx_hat[i, j] * x_hat[i, j]
                T.reduce_sum(dx_hat, sum_dx_hat, dim=1)
                T.reduce_sum(dx_hat_x_hat, sum_dx_hat_x_hat, dim=1)
                for i, j in T.Parallel(1, D):
                    c1 = sum_dx_hat_x_hat[0] * inv_D
                    c2 = sum_dx_hat[0] * inv_D
                    DX_smem[i, j] = T.Cast(in_dtype, r_v * (dx_hat[i, j] - c2 - x_hat[i, j] * c1))
                    dy_v = T.Cast(accum_dtype, DY_smem[i, j])
                    dgamma_acc[j] += dy_v * x_hat[i, j]
                    dbeta_acc[j] += dy_v
                T.copy(DX_smem, DX[row, 0])
            for j in T.Parallel(D):
                T.atomic_add(DGamma[j], dgamma_acc[j], memory_order="relaxed")
                T.atomic_add(DBeta[j], dbeta_acc[j], memory_order="relaxed")

    return layer_norm_bwd


def make_args(device):
    import torch

    dy = torch.randn(128, 512, device=device, dtype=torch.bfloat16)
    x = torch.randn(128, 512, device=device, dtype=torch.bfloat16)
    g = torch.randn(512, device=device, dtype=torch.bfloat16)
    xf = x.float()
    mean = xf.mean(-1)
    rstd = torch.rsqrt(xf.var(-1, unbiased=False) + 1e-5)
    return [dy, x, g, mean, rstd, torch.empty_like(x), torch.zeros(512, device=device),
            torch.zeros(512, device=device)]


def reference(dy, x, g, mean, rstd, dx, dg, db):
    import torch

    xf = x.float().requires_grad_()
    gf = g.float().requires_grad_()
    bf = torch.zeros(512, device=x.device, requires_grad=True)
    y = torch.nn.functional.layer_norm(xf, (512,), gf, bf, 1e-5)
    y.backward(dy.float())
    return (xf.grad.bfloat16(), gf.grad, bf.grad)
