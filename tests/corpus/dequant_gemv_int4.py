"""fp16 x int4 GEMV: C[m, n] = sum_k A[m, k] * (B[n, k] - 8), with B's unsigned 4-bit
weights packed two per byte, low nibble first.  Thread block (reduce_thread,
n_partition): each thread unpacks one 128-bit chunk of A's width per K step into
registers, and the row's partial sums meet in a block reduction (TileLang's
dequantize GEMV)."""

import tilecute.language as T

OUTPUTS = (2,)
ATOL, RTOL = 5e-2, 1e-2
SM80 = True
MISSING = None


def program(M=4, N=256, K=1024, n_partition=4, reduce_thread=32, in_dtype="float16",
            accum_dtype="float32"):
    num_bits = 4
    num_elems_per_byte = 8 // num_bits
    micro_size_k = 128 // 16
    micro_size_k_compressed = micro_size_k // num_elems_per_byte
    block_K = reduce_thread * micro_size_k

    @T.prim_func
    def dequant_gemv_int4(A: T.Tensor((M, K), in_dtype),
                          B: T.Tensor((N, K // num_elems_per_byte), "uint8"),
                          C: T.Tensor((M, N), in_dtype)):
        with T.Kernel(T.ceildiv(N, n_partition), M, threads=(reduce_thread, n_partition)) as (bx, by):
            A_local = T.alloc_local((micro_size_k,), in_dtype)
            B_quant_local = T.alloc_local((micro_size_k_compressed,), "uint8")
            B_dequantize_local = T.alloc_local((micro_size_k,), in_dtype)
            partial = T.alloc_shared((n_partition, reduce_thread), accum_dtype)
            accum_res = T.alloc_local((1,), accum_dtype)
            kr = T.get_thread_binding(0)
            ni = T.get_thread_binding(1)
            T.clear(accum_res)
            for ko in T.serial(T.ceildiv(K, block_K)):
                for v in T.serial(micro_size_k):
                    A_local[v] = A[by, ko * block_K + kr * micro_size_k + v]
                for v in T.serial(micro_size_k_compressed):
                    B_quant_local[v] = B[bx * n_partition + ni,
                                         ko * (reduce_thread * micro_size_k_compressed) + kr * micro_size_k_compressed + v]
                for ki in T.serial(micro_size_k):
                    q = (B_quant_local[ki // num_elems_per_byte] >> (num_bits * (ki % num_elems_per_byte))) & 0xF
                    B_dequantize_local[ki] = T.Cast(in_dtype, T.Cast("int32", q) - 8)
                for ki in T.serial(micro_size_k):
                    accum_res[0] += T.Cast(accum_dtype, A_local[ki]) * T.Cast(accum_dtype, B_dequantize_local[ki])
            partial[ni, kr] = accum_res[0]
            T.sync_threads()
            if kr == 0:
                total = T.alloc_var(accum_dtype)
                for r in T.serial(reduce_thread):
                    total += partial[ni, r]
                C[by, bx * n_partition + ni] = T.Cast(in_dtype, total)

    return dequant_gemv_int4


def make_args(device):
    import torch

    a = torch.randn(4, 1024, device=device, dtype=torch.float16)
    q = torch.randint(0, 16, (256, 1024), device=device, dtype=torch.uint8)
    packed = (q[:, 0::2] | (q[:, 1::2] << 4)).contiguous()
    return [a, packed, torch.empty(4, 256, device=device, dtype=torch.float16)]


def reference(a, packed, c):
    import torch

    w = torch.stack([(packed & 0xF).int(), (packed >> 4).int()], dim=-1).flatten(1).float() - 8
    return ((a.float() @ w.T).half(),)
