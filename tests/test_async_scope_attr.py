"""``with T.attr("default", "async_scope", 1):`` (TileOPs' DeepSeek MLA / DSA decode
producers wrap their vectorized KV loads in it): TVM's hint for the InjectPTXAsyncCopy
pass older TileLang ran; TileLang's pipeline today reads it nowhere, so the stores inside
stay the stores written."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.visitor import walk_stmts


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def gather_rows(rows=64, dim=256, n_idx=32):
    @T.prim_func
    def gather(KV: T.Tensor((rows, dim), "float16"), Idx: T.Tensor((n_idx,), "int32"),
               Out: T.Tensor((n_idx, dim), "float16")):
        with T.Kernel(1, threads=128) as bx:
            tile = T.alloc_shared((n_idx, dim), "float16")
            tx = T.get_thread_binding()
            for r in T.serial(n_idx // 4):
                row = r * 4 + tx // 32
                with T.attr("default", "async_scope", 1):
                    for u in T.serial(dim // 256):
                        for v in T.vectorized(8):
                            tile[row, u * 256 + tx % 32 * 8 + v] = \
                                KV[Idx[row], u * 256 + tx % 32 * 8 + v]
            T.sync_threads()
            T.copy(tile, Out)
    return gather


def test_async_scope_keeps_the_stores():
    func = gather_rows()
    stores = [s for s in walk_stmts(func.kernels[0].body)
              if isinstance(s, N.Store) and s.buffer == "tile"]
    assert len(stores) == 1 and isinstance(stores[0].value, N.Load)
    assert "async_scope" not in func.script()


def test_async_scope_builds(tmp_path):
    info = tilecute.build_cubin(gather_rows(), "sm_90a", out_dir=str(tmp_path))
    assert info.path.endswith(".cubin") and info.kernel_names


def test_other_attr_keys_stay_refused():
    text = '''
@T.prim_func
def f(A: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=32) as bx:
        with T.attr("default", "pragma_unroll", 1):
            A[0] = 1.0
'''
    with pytest.raises(T.FrontendError, match="attr_key='pragma_unroll' is not supported"):
        T.from_script(text)


@pytest.mark.gpu
def test_async_scope_matches_torch():
    import torch

    kv = torch.randn(64, 256, device="cuda", dtype=torch.float16)
    idx = torch.randperm(64, device="cuda")[:32].to(torch.int32)
    out = torch.empty(32, 256, device="cuda", dtype=torch.float16)
    tilecute.compile(gather_rows())(kv, idx, out)
    torch.testing.assert_close(out, kv[idx.long()])
