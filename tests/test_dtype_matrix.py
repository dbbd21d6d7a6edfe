"""The dtype matrix of TileLang's core tile ops (tests/dtype_matrix.py's cells: T.copy with and
without TMA, 1-D / 2-D tiles and tails, T.fill / T.clear, elementwise +, *, max, every cast,
T.if_then_else, same-width T.reinterpret, the eight reductions on both dims with clear
True / False, T.cumsum, the atomics, T.gemm) over 15 dtypes, against TileLang 0.1.15's verdict
(tests/golden/dtype_matrix_tilelang.json: which cells it lowers for sm_90a and sm_80,
recorded by ``python tests/dtype_matrix.py tilelang <json>`` under TileLang's interpreter).

CPU: a cell TileLang lowers builds with tilecute (a sample of them: the source keeps the
cell's dtype), or is refused by name where tilecute has no such instruction (atomics of 8- /
16-bit, fp8, bool and float64 max / min); the cells the matrix found broken build cubins for
both archs and their source shows what decides the value.
GPU (``pytest -q -m gpu tests/test_dtype_matrix.py``): copies of every dtype, integer
reductions that wrap, float64 staying float64, bool reductions, fp8 max and saturating casts,
reversed cumsum, tile atomics and an int8 GEMM, each against torch."""

import json
import pathlib
import re

import pytest

import tilecute
import rounds
import dtype_matrix as M

_arch = rounds.use_arch("TILECUTE_ARCH", "CUTE_DSL_ARCH")

CELLS = M.cells()
VERDICT = json.loads((pathlib.Path(__file__).parent / "golden" / "dtype_matrix_tilelang.json").read_text())
ARCHS = ("sm_90a", "sm_80")

CUTE = {"int8": "Int8", "uint8": "Uint8", "int16": "Int16", "uint16": "Uint16", "int32": "Int32",
        "uint32": "Uint32", "int64": "Int64", "uint64": "Uint64", "float16": "Float16",
        "bfloat16": "BFloat16", "float32": "Float32", "float64": "Float64",
        "float8_e4m3": "Float8E4M3FN", "float8_e5m2": "Float8E5M2", "bool": "Boolean"}
ATOMIC_ADD = ("int32", "uint32", "int64", "uint64", "float32", "float64", "float16", "bfloat16")
ATOMIC_MINMAX = ("int32", "uint32", "int64", "uint64", "float32", "float16", "bfloat16")


def lowered_by_tilelang(arch):
    return sorted(n for n in CELLS if n not in VERDICT["refused"][arch])


def refusal(name, arch="sm_90a"):
    """What tilecute's error says for a cell TileLang lowers but tilecute refuses, else None:
    atomics with no instruction of that dtype, and on sm_80 fp8 values that convert (TileLang's
    CUDA headers convert them in software there; CuTe DSL's cvt of e4m3 / e5m2 is sm_89+)."""
    cell = CELLS[name]
    if cell.op.startswith("atomic_"):
        kind = cell.op.split("_")[1]
        if kind == "add" and cell.dtype not in ATOMIC_ADD or \
                kind != "add" and cell.dtype not in ATOMIC_MINMAX:
            if cell.op.endswith("return_prev"):
                return f"T.atomic_{kind}: return_prev=True: 'B' is {cell.dtype}"
            return f"T.atomic_{kind} into 'B' ({cell.dtype}): atomic " + \
                ("add takes" if kind == "add" else "max/min take")
        return None
    moves_bits = cell.op.startswith(("copy", "clear", "fill", "reinterpret_to_"))
    if arch == "sm_80" and "float8" in name and not moves_bits:
        return "float8 values convert only on sm_89+"
    return None


def source(name, arch="sm_90a"):
    return tilecute.compile(M.load(CELLS[name], "tilecute"), target=arch).get_kernel_source()


def test_verdict_is_the_generators():
    assert VERDICT["cells"] == len(CELLS)
    for arch in ARCHS:
        assert set(VERDICT["refused"][arch]) <= set(CELLS)
    # what TileLang refuses involves bool (its bool vectors, max / min / bitand of bools) or
    # is a bitwise reduction of floats
    for arch in ARCHS:
        for n in VERDICT["refused"][arch]:
            assert "bool" in n or CELLS[n].op.startswith("reduce_bit") and CELLS[n].dtype not in M.INTS, n


# every 9th cell TileLang lowers (casts and reinterprets included), both archs
SAMPLE = [(n, arch) for arch in ARCHS for n in lowered_by_tilelang(arch)[::9 if arch == "sm_90a" else 23]]


@pytest.mark.parametrize("name,arch", SAMPLE)
def test_cell_tilelang_lowers_builds_or_is_refused_by_name(name, arch):
    expected = refusal(name, arch)
    if expected is not None:
        with pytest.raises(Exception) as err:
            source(name, arch)
        assert "prim_func 'main'" in str(err.value) and expected in str(err.value)
        return
    body = rounds.kernel_body(source(name, arch))
    if CELLS[name].op.startswith("atomic_"):  # (on global elements: no register of the dtype)
        kind = CELLS[name].op.split("_")[1]
        assert re.search(rf'tca\.atomic_{kind}(_view)?\(|tca\.atomic_fetch\(B, .*"{kind}"', body)
        return
    assert f"cutlass.{CUTE[CELLS[name].dtype]}" in body
    if CELLS[name].op.startswith(("cast_to_", "reinterpret_to_")):
        assert CUTE[CELLS[name].op.split("_to_")[1]] in body


# the cells the matrix found broken (a refusal where TileLang lowers, or a cubin that failed),
# each with what now decides its value in the generated source
FIXED = {
    "reduce_bitor_d1_acc__bool": 'tcr.grouped_rows(',  # or, then onto B's values
    "reduce_bitxor_d0__bool": '"bitxor"',  # parity
    "reduce_sum_d1_acc__bool": '"sum"',  # any (a bool row through shared memory)
    "reduce_sum_d0__float8_e4m3": '"sum"',  # combined through Float32, rounded back
    "reduce_max_d1_acc__float8_e5m2": '"max"',
    "reduce_absmax_d1__float8_e5m2": "cutlass.Float8E5M2(cute.math.absf(cutlass.Float32(",
    "cumsum_shared_d1_rev__float8_e4m3": "warp_inclusive_scan",
    "cast_to_float8_e5m2__float8_e4m3": "cutlass.Float8E5M2(cutlass.Float32(",
    "cast_to_float8_e4m3__float8_e5m2": "cutlass.Float8E4M3FN(cutlass.Float32(",
    "copy1d_tail__bool": "B[",  # no TMA: CuTe's tensor maps have no Boolean
}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("name", sorted(FIXED))
def test_fixed_cell_builds_a_cubin(name, arch):
    assert name not in VERDICT["refused"][arch]
    if refusal(name, arch):  # (fp8 on sm_80)
        with pytest.raises(Exception, match="prim_func 'main'.*float8 values convert only on sm_89"):
            source(name, arch)
        return
    kernel = tilecute.compile(M.load(CELLS[name], "tilecute"), target=arch)
    body = rounds.kernel_body(kernel)
    assert FIXED[name] in body
    if name.startswith("copy"):
        assert "TMA" not in body and "tma" not in body
    assert kernel.ensure_cubin()


def test_max_of_bools_stays_bool():
    """(TileLang 0.1.15 fails on this cell: its bool vector type.)  T.max of two bools is
    their or, a Boolean: cutlass.max gives an Int32, which the bool store refused."""
    kernel = tilecute.compile(M.load(CELLS["max__bool"], "tilecute"), target="sm_90a")
    assert "cutlass.Boolean(cutlass.max(a[" in rounds.kernel_body(kernel)
    assert kernel.ensure_cubin()


@pytest.mark.parametrize("name,expected", [
    ("atomic_add_tile__int8", "statement `T.atomic_add(B[0:32, 0:32], a)`: T.atomic_add into 'B' "
                              "(int8): atomic add takes int32"),
    ("atomic_add_scalar__float8_e4m3", "T.atomic_add into 'B' (float8_e4m3): atomic add takes"),
    ("reduce_bitand_d0__bool", "T.reduce_bitand: 'a' is bool; bitwise reductions take integers, "
                               "and bool for bitor / bitxor"),
    ("cumsum_shared_d0__bool", "T.cumsum: 's' is bool; T.cumsum scans numbers"),
    ("reduce_sum_d0__float8_e4m3", "T.reduce_sum of float8_e4m3 values: float8 values convert "
                                   "only on sm_89+"),
])
def test_refusal_names_the_statement(name, expected):
    with pytest.raises(Exception, match="prim_func 'main'") as err:
        source(name, "sm_80" if "float8" in name else "sm_90a")
    assert expected in str(err.value)


# ---- on the GPU ------------------------------------------------------------------------------
def _torch_dtype(d):
    import torch

    return {"float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}.get(d) or getattr(torch, d)


def _run(name, *args):
    tilecute.compile(M.load(CELLS[name], "tilecute"))(*args)


_SIGNED = {8: "int8", 16: "int16", 32: "int32", 64: "int64"}


def _signed(t):
    """``t``'s bits as the signed integer dtype of its width (torch's uint16/32/64 have
    few CUDA kernels: compare, convert and fill through their signed twins)."""
    import torch

    return t.view(getattr(torch, _SIGNED[t.element_size() * 8])) if t.dtype != torch.bool else t


def _zeros(shape, d):
    import torch

    return torch.zeros(shape, dtype=getattr(torch, _SIGNED[M.WIDTH[d]]), device="cuda").view(_torch_dtype(d))


def _ints(shape, d, lo=None, hi=None):
    """Random integers of dtype ``d`` in [lo, hi) (default: every value of the width)."""
    import torch

    signed = getattr(torch, _SIGNED[M.WIDTH[d]])
    info = torch.iinfo(signed)
    lo, hi = info.min if lo is None else lo, info.max if hi is None else hi
    t = torch.randint(max(lo, -2**62), min(hi, 2**62), shape, dtype=torch.int64).to(signed)
    return t.cuda().view(_torch_dtype(d))


@pytest.mark.gpu
@pytest.mark.parametrize("d", M.DTYPES)
@pytest.mark.parametrize("op", ["copy2d_tail", "copy2d_notma", "copy1d_tail"])
def test_gpu_copy_every_dtype(op, d):
    import torch

    shape = (100, 64) if op.startswith("copy2d") else (200,)
    if d == "bool":
        a = torch.rand(shape, device="cuda") > 0.5
    elif d in M.INTS:
        a = _ints(shape, d)
    else:
        a = (torch.randn(shape, device="cuda") * 4).to(_torch_dtype(d))
    b = _zeros(shape, d)
    _run(f"{op}__{d}", a, b)
    assert torch.equal(b.view(torch.uint8), a.view(torch.uint8))


@pytest.mark.gpu
@pytest.mark.parametrize("d", ["int8", "uint8", "int16", "int32"])
def test_gpu_integer_sum_wraps(d):
    import torch

    a = _ints((32, 16), d)
    b = _zeros(32, d)
    _run(f"reduce_sum_d1__{d}", a, b)
    bits = torch.iinfo(a.dtype).bits
    want = a.to(torch.int64).sum(1) % (1 << bits)
    if d.startswith("int"):
        want = torch.where(want >= 1 << (bits - 1), want - (1 << bits), want)
    assert torch.equal(b.to(torch.int64), want)


@pytest.mark.gpu
def test_gpu_float64_sum_stays_float64():
    import torch

    a = torch.randn(32, 16, dtype=torch.float64, device="cuda") * 1e10 + 1
    b = torch.zeros(16, dtype=torch.float64, device="cuda")
    _run("reduce_sum_d0__float64", a, b)
    torch.testing.assert_close(b, a.sum(0), rtol=1e-13, atol=1e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["reduce_sum_d1_acc__bool", "reduce_bitor_d1_acc__bool",
                                  "reduce_bitxor_d0__bool", "reduce_bitxor_d1_acc__bool"])
def test_gpu_bool_reductions(name):
    import torch

    a = torch.rand(32, 16, device="cuda") > 0.8
    dim = 0 if "_d0" in name else 1
    b = torch.rand(a.shape[1 - dim], device="cuda") > 0.5
    init = b.clone() if name.endswith("_acc__bool") else torch.zeros_like(b)
    _run(name, a, b)
    if "bitxor" in name:
        want = (a.sum(dim) % 2 == 1) ^ init
    else:  # sum and bitor of bools: any
        want = a.any(dim) | init
    assert torch.equal(b, want)


@pytest.mark.gpu
@pytest.mark.parametrize("d", ["float8_e4m3", "float8_e5m2"])
def test_gpu_fp8_max_and_absmax(d):
    import torch

    a = (torch.randn(32, 16, device="cuda") * 8).to(_torch_dtype(d))
    b = _zeros(16, d)
    _run(f"reduce_max_d0__{d}", a, b)
    assert torch.equal(b.float(), a.float().max(0).values)
    c = _zeros(32, d)
    _run(f"reduce_absmax_d1__{d}", a, c)
    assert torch.equal(c.float(), a.float().abs().max(1).values)


@pytest.mark.gpu
def test_gpu_fp8_casts_saturate():
    """TileLang's cast to fp8 is __nv_cvt_float2_to_fp8x2(..., __NV_SATFINITE, ...): past
    the largest finite value it is that value, not NaN / inf."""
    import torch

    a = torch.linspace(-1000, 1000, 1024, device="cuda").reshape(32, 32)
    c = _zeros((32, 32), "float8_e4m3")
    _run("cast_to_float8_e4m3__float32", a, a, c)
    assert torch.equal(c.float(), a.clamp(-448, 448).to(torch.float8_e4m3fn).float())
    e5 = (torch.linspace(-3e4, 3e4, 1024, device="cuda").reshape(32, 32)).to(torch.float8_e5m2)
    c = _zeros((32, 32), "float8_e4m3")
    _run("cast_to_float8_e4m3__float8_e5m2", e5, e5, c)
    assert torch.equal(c.float(), e5.float().clamp(-448, 448).to(torch.float8_e4m3fn).float())


@pytest.mark.gpu
@pytest.mark.parametrize("scope", ["shared", "fragment"])
def test_gpu_int32_cumsum_reverse(scope):
    import torch

    a = _ints((32, 32), "int32", -1000, 1000)
    b = torch.zeros_like(a)
    _run(f"cumsum_{scope}_d1_rev__int32", a, b)
    assert torch.equal(b, a.flip(1).cumsum(1).flip(1).to(torch.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("d", ["int32", "uint32", "int64", "float64"])
def test_gpu_tile_atomic_add(d):
    import torch

    a = _ints((32, 32), d, 0, 1000) if d != "float64" else \
        torch.randn(32, 32, dtype=torch.float64, device="cuda")
    b = _zeros((32, 32), d)
    _run(f"atomic_add_tile__{d}", a, b)
    if d == "float64":
        torch.testing.assert_close(b, 4 * a)
    else:  # (values under 4000: the signed view reads them)
        assert torch.equal(_signed(b).to(torch.int64), 4 * _signed(a).to(torch.int64))


@pytest.mark.gpu
def test_gpu_int8_gemm():
    import torch

    a, b = _ints((64, 64), "int8"), _ints((64, 64), "int8")
    c = _zeros((64, 64), "int32")
    _run("gemm__int8", a, b, c)
    assert torch.equal(c.to(torch.int64), a.to(torch.int64).cpu().matmul(b.to(torch.int64).cpu().T).cuda())
