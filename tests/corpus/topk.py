"""Top-k gating over rows of expert logits: k rounds of (row max, the index that holds it,
mask it out), each a T.reduce_max over a fragment (TileLang's top-k example)."""

import tilecute.language as T

OUTPUTS = (1, 2)
ATOL, RTOL = 0, 0
SM80 = True
MISSING = None


def program(M=320, N=128, topk=6, blk_m=64, threads=128):
    dtype = "float32"

    @T.prim_func
    def topk_gating(logits: T.Tensor((M, N), dtype), topk_gates: T.Tensor((M, topk), dtype),
                    topk_indices: T.Tensor((M, topk), "int32")):
        with T.Kernel(T.ceildiv(M, blk_m), threads=threads) as bx:
            logits_frag = T.alloc_fragment((blk_m, N), dtype=dtype)
            max_val = T.alloc_fragment((blk_m,), dtype=dtype)
            expand_max_idx = T.alloc_fragment((blk_m, N), "int32")
            max_idx = T.alloc_fragment((blk_m,), "int32")
            T.copy(logits[bx * blk_m, 0], logits_frag)
            for k in T.serial(topk):
                T.fill(expand_max_idx, -1)
                T.reduce_max(logits_frag, max_val, dim=1, clear=True)
                for i, j in T.Parallel(blk_m, N):
                    expand_max_idx[i, j] = T.if_then_else(max_val[i] == logits_frag[i, j], j,
                                                          expand_max_idx[i, j])
                T.reduce_max(expand_max_idx, max_idx, dim=1, clear=True)
                for i, j in T.Parallel(blk_m, N):
                    logits_frag[i, j] = T.if_then_else(max_val[i] == logits_frag[i, j], -10000.0,
                                                       logits_frag[i, j])
                for i in T.Parallel(blk_m):
                    topk_gates[bx * blk_m + i, k] = max_val[i]
                    topk_indices[bx * blk_m + i, k] = max_idx[i]

    return topk_gating


def make_args(device):
    import torch

    logits = torch.rand(320, 128, device=device)
    return [logits, torch.empty(320, 6, device=device), torch.empty(320, 6, device=device, dtype=torch.int32)]


def reference(logits, gates, indices):
    import torch

    values, idx = logits.topk(6, dim=1)
    return (values, idx.to(torch.int32))
