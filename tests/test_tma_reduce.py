"""TileLang's TMA reduce-store, ``T.atomic_add(G[region], s, use_tma=True)`` (sm_90+): one
thread adds a shared tile into a global region with ``cp.reduce.async.bulk.tensor .add``
(``TmaCopy(reduce="add")``), after the block's shared writes are fenced for TMA and a
block barrier, and waits until TMA has read the tile.
CPU: IR, printer round trip, serialization, generated source and PTX, sm_90a cubins
checked against the launch ABI (TileLang's flash-attention backward pattern included),
the element form TileLang leaves a plain atomic, refusals naming form / argument / line;
GPU: several blocks' tiles added into one tensor (a region partly past its end) vs torch."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.serialize import from_json, to_json
from tilecute.ir.visitor import walk_stmts
from tilecute.language import FrontendError
from tilecute.transform.pipeline import lower
from tilecute.transform.tma_copies import TmaError


def accumulate(rows=200, cols=64, block=64, blocks=8, dtype="float32"):
    """Block ``bx`` doubles its own ``(block, cols)`` tile of X in shared memory and adds
    it into rows ``(bx % R) * block ..`` of Out (``R`` regions; the last one runs past
    Out's ``rows``): every region gets the tiles of several blocks."""
    regions = (rows + block - 1) // block

    @T.prim_func
    def main(X: T.Tensor((blocks, block, cols), dtype), Out: T.Tensor((rows, cols), dtype)):
        with T.Kernel(blocks, threads=128) as bx:
            s = T.alloc_shared((block, cols), dtype)
            for i, j in T.Parallel(block, cols):
                s[i, j] = X[bx, i, j] + X[bx, i, j]
            T.atomic_add(Out[bx % regions * block:bx % regions * block + block, 0:cols], s,
                         use_tma=True)
    return main


def heads(batch=2, seq=96, heads=4, dim=64, block=32, dtype="float32"):
    """TileLang's flash-attention backward pattern: in a loop, the block writes a
    ``(block, dim)`` tile and adds it into ``dQ[b, k * block:(k + 1) * block, h, :]``
    (unit dims in the region), the tile rewritten in the next iteration."""

    @T.prim_func
    def main(X: T.Tensor((batch, seq, heads, dim), dtype),
             dQ: T.Tensor((batch, seq, heads, dim), dtype)):
        with T.Kernel(heads, batch, threads=128) as (bx, bz):
            acc = T.alloc_fragment((block, dim), dtype)
            s = T.alloc_shared((block, dim), dtype)
            for k in T.serial(seq // block):
                for i, j in T.Parallel(block, dim):
                    acc[i, j] = X[bz, k * block + i, bx, j] * (k + 1)
                T.copy(acc, s)
                T.atomic_add(dQ[bz, k * block:(k + 1) * block, bx, :], s, use_tma=True)
                T.atomic_add(dQ[bz, 0:block, bx, :], s, memory_order="relaxed", use_tma=True)
    return main


def _reduces(f):
    return [s for k in f.kernels for s in walk_stmts(k.body)
            if isinstance(s, N.TmaCopy) and s.reduce]


def test_ir_printer_and_json_round_trip():
    f = accumulate()
    (r,) = _reduces(f)
    assert (r.src.buffer, r.dst.buffer, r.reduce, r.barrier) == ("s", "Out", "add", None)
    assert not [s for s in walk_stmts(f.kernels[0].body) if isinstance(s, N.AtomicAdd)]
    text = print_func(f)
    assert "T.atomic_add(Out[bx % 4 * 64:bx % 4 * 64 + 64, 0:64], s, use_tma=True)" in text, text
    assert print_func(T.from_script(text)) == text
    assert from_json(to_json(f)) == f
    f = heads()
    assert [(r.dst.buffer, r.reduce) for r in _reduces(f)] == [("dQ", "add")] * 2
    assert from_json(to_json(f)) == f


def test_whole_tensor_destination_is_its_shape():
    @T.prim_func
    def main(Out: T.Tensor((64, 32), "int32")):
        with T.Kernel(4, threads=128) as bx:
            s = T.alloc_shared((64, 32), "int32")
            T.fill(s, bx)
            T.atomic_add(Out, s, use_tma=True)
    (r,) = _reduces(main)
    assert r.dst.extents == (N.Const(64, "int32"), N.Const(32, "int32"))
    assert "tct.store_add(Out_desc" in emit_cute(lower(main, "sm_90a"))


def _ptx(func, tmp_path, monkeypatch) -> str:
    import cutlass.cute as cute

    from tilecute.runtime.cubingen import import_source

    path = tmp_path / "kernel_cute.py"
    path.write_text(emit_cute(lower(func, "sm_90a")))
    module = import_source(str(path), f"tilecute_tma_reduce_{func.name}_{tmp_path.name}")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    return cute.compile(getattr(module, func.name), *module.placeholder_args(),
                        options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}").__ptx__


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_generated_source_ptx_and_cubin(dtype, tmp_path, monkeypatch):
    pytest.importorskip("cutlass")
    f = accumulate(dtype=dtype)
    plan = lower(f, "sm_90a")
    (desc,) = plan.func.kernels[0].tma_descriptors
    assert (desc.tensor, desc.dtype, desc.spec.box) == ("Out", dtype, (64, 64))
    src = emit_cute(plan)
    assert "tct.store_fence()  # TMA reduce-store (add) of a 64x64 box of Out" in src, src
    assert re.search(r"tct\.store_add\(Out_desc, tc_smem \+ 0, \(0, bx % 4 \* 64\)", src), src
    assert "tct.store(" not in src
    ptx = _ptx(f, tmp_path, monkeypatch)
    assert "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add" in ptx
    assert "fence.proxy.async.shared::cta" in ptx
    assert "cp.async.bulk.commit_group" in ptx and "cp.async.bulk.wait_group.read" in ptx
    info = tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path / "cubin"))  # ABI checked
    assert [p.size for p in next(iter(info.kernels.values())).params] == [8, 8, 128]


def test_loop_pattern_cubin(tmp_path, monkeypatch):
    pytest.importorskip("cutlass")
    f = heads()
    src = emit_cute(lower(f, "sm_90a"))
    # one descriptor for both boxes (same tensor, box and swizzle); the tile's read is
    # waited for before the barrier that precedes its next write
    assert src.count("tct.store_add(dQ_desc, ") == 2, src
    assert "(0, bx, k * 32, bz)" in src and "(0, bx, 0, bz)" in src
    assert "tct.store_wait()" in src
    ptx = _ptx(f, tmp_path, monkeypatch)
    # (two a turn; ptxas may unroll the three turns)
    assert len(re.findall(r"cp\.reduce\.async\.bulk\.tensor\.4d\.global\.shared::cta\.add",
                          ptx)) in (2, 6)
    tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path / "cubin"))


def test_one_element_ignores_use_tma_as_tilelang():
    """TileLang's element atomic (no extents on either side) never reads use_tma."""
    @T.prim_func
    def main(H: T.Tensor((8,), "float32"), C: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            T.atomic_add(H[tx % 8], 1.0, use_tma=True)
            C[tx % 8] = T.atomic_add(C[0], 1, return_prev=True, use_tma=True)
    body = main.kernels[0].body
    assert not _reduces(main)
    assert [s.op for s in walk_stmts(body) if isinstance(s, N.AtomicAdd)] == ["add"]


# ---- refusals -------------------------------------------------------------------------------
def _one(stmt: str) -> str:
    return f'''import tilecute.language as T


@T.prim_func
def main(G: T.Tensor((64, 64), "float32"), D: T.Tensor((64, 64), "float64"),
         H: T.Tensor((64, 64), "float16"), I: T.Tensor((64, 64), "int8")):
    with T.Kernel(1, threads=128) as bx:
        s = T.alloc_shared((64, 64), "float32")
        sd = T.alloc_shared((64, 64), "float64")
        sh = T.alloc_shared((64, 64), "float16")
        si = T.alloc_shared((64, 64), "int8")
        f = T.alloc_fragment((64, 64), "float32")
        {stmt}
'''


@pytest.mark.parametrize("stmt,msg", [
    ("T.atomic_add(D[0:64, 0:64], sd, use_tma=True)",
     r"T.atomic_add: use_tma=True: 'D' is float64; a TMA reduce-store adds float16, bfloat16, "
     r"float32, int32, uint32, uint64"),
    ("T.atomic_add(I[0:64, 0:64], si, use_tma=True)", "'I' is int8; a TMA reduce-store adds"),
    ("T.atomic_add(G[0:64, 0:64], f, use_tma=True)",
     "T.atomic_add: use_tma=True: 'f' is a fragment buffer; TMA reads the tile it adds from "
     "shared memory"),
    ("T.atomic_add(G[0:64, 0:64], sh, use_tma=True)",
     "'sh' is float16 and 'G' float32; a TMA reduce-store adds matching dtypes"),
    ("T.atomic_add(s[0:64, 0:64], s, use_tma=True)",
     "'s' is a shared buffer; a TMA reduce-store adds into a global tensor"),
    ("T.atomic_add(G[0:64, 0:64], 1.0, use_tma=True)",
     r"T.atomic_add: use_tma=True adds a shared tile .* got `1.0`"),
    ('T.atomic_add(G[0:64, 0:64], s, memory_order="release", use_tma=True)',
     r"T.atomic_add: memory_order='release' with use_tma=True is not supported"),
    ("T.atomic_add(G[0:64, 0:64], s, return_prev=True, use_tma=True)",
     "T.atomic_add: return_prev=True with use_tma=True"),
    ("T.atomic_add(G[0:64, 0:64], s, use_tma=bx)", "T.atomic_add: use_tma must be True or False"),
])
def test_refusals_name_the_form_argument_and_line(stmt, msg):
    with pytest.raises(FrontendError, match=msg) as e:
        T.from_script(_one(stmt))
    assert "<script>:13" in str(e.value)


def test_no_tma_target_is_refused_naming_the_form():
    """TileLang refuses use_tma=True without TMA too (no fallback to element atomics)."""
    f = T.from_script(_one("T.atomic_add(G[0:64, 0:64], s, use_tma=True)"))
    with pytest.raises(TmaError, match=r"<script>:13: prim_func 'main': T.atomic_add: "
                                       r"use_tma=True needs TMA .* the target is sm_80"):
        lower(f, "sm_80")


@pytest.mark.parametrize("stmt,msg", [
    ("T.atomic_add(G[0:32, 0:64], s, use_tma=True)",
     r"T.atomic_add\(..., use_tma=True\) between 'G' and 's': the region's extents \[32, 64\] "
     r"are not the shared tile's \[64, 64\]"),
    ("T.atomic_add(G[0:64, 0:64], s[0:64, 0:32], use_tma=True)",
     r"T.atomic_add\(..., use_tma=True\) moves a whole shared buffer"),
])
def test_boxes_tma_cannot_move_are_refused(stmt, msg):
    f = T.from_script(_one(stmt))
    with pytest.raises(TmaError, match=msg) as e:
        lower(f, "sm_90a")
    assert "<script>:13" in str(e.value)


def test_validator_checks_json_input():
    import dataclasses

    from tilecute.ir.validate import ValidationError, validate

    f = T.from_script(_one("T.atomic_add(G[0:64, 0:64], s, use_tma=True)"))
    k = f.kernels[0]

    def with_(**kw):
        body = tuple(dataclasses.replace(s, **kw) if isinstance(s, N.TmaCopy) else s
                     for s in k.body)
        return dataclasses.replace(f, kernels=(dataclasses.replace(k, body=body),))
    validate(with_())
    with pytest.raises(ValidationError, match="TmaCopy.reduce is 'add'"):
        validate(with_(reduce="max"))
    with pytest.raises(ValidationError, match="adds a shared tile into global memory"):
        validate(with_(src=N.Region("G", (N.Const(0, "int32"),) * 2),
                       dst=N.Region("s", (N.Const(0, "int32"),) * 2)))


# ---- GPU -----------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "int32", "float16"])
def test_gpu_blocks_accumulate_into_one_tensor(dtype):
    torch = pytest.importorskip("torch")
    rows, cols, block, blocks = 200, 64, 64, 8
    kernel = tilecute.compile(accumulate(rows, cols, block, blocks, dtype))
    tdt = getattr(torch, dtype)
    if dtype == "int32":
        x = torch.randint(-1000, 1000, (blocks, block, cols), device="cuda", dtype=tdt)
        out = torch.randint(-1000, 1000, (rows, cols), device="cuda", dtype=tdt)
    else:
        x = torch.randn(blocks, block, cols, device="cuda").to(tdt)
        out = torch.randn(rows, cols, device="cuda").to(tdt)
    want = out.double().clone()
    regions = (rows + block - 1) // block
    for b in range(blocks):
        r0 = b % regions * block
        n = min(block, rows - r0)  # the rest of the region is past Out's end: skipped
        want[r0:r0 + n] += 2 * x[b, :n].double()
    kernel(x, out)
    torch.cuda.synchronize()
    if dtype == "int32":
        assert torch.equal(out.double(), want)
    else:
        tol = 1e-5 if dtype == "float32" else 2e-2
        torch.testing.assert_close(out.double(), want, rtol=tol, atol=tol * 8)


@pytest.mark.gpu
def test_gpu_loop_pattern():
    torch = pytest.importorskip("torch")
    batch, seq, nh, dim, block = 2, 96, 4, 64, 32
    kernel = tilecute.compile(heads(batch, seq, nh, dim, block))
    x = torch.randn(batch, seq, nh, dim, device="cuda")
    dq = torch.zeros_like(x)
    want = torch.zeros_like(x, dtype=torch.float64)
    for k in range(seq // block):
        tile = x[:, k * block:(k + 1) * block].double() * (k + 1)
        want[:, k * block:(k + 1) * block] += tile
        want[:, 0:block] += tile
    kernel(x, dq)
    torch.cuda.synchronize()
    torch.testing.assert_close(dq.double(), want, rtol=1e-5, atol=1e-4)
