"""Weight-only int4 GEMM: C = A @ dequant(B)^T, where B holds two signed 4-bit weights per
byte (low nibble first, stored with a +8 offset) and one fp16 scale per ``group_size``
weights of a row.  Each K step copies the packed tile to shared memory, unpacks and scales
it into an fp16 tile there, then multiplies (TileLang's dequantize-GEMM pattern)."""

import tilecute.language as T

OUTPUTS = (3,)
ATOL, RTOL = 5e-2, 1e-2
SM80 = True
MISSING = None


def program(M=128, N=256, K=512, block_M=64, block_N=128, block_K=64, group_size=128,
            dtype="float16", accum_dtype="float32"):
    num_elems_per_byte = 2
    storage_dtype = "uint8"

    @T.prim_func
    def gemm_dequant_int4(A: T.Tensor((M, K), dtype),
                          B: T.Tensor((N, K // num_elems_per_byte), storage_dtype),
                          Scale: T.Tensor((N, K // group_size), dtype),
                          C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_packed = T.alloc_shared((block_N, block_K // num_elems_per_byte), storage_dtype)
            B_dequant = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=1):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K // num_elems_per_byte], B_packed)
                for i, j in T.Parallel(block_N, block_K):
                    nibble = (B_packed[i, j // num_elems_per_byte] >> (4 * (j % num_elems_per_byte))) & 0xF
                    w = T.Cast("int32", nibble) - 8
                    B_dequant[i, j] = T.Cast(dtype, w) * Scale[bx * block_N + i, (k * block_K + j) // group_size]
                T.gemm(A_shared, B_dequant, C_local, transpose_B=True)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm_dequant_int4


def make_args(device):
    import torch

    a = torch.randn(128, 512, device=device, dtype=torch.float16)
    q = torch.randint(0, 16, (256, 512), device=device, dtype=torch.uint8)
    packed = q[:, 0::2] | (q[:, 1::2] << 4)
    scale = (torch.rand(256, 4, device=device) * 0.1 + 0.01).half()
    return [a, packed.contiguous(), scale, torch.empty(128, 256, device=device, dtype=torch.float16)]


def dequantize(packed, scale, group_size=128):
    import torch

    low = (packed & 0xF).int() - 8
    high = (packed >> 4).int() - 8
    w = torch.stack([low, high], dim=-1).flatten(1).float()
    return w * scale.float().repeat_interleave(group_size, dim=1)


def reference(a, packed, scale, c):
    return ((a.float() @ dequantize(packed, scale).T).half(),)
