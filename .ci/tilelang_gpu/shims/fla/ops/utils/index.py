"""``fla.ops.utils.index`` stand-in."""

import torch


def prepare_lens(cu_seqlens):
    return cu_seqlens[1:] - cu_seqlens[:-1]


def prepare_position_ids(cu_seqlens):
    """Each token's position inside its sequence."""
    return torch.cat([torch.arange(n, device=cu_seqlens.device, dtype=cu_seqlens.dtype) for n in prepare_lens(cu_seqlens).tolist()])


def prepare_sequence_ids(cu_seqlens):
    """Each token's sequence number."""
    return prepare_position_ids(cu_seqlens).eq(0).cumsum(0) - 1


def prepare_token_indices(cu_seqlens):
    """[(sequence, position)] of every token: cu_seqlens [0, 2, 6] gives
    [[0, 0], [0, 1], [1, 0], [1, 1], [1, 2], [1, 3]] (cu_seqlens' dtype and device)."""
    lens = prepare_lens(cu_seqlens).tolist()
    pos = torch.cat([torch.arange(n, device=cu_seqlens.device) for n in lens])
    seq = torch.cat([torch.full((n,), i, device=cu_seqlens.device) for i, n in enumerate(lens)])
    return torch.stack([seq, pos], 1).to(cu_seqlens)
