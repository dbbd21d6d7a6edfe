"""Bitwise row reductions over int32 flag words: each row's OR (any flag set), AND
(flags set everywhere) and XOR (a parity checksum), with T.reduce_bitor/bitand/bitxor
over a fragment."""

import tilecute.language as T

OUTPUTS = (1, 2, 3)
ATOL, RTOL = 0, 0
SM80 = True
MISSING = None


def program(M=256, N=256, blk_m=4):
    @T.prim_func
    def reduce_bitwise(Flags: T.Tensor((M, N), "int32"), Any: T.Tensor((M,), "int32"),
                       All: T.Tensor((M,), "int32"), Parity: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            flags = T.alloc_fragment((blk_m, N), "int32")
            any_set = T.alloc_fragment((blk_m,), "int32")
            all_set = T.alloc_fragment((blk_m,), "int32")
            parity = T.alloc_fragment((blk_m,), "int32")
            T.copy(Flags[bx * blk_m, 0], flags)
            T.reduce_bitor(flags, any_set, dim=1)
            T.reduce_bitand(flags, all_set, dim=1)
            T.reduce_bitxor(flags, parity, dim=1)
            T.copy(any_set, Any[bx * blk_m])
            T.copy(all_set, All[bx * blk_m])
            T.copy(parity, Parity[bx * blk_m])

    return reduce_bitwise


def make_args(device):
    import torch

    # mostly-set words so that AND keeps some bits
    flags = torch.randint(-2**31, 2**31 - 1, (256, 256), device=device, dtype=torch.int32)
    flags = flags | torch.tensor(0x0F0F0000, device=device, dtype=torch.int32)
    empty = lambda: torch.empty(256, device=device, dtype=torch.int32)  # noqa: E731
    return [flags, empty(), empty(), empty()]


def reference(flags, *outs):
    import functools

    cols = flags.unbind(1)
    return (functools.reduce(lambda a, b: a | b, cols), functools.reduce(lambda a, b: a & b, cols),
            functools.reduce(lambda a, b: a ^ b, cols))
