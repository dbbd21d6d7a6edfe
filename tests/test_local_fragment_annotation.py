"""T.annotate_layout of a T.Fragment on a local buffer (split-KV combine kernels of
DeepSeek MLA decode and SeerAttention: ``T.Fragment(lse.shape, forward_thread_fn=lambda
i: i)`` on a one-element ``T.alloc_local``): TileLang stores the buffer at the fragment's
register indices, each thread its own copy; one-to-one indices relabel the elements and
change nothing, indices that make elements share a register are refused."""

import pytest

import tilecute
import tilecute.language as T


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def combine(heads=8, splits=4, dim=64, reversed_map=False):
    @T.prim_func
    def lse_combine(glse: T.Tensor((heads, splits), "float32"),
                    part: T.Tensor((heads, splits, dim), "float32"),
                    out: T.Tensor((heads, dim), "float32")):
        with T.Kernel(heads, threads=64) as h:
            acc = T.alloc_fragment((dim,), "float32")
            lse_sum = T.alloc_local((1,), "float32")
            lse_max = T.alloc_local((1,), "float32")
            pair = T.alloc_local((2,), "float32")
            T.annotate_layout({
                lse_sum: T.Fragment(lse_sum.shape, forward_thread_fn=lambda i: i),
                pair: T.Fragment(pair.shape, forward_thread_fn=lambda i: 0,
                                 forward_index_fn=(lambda i: 1 - i) if reversed_map else
                                 (lambda i: 0)),
            })
            T.clear(lse_sum)
            T.clear(acc)
            lse_max[0] = -T.infinity("float32")
            for k in T.serial(splits):
                lse_max[0] = T.max(lse_max[0], glse[h, k])
            for k in T.serial(splits):
                lse_sum[0] += T.exp2(glse[h, k] - lse_max[0])
            pair[0] = T.log2(lse_sum[0]) + lse_max[0]
            for k in T.serial(splits):
                pair[1] = T.exp2(glse[h, k] - pair[0])
                for i in T.Parallel(dim):
                    acc[i] += part[h, k, i] * pair[1]
            T.copy(acc, out[h, 0])
    return lse_combine


def test_one_to_one_fragment_on_a_local_buffer_builds(tmp_path):
    info = tilecute.build_cubin(combine(reversed_map=True), "sm_90a", out_dir=str(tmp_path))
    assert info.path.endswith(".cubin") and info.kernel_names


def test_shared_registers_are_refused():
    with pytest.raises(T.FrontendError, match="T.Fragment of the local buffer 'pair': its "
                                              "register indices put several elements in one"):
        combine(reversed_map=False)


@pytest.mark.gpu
def test_combine_matches_torch():
    import torch

    glse = torch.randn(8, 4, device="cuda")
    part = torch.randn(8, 4, 64, device="cuda")
    out = torch.empty(8, 64, device="cuda")
    tilecute.compile(combine(reversed_map=True))(glse, part, out)
    w = torch.softmax(glse * torch.log(torch.tensor(2.0)), dim=1)
    torch.testing.assert_close(out, (part * w[..., None]).sum(1), rtol=1e-4, atol=1e-4)
