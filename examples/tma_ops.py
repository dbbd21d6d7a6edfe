"""TMA examples (sm_90a): tile copies through the Tensor Memory Accelerator, with the
descriptors encoded by the launcher on the host for every launch.

    tma_copy        B = A tile by tile: T.copy global -> shared -> global, both TMA
    pipelined_copy  B = A + 1, each block walking its column strip with T.Pipelined:
                    TMA loads run num_stages - 1 steps ahead of the compute
    explicit_copy   the same as tma_copy in TileLang's explicit form: T.alloc_barrier,
                    T.tma_copy, T.mbarrier_wait_parity

Run on an H100: ``python3 examples/tma_ops.py`` (checks against torch).
"""

import tilecute.language as T


def tma_copy(box=(64, 64), dtype="float16", threads=128):
    """B = A for a tensor of rank len(box) (1..5): each block moves one box with a TMA
    load into shared memory and a TMA store back out.  Extents are symbolic, all but the
    first multiples of 16 bytes (TMA's strides need it); boxes at the edges read zeros
    out of bounds and store only the in-bounds part.  Block ``b`` of a 1-D grid takes
    box ``b`` in row-major order of the box grid (the source is written per rank)."""
    rank = len(box)
    esize = {"float8_e4m3": 1, "float8_e5m2": 1, "int8": 1, "uint8": 1, "float16": 2,
             "bfloat16": 2, "float32": 4}[dtype]
    dims = [f"D{i}" for i in range(rank)]
    counts = [f"T.ceildiv({d}, {b})" for d, b in zip(dims, box)]
    lines = [f'{d} = T.symbolic("{d}", multiple_of={max(1, 16 // esize) if i else 1})'
             for i, d in enumerate(dims)]
    shape = f"({', '.join(dims)},)"
    lines += ["@T.prim_func",
              f'def tma_copy(A: T.Tensor({shape}, "{dtype}"), B: T.Tensor({shape}, "{dtype}")):',
              f"    with T.Kernel({' * '.join(counts)}, threads={threads}) as b:",
              f'        s = T.alloc_shared({tuple(box)}, "{dtype}")']
    rest, origin = "b", []
    for i in reversed(range(rank)):  # peel off the box index of each dim, last first
        origin.insert(0, f"({rest} % {counts[i]}) * {box[i]}" if i else f"({rest}) * {box[i]}")
        rest = f"({rest} // {counts[i]})"
    lines += [f"        T.copy(A[{', '.join(origin)}], s)",
              f"        T.copy(s, B[{', '.join(origin)}])"]
    return T.from_script("\n".join(lines), filename="<tma_copy>")


def pipelined_copy(M=None, N=None, bm=64, bn=64, stages=3, splits=1, dtype="float16",
                   threads=128):
    """B = A + 1: block (bx, by) walks part ``by`` of ``splits`` of the (M, bn) column strip
    ``bx`` in T.Pipelined steps of bm rows; with num_stages=S the TMA loads of steps
    k+1..k+S-1 are in flight while step k computes."""
    M = M or T.symbolic("M")
    N = N or T.symbolic("N", multiple_of=8)

    @T.prim_func
    def pipelined_copy(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), splits, threads=threads) as (bx, by):
            s = T.alloc_shared((bm, bn), dtype)
            steps = T.ceildiv(T.ceildiv(M, bm), splits)
            for k in T.Pipelined(steps, num_stages=stages):
                T.copy(A[(by * steps + k) * bm, bx * bn], s)
                for i, j in T.Parallel(bm, bn):
                    B[(by * steps + k) * bm + i, bx * bn + j] = s[i, j] + T.Cast(dtype, 1)

    return pipelined_copy


def explicit_copy(bm=64, bn=64, dtype="float16", threads=128):
    """tma_copy for rank 2, written with the explicit TMA forms."""
    M, N = T.symbolic("M"), T.symbolic("N", multiple_of=8)

    @T.prim_func
    def explicit_copy(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            s = T.alloc_shared((bm, bn), dtype)
            bar = T.alloc_barrier(threads)  # one mbarrier, an arrival per thread per phase
            T.tma_copy(A[by * bm, bx * bn], s, barrier=bar[0])  # expects the box's bytes
            T.mbarrier_arrive(bar[0])
            T.mbarrier_wait_parity(bar[0], 0)
            T.tma_copy(s, B[by * bm, bx * bn])

    return explicit_copy


def strided_copy(bm=64, bn=64, dtype="float16", threads=128):
    """B = A for a strided (non-contiguous) view A: rows ``S`` elements apart."""
    M, N, S = T.symbolic("M"), T.symbolic("N"), T.symbolic("S", multiple_of=8)

    @T.prim_func
    def strided_copy(A: T.StridedTensor((M, N), (S, 1), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            s = T.alloc_shared((bm, bn), dtype)
            T.copy(A[by * bm, bx * bn], s)
            for i, j in T.Parallel(bm, bn):
                if by * bm + i < M and bx * bn + j < N:
                    B[by * bm + i, bx * bn + j] = s[i, j]

    return strided_copy


ALL = {"tma_copy": tma_copy, "pipelined_copy": pipelined_copy,
       "explicit_copy": explicit_copy, "strided_copy": strided_copy}


if __name__ == "__main__":
    import torch

    import tilecute

    a = torch.randn(1000, 520, device="cuda", dtype=torch.float16)
    for name, make in ALL.items():
        kernel = tilecute.compile(make())
        b = torch.empty_like(a)
        kernel(a, b)
        want = a + 1 if name == "pipelined_copy" else a
        print(name, "ok" if torch.equal(b, want) else "MISMATCH")
