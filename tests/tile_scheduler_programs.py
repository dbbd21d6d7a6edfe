"""Persistent programs over T.PersistentTileScheduler, written as TileLang writes them
(the CPU tests build their cubins; the GPU tests run them against torch)."""

import tilecute.language as T


def tile_walk(m_tiles: int, n_tiles: int, workers: int, swizzle: int = 1,
              column_major: bool = True):
    """Each worker records, for every tile it visits, the order it took it in (its
    linear index) and its iteration count: the walk itself, readable from the host."""

    @T.prim_func
    def walk(Order: T.Tensor((m_tiles, n_tiles), T.int32),
             Iter: T.Tensor((m_tiles, n_tiles), T.int32),
             Worker: T.Tensor((m_tiles, n_tiles), T.int32)):
        with T.Kernel(workers, threads=32) as (block_id,):
            tx = T.get_thread_binding()
            sched = T.PersistentTileScheduler(m_tiles, n_tiles, num_workers=workers,
                                              swizzle_size=swizzle, column_major=column_major,
                                              name="sched")
            sched.init(block_id)
            while sched.valid():
                if tx == 0:
                    Order[sched.m_idx, sched.n_idx] = sched.linear_idx
                    Iter[sched.m_idx, sched.n_idx] = sched.current_iter
                    Worker[sched.m_idx, sched.n_idx] = block_id
                sched.next_tile()

    return walk


def persistent_scale(M: int, N: int, block_M: int = 32, block_N: int = 64, workers: int = 5,
                     swizzle: int = 2):
    """B = A * 2 + 1, tile by tile, each of `workers` blocks walking its tiles (the grid's
    last row and column of tiles ragged)."""
    m_blocks, n_blocks = T.ceildiv(M, block_M), T.ceildiv(N, block_N)

    @T.prim_func
    def scale(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(workers, threads=128) as (block_id,):
            sched = T.PersistentTileScheduler(m_blocks, n_blocks, num_workers=workers,
                                              swizzle_size=swizzle)
            sched.init(block_id)
            while sched.valid():
                bx, by = sched.m_idx, sched.n_idx
                for i, j in T.Parallel(block_M, block_N):
                    r, c = bx * block_M + i, by * block_N + j
                    if r < M and c < N:
                        B[r, c] = A[r, c] * 2.0 + 1.0
                sched.next_tile()

    return scale


def persistent_gemm(M: int, N: int, K: int, block_M: int = 128, block_N: int = 128,
                    block_K: int = 32, workers: int = 7, swizzle: int = 4,
                    dtype=T.float16, accum_dtype=T.float32):
    """C = A @ B, a persistent GEMM: one block per worker, the scheduler's tiles in turn."""
    m_blocks, n_blocks = T.ceildiv(M, block_M), T.ceildiv(N, block_N)

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(workers, threads=128) as (block_id,):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            sched = T.PersistentTileScheduler(m_blocks, n_blocks, num_workers=workers,
                                              swizzle_size=swizzle)
            sched.init(block_id)
            while sched.valid():
                bx, by = sched.m_idx, sched.n_idx
                T.clear(C_local)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                    T.copy(A[bx * block_M, k * block_K], A_shared)
                    T.copy(B[k * block_K, by * block_N], B_shared)
                    T.gemm(A_shared, B_shared, C_local)
                T.copy(C_local, C[bx * block_M, by * block_N])
                sched.next_tile()

    return gemm


def stateless_waves(M: int, N: int, block_M: int = 32, block_N: int = 32, workers: int = 4,
                    swizzle: int = 3):
    """The stateless form: a `for w` loop over waves owns the clock, the scheduler only
    decodes tiles; B[r, c] = A[r, c] + the wave that wrote it."""
    m_blocks, n_blocks = T.ceildiv(M, block_M), T.ceildiv(N, block_N)
    waves = T.ceildiv(m_blocks * n_blocks, workers)

    @T.prim_func
    def by_waves(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.Kernel(workers, threads=128) as (worker_id,):
            sched = T.PersistentTileScheduler(m_blocks, n_blocks, num_workers=workers,
                                              swizzle_size=swizzle, column_major=False,
                                              stateful=False)
            for w in T.serial(waves):
                bx, by = sched.coord(workers * w + worker_id)
                if bx * block_M < M and by * block_N < N:
                    for i, j in T.Parallel(block_M, block_N):
                        r, c = bx * block_M + i, by * block_N + j
                        if r < M and c < N:
                            B[r, c] = A[r, c] + w
    return by_waves


def clustered_add(M: int = 256, N: int = 320, block_M: int = 64, block_N: int = 64,
                  clusters: int = 3):
    """B = A + 1 by 2-block clusters along M: the scheduler walks cluster rows, each block
    adds its rank in the cluster to find its own row of tiles (TileLang's SM100 idiom)."""
    m_blocks, n_blocks = T.ceildiv(M, block_M), T.ceildiv(N, block_N)

    @T.prim_func
    def add_one(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32)):
        with T.ClusterKernel(clusters * 2, threads=128, cluster_dims=2) as (block_id):
            rank = T.block_rank_in_cluster()
            sched = T.PersistentTileScheduler(m_blocks, n_blocks, num_workers=clusters,
                                              swizzle_size=2, cluster_size=2)
            sched.init(block_id // 2)
            while sched.valid():
                bx, by = sched.m_idx * 2 + rank, sched.n_idx
                for i, j in T.Parallel(block_M, block_N):
                    if bx * block_M + i < M and by * block_N + j < N:
                        B[bx * block_M + i, by * block_N + j] = A[bx * block_M + i, by * block_N + j] + 1.0
                sched.next_tile()

    return add_one
