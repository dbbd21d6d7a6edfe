"""T.annotate_safe_value({A: v}): TileLang's safe_value_map on the kernel's block.  An
out-of-bounds read of global tensor ``A`` anywhere in the kernel gives ``v`` instead of 0:
the bounds-checked loads (T.Parallel nests, serial code, cp.async slow paths), a ragged
T.copy's missing elements (``v`` cast to the copy's destination dtype) and an atomic with
a result; a copy from ``A`` never becomes a TMA load (TMA fills with zeros), and an
explicit T.tma_copy from ``A`` is refused (KernelScope.safe_values, codegen/bounds.py;
docs/ir.md)."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.ir import nodes as N
from tilecute.ir.serialize import from_json, to_json
from tilecute.ir.validate import ValidationError
from tilecute.ir.visitor import walk_stmts
from tilecute.language.parser import FrontendError
from tilecute.transform.pipeline import lower, run_passes


def _kernel(func, arch="sm_90a") -> str:
    src = emit_cute(lower(func, arch))
    return src[src.index("\n@cute.kernel"):src.index("\n@cute.jit")]


def _fallbacks(src: str) -> list[str]:
    """The starting values of the bounds-checked temporaries (``tc_ldN = <value>`` right
    before its ``if``), and the values of loads on a per-lane path whose checks cannot pass
    there (``tc_ldN = <value>  # out of bounds``)."""
    return [m[1] for m in re.findall(r"\n( +)tc_(?:ld|at)\d+ = (.+)\n\1if ", src)] + \
        re.findall(r"tc_(?:ld|at)\d+ = (.+)  # out of bounds\n", src)


# ---- programs ------------------------------------------------------------------------------------
def ragged_copy(m=70, n=75, block=32, src="float32", dst="float32", pad=None):
    """A tile per block copied from A (m x n) into B, whose shape is A's rounded up to
    whole tiles: B's elements past A's end get the safe value (0 without one)."""
    pm, pn = -(-m // block) * block, -(-n // block) * block

    @T.prim_func
    def pad_copy(A: T.Tensor((m, n), src), B: T.Tensor((pm, pn), dst)):
        with T.Kernel(pn // block, pm // block, threads=128) as (bx, by):
            if pad is not None:
                T.annotate_safe_value({A: pad})
            T.copy(A[by * block:(by + 1) * block, bx * block:(bx + 1) * block],
                   B[by * block:(by + 1) * block, bx * block:(bx + 1) * block])
    return pad_copy


def shifted_rows(shift=5, pad=7, dtype="float16"):
    """Rows of a tile read ``shift`` rows up through shared memory in T.Parallel nests:
    the block's first rows read before A's start (the safe value)."""

    @T.prim_func
    def shifted(A: T.Tensor((256, 256), dtype), B: T.Tensor((256, 256), dtype)):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            tile = T.alloc_shared((64, 64), dtype)
            T.annotate_safe_value({A: pad})
            for i, j in T.Parallel(64, 64):
                tile[i, j] = A[by * 64 + i - shift, bx * 64 + j]
            for i, j in T.Parallel(64, 64):
                B[by * 64 + i, bx * 64 + j] = tile[i, j]
    return shifted


def staged_tile(annotated=True):
    """A ragged tile copied into shared memory and out again (the annotation after the
    copies: it is the kernel's, wherever it stands)."""

    @T.prim_func
    def staged(A: T.Tensor((100, 100), "float32"), B: T.Tensor((128, 128), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            s = T.alloc_shared((64, 64), "float32")
            T.copy(A[by * 64, bx * 64], s)
            T.copy(s, B[by * 64, bx * 64])
            if annotated:
                T.annotate_safe_value({A: -2.5})
    return staged


def to_fragment():
    """A ragged tile copied into a fragment, doubled, written out."""

    @T.prim_func
    def frag(A: T.Tensor((50, 60), "float16"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((64, 64), "float32")
            T.annotate_safe_value({A: 3})
            T.copy(A[0:64, 0:64], f)
            for i, j in T.Parallel(64, 64):
                f[i, j] = f[i, j] * 2.0
            T.copy(f, B[0:64, 0:64])
    return frag


def elementwise(m=70, n=75, pm=96, pn=96):
    """One-element copies in a T.Parallel nest over B's shape."""

    @T.prim_func
    def elem(A: T.Tensor((m, n), "float32"), B: T.Tensor((pm, pn), "float32")):
        with T.Kernel(1, threads=128):
            T.annotate_safe_value({A: -99})
            for i, j in T.Parallel(pm, pn):
                T.copy(A[i, j], B[i, j])
    return elem


def serial_and_atomic():
    """Serial reads past a row's end, and an atomic with a result past a counter's end."""

    @T.prim_func
    def ser(A: T.Tensor((8, 30), "int32"), C: T.Tensor((100,), "int32"),
            S: T.Tensor((8, 32), "int32"), P: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            T.annotate_safe_value({A: -1, C: 1000})
            t = T.get_thread_binding()
            if t < 32:
                for r in T.serial(8):
                    S[r, t] = A[r, t] * 2
            P[t] = T.atomic_add(C[t], 1, return_prev=True)
    return ser


def scalar_value():
    """The value an expression of a scalar parameter, read through a view of the tensor."""
    n = T.symbolic("n")

    @T.prim_func
    def scal(A: T.Tensor((n, 64), "int8"), B: T.Tensor((64, 64), "int32"), pad: T.int32):
        with T.Kernel(1, threads=128) as bx:
            flat = T.view(A, (n * 64,), "int8")
            T.annotate_safe_value({flat: pad * 2})
            for i, j in T.Parallel(64, 64):
                B[i, j] = T.cast(A[i, j], "int32") + T.cast(flat[i * 64 + j + 64], "int32")
    return scal


# ---- IR ------------------------------------------------------------------------------------------
def test_kernel_carries_the_map_and_prints_it():
    f = ragged_copy(pad=-99)
    (k,) = f.kernels
    assert k.safe_values == (("A", N.Const(-99, "int32")),)
    assert "T.annotate_safe_value({A: -99})" in f.script()
    assert T.from_script(f.script()) == f
    assert from_json(to_json(f)) == f


def test_literals_are_typed_as_tvm_types_them():
    """An int is int32, a float float32 (rounded to it), a bool bool; a typed constant and
    a scalar expression stay as written; a view's key names its tensor."""
    assert staged_tile().kernels[0].safe_values == (("A", N.Const(-2.5, "float32")),)
    (name, v), = scalar_value().kernels[0].safe_values
    assert name == "A" and v.dtype == "int32" and "pad" in T.from_script(
        scalar_value().script()).script()

    @T.prim_func
    def typed(A: T.Tensor((8,), "float16"), B: T.Tensor((8,), "float16")):
        with T.Kernel(1, threads=32):
            T.annotate_safe_value({A: 0.1, B: T.float16(2)})
    (_, a), (_, b) = typed.kernels[0].safe_values
    assert a == N.Const(0.10000000149011612, "float32") and b.dtype == "float16"


def test_copy_from_an_annotated_tensor_is_not_a_tma_load():
    loads = lambda f: [s for s in walk_stmts(run_passes(f, "sm_90a").kernels[0].body)  # noqa: E731
                       if isinstance(s, N.TmaCopy) and s.barrier is not None]
    assert loads(staged_tile(annotated=False))  # (the contrast: TMA without the annotation)
    assert not loads(staged_tile(annotated=True))


# ---- generated source ------------------------------------------------------------------------------
def test_ragged_copy_reads_the_value():
    assert _fallbacks(_kernel(ragged_copy(pad=-99))) == ["cutlass.Float32(-99.0)"]
    assert _fallbacks(_kernel(ragged_copy())) == ["cutlass.Float32(0)"]


def test_ragged_copy_casts_the_value_to_the_destination_dtype():
    """The out-of-bounds element is the value cast to the destination's dtype, and the
    in-bounds one the cast load (TileLang's copy lowering: if_then_else(in, cast(load),
    cast(value)))."""
    src = _kernel(ragged_copy(src="float32", dst="float16", pad=-99))
    m = re.search(r"\n( +)(tc_ld\d+) = cutlass\.Float16\(-99\.0\)\n\1if .+:\n\1    \2 = "
                  r"cutlass\.Float16\(A\[.+\]\)\n\1B\[.+\] = \2\n", src)
    assert m, src
    # an int8 source into int32 and uint8: C's conversion of the int32 literal 1000
    src = _kernel(ragged_copy(src="int8", dst="int32", pad=1000))
    assert _fallbacks(src) == ["cutlass.Int32(1000)"], src
    assert _fallbacks(_kernel(ragged_copy(src="int8", dst="uint8", pad=1000))) == \
        ["cutlass.Uint8(232)"]


def test_parallel_loads_take_the_value_on_the_checked_path():
    src = _kernel(shifted_rows(shift=5, pad=7))
    assert "tcc.copy_async(" in src  # the whole-vector path, in bounds
    assert _fallbacks(src) == ["cutlass.Float16(7.0)"], src


def test_staged_and_fragment_copies_take_the_value():
    assert _fallbacks(_kernel(staged_tile())) == ["cutlass.Float32(-2.5)"]
    assert _fallbacks(_kernel(to_fragment())) == ["cutlass.Float32(3.0)"]
    assert _fallbacks(_kernel(elementwise())) == ["cutlass.Float32(-99.0)"]


def test_serial_reads_and_atomic_results_take_the_value():
    src = _kernel(serial_and_atomic())
    assert _fallbacks(src) == ["cutlass.Int32(-1)", "cutlass.Int32(1000)"], src


def test_scalar_value_through_a_view():
    src = _kernel(scalar_value())
    assert _fallbacks(src) == ["pad * 2", "pad * 2"], src


@pytest.mark.parametrize("make", [lambda: ragged_copy(src="float32", dst="float16", pad=-99),
                                  shifted_rows, staged_tile, to_fragment, serial_and_atomic,
                                  scalar_value],
                         ids=["ragged", "shifted", "staged", "fragment", "serial", "scalar"])
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_builds_cubins(make, arch, tmp_path):
    assert tilecute.build_cubin(make(), arch, out_dir=str(tmp_path)).kernel_names


# ---- refusals --------------------------------------------------------------------------------------
def _refused(body: str, match: str, error=FrontendError):
    text = f'''
import tilecute.language as T

@T.prim_func
def f(A: T.Tensor((100, 100), "float32"), B: T.Tensor((128, 128), "float32")):
    with T.Kernel(2, 2, threads=128) as (bx, by):
        s = T.alloc_shared((64, 64), "float32")
        bar = T.alloc_barrier(1)
{body}
'''
    with pytest.raises(error, match=match):
        f = T.from_script(text)
        run_passes(f, "sm_90a", {}, until="validate")


def test_refusals():
    _refused("        T.annotate_safe_value({s: 1})", "'s' is a shared buffer")
    _refused("        T.annotate_safe_value({A: 1})\n        T.annotate_safe_value({A: 2})",
             "'A' already has the safe value `1`")
    _refused("        for k in T.serial(2):\n            T.annotate_safe_value({A: k})",
             "the value for 'A' is `k`")
    _refused("        T.annotate_safe_value({A: B[0, 0]})", "the value for 'A'")
    _refused("        T.annotate_safe_value({bx: 1})", "the keys are global tensors")
    _refused("        T.annotate_safe_value([A, 1])", "safe_value_map is a dict")
    _refused("        T.annotate_safe_value({A: 1e39})", "past float32's range")
    _refused("        T.annotate_safe_value({A: 1})\n"
             "        T.tma_copy(A[by * 64, bx * 64], s, barrier=bar[0])",
             "T.tma_copy from 'A', which has a T.annotate_safe_value", ValidationError)
    _refused("        T.annotate_safe_value({A: 1})\n"
             "        T.copy(A[by * 64, bx * 64], s, prefer_instruction='tma')",
             "prefer_instruction=\"tma\" from 'A', which has a T.annotate_safe_value",
             ValidationError)


def test_outside_a_kernel_is_refused():
    with pytest.raises(FrontendError, match="at the top level"):
        @T.prim_func
        def outside(A: T.Tensor((8,), "float32")):
            T.annotate_safe_value({A: 1})
            with T.Kernel(1, threads=32):
                pass


# ---- on the GPU ------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("src,dst,pad", [("float32", "float32", -99), ("float32", "float32", None),
                                         ("float32", "float16", -99), ("int8", "int32", 1000)])
def test_ragged_copy_on_gpu(src, dst, pad):
    import torch
    a = (torch.randn(70, 75, device="cuda") * 50).to(getattr(torch, src))
    b = tilecute.compile(ragged_copy(src=src, dst=dst, pad=pad), out_idx=[1])(a)
    want = torch.full((96, 96), 0 if pad is None else pad, device="cuda").to(getattr(torch, dst))
    want[:70, :75] = a.to(getattr(torch, dst))
    torch.testing.assert_close(b, want, rtol=0, atol=0)


@pytest.mark.gpu
def test_shifted_rows_on_gpu():
    import torch
    a = torch.randn(256, 256, device="cuda", dtype=torch.float16)
    b = tilecute.compile(shifted_rows(shift=5, pad=7), out_idx=[1])(a)
    want = torch.full_like(a, 7.0)
    want[5:] = a[:-5]
    torch.testing.assert_close(b, want, rtol=0, atol=0)


@pytest.mark.gpu
def test_staged_fragment_and_elementwise_on_gpu():
    import torch
    a = torch.randn(100, 100, device="cuda")
    b = tilecute.compile(staged_tile(), out_idx=[1])(a)
    want = torch.full((128, 128), -2.5, device="cuda")
    want[:100, :100] = a
    torch.testing.assert_close(b, want, rtol=0, atol=0)

    a = torch.randn(50, 60, device="cuda", dtype=torch.float16)
    b = tilecute.compile(to_fragment(), out_idx=[1])(a)
    want = torch.full((64, 64), 6.0, device="cuda")
    want[:50, :60] = a.float() * 2
    torch.testing.assert_close(b, want, rtol=0, atol=0)

    a = torch.randn(70, 75, device="cuda")
    b = tilecute.compile(elementwise(), out_idx=[1])(a)
    want = torch.full((96, 96), -99.0, device="cuda")
    want[:70, :75] = a
    torch.testing.assert_close(b, want, rtol=0, atol=0)


@pytest.mark.gpu
def test_serial_atomic_and_scalar_on_gpu():
    import torch
    a = torch.randint(-50, 50, (8, 30), dtype=torch.int32, device="cuda")
    c = torch.zeros(100, dtype=torch.int32, device="cuda")
    s = torch.zeros(8, 32, dtype=torch.int32, device="cuda")
    p = torch.zeros(128, dtype=torch.int32, device="cuda")
    tilecute.compile(serial_and_atomic())(a, c, s, p)
    want = torch.full((8, 32), -2, dtype=torch.int32, device="cuda")
    want[:, :30] = a * 2
    assert torch.equal(s, want)
    assert p[:100].tolist() == [0] * 100 and p[100:].tolist() == [1000] * 28
    assert c.tolist() == [1] * 100

    a = torch.randint(-100, 100, (3, 64), dtype=torch.int8, device="cuda")
    b = tilecute.compile(scalar_value(), out_idx=[1])(a, 21)
    pad = torch.full((64, 64), 42, dtype=torch.int32, device="cuda")
    pad[:3] = a.int()
    below = torch.full((64, 64), 42, dtype=torch.int32, device="cuda")
    below[:2] = a[1:].int()
    assert torch.equal(b, pad + below)
