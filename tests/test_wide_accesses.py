"""TileLang's explicit-width accesses: ``T.ldg32/64/128/256`` and ``T.lds32/64/128`` read
32-bit words (TileLang's uint32 / uint32x2 / uint32x4) packed from the elements at the
address, ``T.stg*`` / ``T.sts*`` store words as the elements there, a predicate skips the
access (a skipped load reads 0), ``T.__ldg(x[i])`` is the element load.  CPU: the IR the
frontend builds, refusals, an sm_90a cubin; GPU: the bits arrive."""

import pytest
import torch

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts
from tilecute.language.parser import FrontendError


def _shuffle_pairs(n=128):
    @T.prim_func
    def shuffle_pairs(Src: T.Tensor((n,), T.float32), Half: T.Tensor((n,), T.bfloat16),
                      Dst: T.Tensor((n,), T.float32), HalfOut: T.Tensor((n,), T.bfloat16),
                      live: T.int32):
        with T.Kernel(n // 4, threads=32) as blk:
            stage = T.alloc_shared((n,), T.float32)
            quad = T.ldg128(Src[blk * 4:blk * 4 + 4], pred=blk < live)
            T.sts128(stage[blk * 4:blk * 4 + 4], quad)
            T.sync_threads()
            low = T.lds64(stage[blk * 4:blk * 4 + 2])
            T.stg64(Dst[blk * 4 + 2:blk * 4 + 4], low)           # the halves swap places
            Dst[blk * 4:blk * 4 + 2] = T.reinterpret(T.ldg64(Src[blk * 4 + 2:blk * 4 + 4]),
                                                     T.float32x2)
            pair = T.ldg32(Half[blk * 4:blk * 4 + 2])            # two bf16 in one word
            T.stg32(HalfOut[blk * 4 + 2], pair, pred=blk % 2 == 0)
            HalfOut[blk * 4] = T.__ldg(Half[blk * 4 + 3])

    return shuffle_pairs


def test_words_are_packed_through_a_local_copy_and_unpacked_into_elements():
    f = _shuffle_pairs()
    stmts = list(walk_stmts(f.kernels[0].body))
    words = [s.buffer for s in stmts if isinstance(s, N.Allocate) and s.buffer.scope == "local"]
    assert [(b.dtype, b.shape[0].value) for b in words] == \
        [("uint32", 4), ("uint32", 2), ("uint32", 2), ("uint32", 1)]
    # the predicated 128-bit load: the reads under `if blk < live`, zeros otherwise
    guarded = next(s for s in stmts if isinstance(s, N.If) and len(s.then) == 4)
    assert all(isinstance(x.value, N.Call) and x.value.name == "reinterpret" for x in guarded.then)
    assert all(x.value == N.Const(0, "uint32") for x in guarded.orelse)
    text = f.script()
    # bf16 pairs: two 16-bit halves per word, shifted and masked
    assert "<< T.uint32(16)" in text and ">> T.uint32(16)" in text
    assert "HalfOut[blk * 4] = Half[blk * 4 + 3]" in text  # T.__ldg


def test_wide_accesses_build_an_sm90a_cubin(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path))
    kernel = tilecute.compile(_shuffle_pairs(), target="cuda")
    assert kernel.ensure_cubin()
    with pytest.raises(ValueError, match="expected a CUDA tensor"):
        kernel(torch.zeros(128), torch.zeros(128, dtype=torch.bfloat16), torch.zeros(128),
               torch.zeros(128, dtype=torch.bfloat16), 3)


@pytest.mark.parametrize("body, message", [
    ("for i in T.serial(T.ldg32(A[0])):\n            B[i] = 0.0",
     r"T.ldg32 may stand in an assignment, a store, an expression statement or an if"),
    ("B[0] = T.reinterpret(T.lds32(A[0]), T.float32)",
     r"T.lds32: 'A' is a global buffer; T.lds32 accesses shared memory"),
    ("T.stg64(B[0:2], T.ldg32(A[0]))",
     r"T.stg64: the value has 32 bits|the value is uint32 \(32 bits\); the access stores 64"),
    ("T.stg64(B[0:4], T.ldg64(A[0:2]))",
     r"T.stg64: the region must be 2 'B' elements along the last dim \(64 bits\)"),
    ("B[0:2] = T.reinterpret(T.ldg64(A[0:2]), T.float32x4)",
     r"T.reinterpret: a 64-bit value cannot be reinterpreted as float32x4 \(128 bits\)"),
])
def test_refusals_name_the_form_and_line(body, message):
    src = f'''
import tilecute.language as T

@T.prim_func
def refused(A: T.Tensor((8,), T.float32), B: T.Tensor((8,), T.float32)):
    with T.Kernel(1, threads=32):
        {body}
'''
    with pytest.raises(FrontendError, match=message) as e:
        T.from_script(src)
    assert ":7:" in str(e.value)


@pytest.mark.gpu
def test_wide_accesses_on_the_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path))
    kernel = tilecute.compile(_shuffle_pairs())
    src = torch.randn(128, device="cuda")
    half = torch.randn(128, device="cuda").bfloat16()
    dst = torch.zeros(128, device="cuda")
    half_out = torch.zeros(128, device="cuda").bfloat16()
    kernel(src, half, dst, half_out, 20)
    quads = src.view(32, 4).clone()
    quads[20:] = 0  # blocks past `live` load zeros
    expected = torch.cat([src.view(32, 4)[:, 2:], quads[:, :2]], dim=1).reshape(-1)
    torch.testing.assert_close(dst, expected, rtol=0, atol=0)
    h, out = half.view(32, 4), half_out.view(32, 4)
    assert torch.equal(out[::2, 2:], h[::2, :2]) and bool((out[1::2, 2:] == 0).all())
    assert torch.equal(out[:, 0], h[:, 3])
