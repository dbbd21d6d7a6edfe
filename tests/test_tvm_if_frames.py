"""TVMScript's if frames (TileOPs' reductions and Mamba-2 dA-cumsum write them):
``with T.If(c), T.Then(): A`` is ``if c: A``, and ``with T.If(c):`` holding ``with
T.Then(): A`` and ``with T.Else(): B`` is ``if c: A else: B``."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.language import FrontendError


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def tail_tiles(M=64, N=200, block_m=16, tile_n=64):
    """Row sums in tiles of tile_n columns: full tiles through shared memory, the last
    (partial) one element by element with a bound check."""
    tiles = T.ceildiv(N, tile_n)

    @T.prim_func
    def row_sums(X: T.Tensor((M, N), "float32"), S: T.Tensor((M,), "float32")):
        with T.Kernel(M // block_m, threads=128) as pid:
            tile = T.alloc_shared((block_m, tile_n), "float32")
            acc = T.alloc_fragment((block_m,), "float32")
            part = T.alloc_fragment((block_m,), "float32")
            T.fill(acc, 0.0)
            for t in T.serial(tiles):
                with T.If(t < tiles - 1):
                    with T.Then():
                        T.copy(X[pid * block_m, t * tile_n], tile)
                    with T.Else():
                        for i, j in T.Parallel(block_m, tile_n):
                            with T.If(t * tile_n + j < N), T.Then():
                                tile[i, j] = X[pid * block_m + i, t * tile_n + j]
                            if t * tile_n + j >= N:
                                tile[i, j] = 0.0
                T.reduce_sum(tile, part, dim=1)
                for i in T.Parallel(block_m):
                    acc[i] += part[i]
            T.copy(acc, S[pid * block_m])
    return row_sums


def test_if_frames_are_if_statements():
    text = tail_tiles().script()
    assert text.count("if ") >= 2 and "else:" in text, text
    assert "T.If" not in text and "T.Then" not in text


def test_if_frames_build(tmp_path):
    info = tilecute.build_cubin(tail_tiles(), "sm_90a", out_dir=str(tmp_path))
    assert info.path.endswith(".cubin") and info.kernel_names


@pytest.mark.parametrize("body, needle", [
    ("with T.Then():\n                A[0] = 1.0", r"`with T.Then\(\)` stands directly inside `with T.If\(cond\):`"),
    ("with T.If(bx > 0):\n                A[0] = 1.0", r"holds `with T.Then\(\):` and optionally `with T.Else\(\):`"),
    ("with T.If(bx > 0, 1), T.Then():\n                A[0] = 1.0", "T.If takes one argument"),
    ("with T.If(bx > 0), T.Then(1):\n                A[0] = 1.0", r"T.Then\(\) takes no arguments"),
])
def test_misplaced_if_frames_are_refused_at_their_line(body, needle):
    text = f'''
@T.prim_func
def f(A: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=32) as bx:
            {body}
'''
    with pytest.raises(FrontendError, match=needle) as e:
        T.from_script(text)
    assert ":5" in str(e.value)


@pytest.mark.gpu
def test_if_frames_match_torch():
    import torch

    x = torch.randn(64, 200, device="cuda")
    s = torch.empty(64, device="cuda")
    tilecute.compile(tail_tiles())(x, s)
    torch.testing.assert_close(s, x.sum(1), rtol=1e-4, atol=1e-4)
