"""Stream-K GEMM: a fixed number of programs (one per SM) split the flattened
(tile, k-iteration) space evenly; a program finishes the tiles it owns whole with a plain
store and adds the ones it shares with a neighbour atomically.  The per-program walk is a
bounded T.serial loop over the tiles it can touch (see gemm_streamk_while for TileLang's
``while`` form)."""

import tilecute.language as T

OUTPUTS = (2,)
ATOL, RTOL = 1e-2, 1e-2
SM80 = True
MISSING = None


def program(M=256, N=512, K=512, block_M=128, block_N=128, block_K=32, num_sms=6,
            dtype="float16", accum_dtype="float"):
    num_block_n = T.ceildiv(N, block_N)
    iters_per_tile = T.ceildiv(K, block_K)
    total_iters = T.ceildiv(M, block_M) * num_block_n * iters_per_tile
    iters_per_program = T.ceildiv(total_iters, num_sms)
    tiles_per_program = T.ceildiv(iters_per_program, iters_per_tile) + 1

    @T.prim_func
    def gemm_streamk(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype),
                     C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(num_sms, threads=128) as pid:
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            start_iter = pid * iters_per_program
            end_iter = T.min(start_iter + iters_per_program, total_iters)
            for t in T.serial(tiles_per_program):
                tile_id = start_iter // iters_per_tile + t
                tile_begin = T.max(start_iter, tile_id * iters_per_tile)
                tile_end = T.min(end_iter, (tile_id + 1) * iters_per_tile)
                if tile_begin < tile_end:
                    pid_m = tile_id // num_block_n
                    pid_n = tile_id % num_block_n
                    k_first = tile_begin - tile_id * iters_per_tile
                    T.clear(C_local)
                    for k in T.Pipelined(tile_end - tile_begin, num_stages=2):
                        T.copy(A[pid_m * block_M, (k_first + k) * block_K], A_shared)
                        T.copy(B[pid_n * block_N, (k_first + k) * block_K], B_shared)
                        T.gemm(A_shared, B_shared, C_local, transpose_B=True)
                    if k_first == 0 and tile_end - tile_begin == iters_per_tile:
                        T.copy(C_local, C[pid_m * block_M, pid_n * block_N])
                    else:
                        for i, j in T.Parallel(block_M, block_N):
                            T.atomic_add(C[pid_m * block_M + i, pid_n * block_N + j], C_local[i, j])

    return gemm_streamk


def make_args(device):
    import torch

    a = torch.rand(256, 512, device=device, dtype=torch.float16) * 2 - 1
    b = torch.rand(512, 512, device=device, dtype=torch.float16) * 2 - 1
    return [a, b, torch.zeros(256, 512, device=device)]


def reference(a, b, c):
    return (a.float() @ b.float().T,)
