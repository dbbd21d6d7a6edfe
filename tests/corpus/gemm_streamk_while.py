"""Stream-K GEMM written as TileLang's example writes it: each program walks its share of
the (tile, k-iteration) space with a ``while`` loop over a local cursor, finishing owned
tiles with a store and shared ones with atomic adds."""

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
    full = total_iters // num_sms
    partial = total_iters % num_sms

    @T.prim_func
    def gemm_streamk_while(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype),
                           C: T.Tensor((M, N), accum_dtype)):
        with T.Kernel(num_sms, threads=128) as pid:
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            start_iter = T.alloc_fragment((1,), T.int32, "local")
            end_iter = T.alloc_fragment((1,), T.int32, "local")

            start_iter[0] = pid * full + T.min(pid, partial)
            last_iter = (pid + 1) * full + T.min(pid + 1, partial)
            while start_iter[0] < last_iter:
                end_iter[0] = T.min(start_iter[0] + (iters_per_tile - start_iter[0] % iters_per_tile),
                                    last_iter)
                tile_id = start_iter[0] // iters_per_tile
                remain = start_iter[0] % iters_per_tile
                pid_m = tile_id // num_block_n
                pid_n = tile_id % num_block_n
                T.clear(C_local)
                for k in T.Pipelined(end_iter[0] - start_iter[0], num_stages=2):
                    T.copy(A[pid_m * block_M, (k + remain) * block_K], A_shared)
                    T.copy(B[pid_n * block_N, (k + remain) * block_K], B_shared)
                    T.gemm(A_shared, B_shared, C_local, transpose_B=True)
                if remain == 0 and end_iter[0] % iters_per_tile == 0:
                    T.copy(C_local, C[pid_m * block_M, pid_n * block_N])
                else:
                    for i, j in T.Parallel(block_M, block_N):
                        T.atomic_add(C[pid_m * block_M + i, pid_n * block_N + j], C_local[i, j])
                start_iter[0] = end_iter[0]

    return gemm_streamk_while


from .gemm_streamk import make_args, reference  # noqa: E402,F401  (the same problem)
