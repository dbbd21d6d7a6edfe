"""Chunked causal linear attention forward: per (value block, key block, batch*head) the
running state h = sum k^T v carries across chunks, each chunk's output is the masked
intra-chunk term (q k^T * causal) v plus q h, added into O atomically because key blocks
split the sum; the final state is written out (TileLang's fused-chunk linear attention)."""

import tilecute.language as T

OUTPUTS = (3, 4)
ATOL, RTOL = (5e-2, 5e-2), (1e-2, 1e-2)
SM80 = True
MISSING = None


def program(B=1, S=256, H=2, DK=128, DV=128, dtype="float16"):
    accum_dtype = "float32"
    scale = DK ** -0.5
    chunk_size = 64
    BK = BV = 64
    NK, NV, NT = DK // BK, DV // BV, S // chunk_size

    @T.prim_func
    def linear_attention_fwd(Q: T.Tensor((B, S, H, DK), dtype), K: T.Tensor((B, S, H, DK), dtype),
                             V: T.Tensor((B, S, H, DV), dtype), O: T.Tensor((B, S, H, DV), accum_dtype),
                             final_state: T.Tensor((B, H, DK, DV), accum_dtype)):
        with T.Kernel(NV, NK, B * H) as (i_v, i_k, i_bh):
            i_b = i_bh // H
            i_h = i_bh % H
            q = T.alloc_shared((chunk_size, BK), dtype)
            k = T.alloc_shared((chunk_size, BK), dtype)
            v = T.alloc_shared((chunk_size, BV), dtype)
            h = T.alloc_fragment((BK, BV), accum_dtype)
            h_shared = T.alloc_shared((BK, BV), dtype)
            s = T.alloc_fragment((chunk_size, chunk_size), accum_dtype)
            s_shared = T.alloc_shared((chunk_size, chunk_size), dtype)
            o = T.alloc_fragment((chunk_size, BV), accum_dtype)
            o_shared = T.alloc_shared((chunk_size, BV), accum_dtype)
            T.clear(h)
            for i in T.Pipelined(0, NT):
                for row, col in T.Parallel(chunk_size, BK):
                    q[row, col] = Q[i_b, i * chunk_size + row, i_h, i_k * BK + col] * scale
                T.copy(K[i_b, i * chunk_size:(i + 1) * chunk_size, i_h, i_k * BK:(i_k + 1) * BK], k)
                T.copy(V[i_b, i * chunk_size:(i + 1) * chunk_size, i_h, i_v * BV:(i_v + 1) * BV], v)
                T.gemm(q, k, s, clear_accum=True, transpose_B=True)
                for row, col in T.Parallel(chunk_size, chunk_size):
                    s_shared[row, col] = T.if_then_else(row >= col, s[row, col], 0)
                T.gemm(s_shared, v, o, clear_accum=True)
                T.copy(h, h_shared)
                T.gemm(k, v, h, transpose_A=True)
                T.gemm(q, h_shared, o)
                T.copy(o, o_shared)
                T.atomic_add(O[i_b, i * chunk_size:(i + 1) * chunk_size, i_h, i_v * BV:(i_v + 1) * BV], o_shared)
            T.copy(h, final_state[i_b, i_h, i_k * BK:(i_k + 1) * BK, i_v * BV:(i_v + 1) * BV])

    return linear_attention_fwd


def make_args(device):
    import torch

    q, k, v = (torch.randn(1, 256, 2, 128, device=device, dtype=torch.float16) * 0.5 for _ in range(3))
    return [q, k, v, torch.zeros(1, 256, 2, 128, device=device), torch.empty(1, 2, 128, 128, device=device)]


def reference(q, k, v, o, state):
    import torch

    qf, kf, vf = (x.float().transpose(1, 2) for x in (q, k, v))  # (B, H, S, D)
    qf = qf * 128 ** -0.5
    scores = (qf @ kf.transpose(-1, -2)).tril()
    out = scores @ vf
    return (out.transpose(1, 2), kf.transpose(-1, -2) @ vf)
