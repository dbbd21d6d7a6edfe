"""TMA descriptor parameters in the generated launcher (docs/launch-abi.md, "TMA descriptors").

Launch ABIs written by hand with 0, 2 and 4 descriptors (tiled, and one im2col) are
rendered and built the way a cache entry's launcher is (``tilecute.toolchain.build_launcher``,
here with ``-Wall -Wextra -Werror``) and loaded through TVM FFI; no GPU is needed:

- render time: every rule of cuda.h that the ABI alone decides raises ``LauncherABIError``;
- launch time, before any driver call: CPU tensors reach the per-tensor TMA checks;
- the driver path runs in a subprocess against the fake ``libcuda.so.1`` of ``tests/fake_cuda``
  with its ``cuTensorMapEncodeTiled`` / ``cuTensorMapEncodeIm2col``, which log their
  arguments and write a descriptor saying which encode made it;
- the cubin check takes a 128-byte, 64-byte aligned parameter.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
tvm_ffi = pytest.importorskip("tvm_ffi")

import tilecute  # noqa: E402
from fake_cuda import (  # noqa: E402
    TESTS,
    FakeTensor,
    driver_env,
    fake_libcuda,
    needs_no_driver,
    parse_encode,
    parse_launch,
    raises,
    text_cubin,
)
from tilecute.toolchain import build_launcher  # noqa: E402
from tilecute.host.launcher import LauncherABIError, launcher_context, render_launcher, write_launcher  # noqa: E402
from tilecute.runtime.abi import (  # noqa: E402
    KernelLaunch,
    KernelParam,
    LaunchABI,
    ScalarArg,
    SymbolSpec,
    TensorArg,
    TmaSpec,
)
from tilecute.runtime.cubin import ABIMismatch, CubinInfo, CubinKernel, CubinParam, check_abi  # noqa: E402

VERSION = tilecute.__version__


def desc(name: str, arg: str, dtype: str, **spec) -> KernelParam:
    return KernelParam(name, "tma_desc", dtype, arg, tma=TmaSpec(**spec))


def ptr(arg: str, dtype: str) -> KernelParam:
    return KernelParam(f"{arg}_ptr", "pointer", dtype, arg)


def sym(name: str) -> KernelParam:
    return KernelParam(name, "scalar", "int32", name, from_symbol=True)


# -- the launch ABIs ----------------------------------------------------------------------------

# No descriptor: the launcher has no TMA code and asks the driver for no tensor-map entry point.
COPY = LaunchABI(
    function="copy_rows",
    args=(TensorArg("X", "float16", ("M", 64), None, 16), TensorArg("Y", "float16", ("M", 64), None, 16)),
    symbols=(SymbolSpec("M", 0, "shape", 0),),
    kernels=(KernelLaunch("copy_rows_kernel", ("sym_M", "1", "1"), (64, 1, 1),
                          (ptr("X", "float16"), ptr("Y", "float16"), sym("M"))),),
)

# Two tiled descriptors in one kernel.  A is contiguous; B has declared strides, its inner
# stride a symbol too, so the launcher's own TMA check is what keeps it 1.
GEMM = LaunchABI(
    function="gemm_tma",
    args=(
        TensorArg("A", "float16", ("M", "K"), None, 16),
        TensorArg("B", "float16", ("N", "K"), ("sb", "sk"), 16),
        TensorArg("C", "float32", ("M", "N")),
        ScalarArg("alpha", "float32"),
    ),
    symbols=(SymbolSpec("M", 0, "shape", 0), SymbolSpec("K", 0, "shape", 1), SymbolSpec("N", 1, "shape", 0),
             SymbolSpec("sb", 1, "stride", 0), SymbolSpec("sk", 1, "stride", 1)),
    kernels=(
        KernelLaunch(
            "gemm_tma_kernel", ("tc_ceildiv(sym_M, 128)", "tc_ceildiv(sym_N, 64)", "1"), (128, 1, 1),
            (desc("A_desc", "A", "float16", box=(128, 64), swizzle=128, l2_promotion=256),
             desc("B_desc", "B", "float16", box=(64, 64), swizzle=128, oob_fill="nan"),
             ptr("C", "float32"), KernelParam("alpha", "scalar", "float32", "alpha"), sym("M"), sym("N")),
            dynamic_smem=96 * 1024,
        ),
    ),
)

# Four descriptors over three tensors in two kernels: an im2col over X (N, H, W, C), tiled over
# the filter and over Y twice (the second interleaved by 32 bytes, so Y's address and strides
# must be 32-byte multiples).  None of the tensors declares an alignment: TMA's is checked.
CONV = LaunchABI(
    function="conv_tma",
    args=(
        TensorArg("X", "float16", ("Nb", "H", "W", "C")),
        TensorArg("Wt", "bfloat16", ("K", "R", "S", "C2")),
        TensorArg("Y", "float32", ("Nb", "H", "W", "K")),
    ),
    symbols=(SymbolSpec("Nb", 0, "shape", 0), SymbolSpec("H", 0, "shape", 1), SymbolSpec("W", 0, "shape", 2),
             SymbolSpec("C", 0, "shape", 3), SymbolSpec("K", 1, "shape", 0), SymbolSpec("R", 1, "shape", 1),
             SymbolSpec("S", 1, "shape", 2), SymbolSpec("C2", 1, "shape", 3)),
    kernels=(
        KernelLaunch(
            "conv_fprop", ("tc_ceildiv(sym_Nb * sym_H * sym_W, 128)", "1", "1"), (128, 1, 1),
            (desc("X_desc", "X", "float16", mode="im2col", swizzle=128, lower_corner=(-1, -2),
                  upper_corner=(-1, 0), channels_per_pixel=64, pixels_per_column=128),
             desc("W_desc", "Wt", "bfloat16", box=(64, 1, 1, 64), swizzle=128, l2_promotion=128),
             desc("Y_desc", "Y", "float32", box=(1, 8, 8, 32), element_strides=(1, 2, 2, 1), swizzle=128)),
        ),
        KernelLaunch(
            "conv_epilogue", ("sym_Nb", "1", "1"), (32, 1, 1),
            (desc("Y_desc", "Y", "float32", box=(1, 4, 4, 8), swizzle=32, interleave=32), ptr("Y", "float32")),
        ),
    ),
)

ABIS = {abi.function: abi for abi in (COPY, GEMM, CONV)}

# CUtensorMapDataType / swizzle / L2 / OOB enum values (cuda.h) as the fake driver logs them
FLOAT16, FLOAT32, BFLOAT16 = 6, 7, 9
SWIZZLE_32B, SWIZZLE_128B = 1, 3
INTERLEAVE_32B = 2
L2_128B, L2_256B = 2, 3
OOB_NAN = 1


# -- render ---------------------------------------------------------------------------------------


def test_rendered_descriptor_block():
    source = render_launcher(GEMM, tilecute_version=VERSION)
    # the tensor's global layout is checked with the arguments, before any driver call
    assert 'const TcTmaGlobal tma_A = tc_tma_global(tc_launcher, t_A, nullptr, "A", 2, 16);' in source
    assert 'const TcTmaGlobal tma_B = tc_tma_global(tc_launcher, t_B, strides_B, "B", 2, 16);' in source
    # a stack CUtensorMap per descriptor, its address in the parameter array
    assert "  CUtensorMap k0_A_desc;  // TMA descriptor over A, encoded below (kTmaDescriptors[0])" in source
    assert "void* k0_params[] = { &k0_A_desc, &k0_B_desc, &k0_C_ptr, &k0_alpha, &k0_M, &k0_N };" in source
    # one row per descriptor, in tensor axis order, with a comment naming argument, mode, box, swizzle
    assert ("    // 0: kernel 'gemm_tma_kernel' parameter 'A_desc': A float16[M, K], tiled, box [128, 64], "
            "swizzle 128B, L2 promotion 256B, out-of-bounds zero\n"
            '    { "gemm_tma_kernel", "A_desc", "A", CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2,\n'
            "      { 128, 64, 0, 0, 0 }, { 1, 1, 0, 0, 0 },\n"
            "      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, "
            "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,\n") in source
    # encoded on every call, after the argument checks and before the launch
    encode = ("  tc_require_driver(tc_launcher);\n"
              "  // kernel 'gemm_tma_kernel' parameter 'A_desc': A float16[M, K], tiled, box [128, 64], swizzle 128B, "
              "L2 promotion 256B, out-of-bounds zero\n"
              "  tc_encode_tma_tiled(tc_launcher, &k0_A_desc, tma_A, kTmaDescriptors[0]);\n"
              "  // kernel 'gemm_tma_kernel' parameter 'B_desc': B float16[N, K], tiled, box [64, 64], swizzle 128B, "
              "out-of-bounds NaN\n"
              "  tc_encode_tma_tiled(tc_launcher, &k0_B_desc, tma_B, kTmaDescriptors[1]);\n"
              "  const TcLaunch launches[kNumKernels] = {\n")
    assert encode in source
    assert source.index("TC_PHASE_MARK(kPhaseChecks)") < source.index(encode) < source.index("tc_launch_kernels(")
    assert "constexpr bool kEncodesTiledTma = true;" in source
    assert "constexpr bool kEncodesIm2colTma = false;" in source
    # the ABI's JSON form renders the same launcher
    assert render_launcher(LaunchABI.from_json(GEMM.to_json()), tilecute_version=VERSION) == source


def test_rendered_im2col_and_shared_tensor():
    source = render_launcher(CONV, tilecute_version=VERSION)
    # Y serves two descriptors: one global layout, with the interleave-32 granule
    assert source.count("tc_tma_global(tc_launcher, t_Y,") == 1
    assert 'const TcTmaGlobal tma_Y = tc_tma_global(tc_launcher, t_Y, nullptr, "Y", 4, 32);' in source
    assert "tc_encode_tma_im2col(tc_launcher, &k0_X_desc, tma_X, kTmaDescriptors[0]);" in source
    assert "tc_encode_tma_tiled(tc_launcher, &k1_Y_desc, tma_Y, kTmaDescriptors[3]);" in source
    assert ("X float16[Nb, H, W, C], im2col, lower corner [-1, -2], upper corner [-1, 0], 64 channels per pixel, "
            "128 pixels per column, swizzle 128B, out-of-bounds zero") in source
    assert "      { -1, -2, 0 }, { -1, 0, 0 }, 64, 128 }," in source
    assert "constexpr bool kEncodesIm2colTma = true;" in source
    context = launcher_context(CONV, tilecute_version=VERSION)
    assert [d["index"] for d in context["tma_descriptors"]] == [0, 1, 2, 3]


def test_no_descriptor_no_tma_code():
    source = render_launcher(COPY, tilecute_version=VERSION)
    call = source[source.index("void call_copy_rows("):]
    for tma_code in ("CUtensorMap ", "tc_tma_global", "tc_encode_tma", "tc_require_driver"):
        assert tma_code not in call
    assert "kTmaDescriptors" not in source
    assert "constexpr bool kEncodesTiledTma = false;" in source
    assert "constexpr bool kEncodesIm2colTma = false;" in source


# -- render-time rules (cuda.h), each a LauncherABIError naming kernel, parameter, argument, rule ----

ONE = LaunchABI(
    function="one_desc",
    args=(TensorArg("A", "float16", ("M", 64)), TensorArg("V", "float16", (2, "M", 8, 64)),
          TensorArg("U", "uint8", ("M", 64)), TensorArg("E", "float8_e4m3", ("M", 64)),
          TensorArg("F", "float16", ("M", 64)), ScalarArg("s", "float16")),
    symbols=(SymbolSpec("M", 0, "shape", 0),),
    kernels=(KernelLaunch("k", ("1", "1", "1"), (32, 1, 1), ()),),
)


def with_desc(param: KernelParam) -> LaunchABI:
    return dataclasses.replace(ONE, kernels=(dataclasses.replace(ONE.kernels[0], params=(param,)),))


def tiled(arg="A", dtype="float16", **spec) -> KernelParam:
    spec.setdefault("box", (64, 64))
    return desc("d", arg, dtype, **spec)


def im2col(**spec) -> KernelParam:
    base = dict(mode="im2col", lower_corner=(0, 0), upper_corner=(0, 0), channels_per_pixel=64,
                pixels_per_column=32)
    return desc("d", "V", "float16", **{**base, **spec})


VIOLATIONS = [
    ("no spec", KernelParam("d", "tma_desc", "float16", "A"), "needs its TmaSpec"),
    ("scalar source", desc("d", "s", "float16", box=(64,)), "needs a tensor argument, got 's'"),
    ("missing source", desc("d", "Q", "float16", box=(64,)), "needs a tensor argument, got 'Q'"),
    ("dtype", tiled(dtype="bfloat16"), "the descriptor is bfloat16 but the argument is float16"),
    ("mode", tiled(mode="gather4"), "mode must be one of ('tiled', 'im2col'), got 'gather4'"),
    ("im2col rank", desc("d", "A", "float16", mode="im2col", channels_per_pixel=8, pixels_per_column=8),
     "im2col mode needs a tensor of rank 3 to 5, the argument has rank 2"),
    ("box length", tiled(box=(64,)), "box has 1 entries for rank 2"),
    ("box zero", tiled(box=(0, 64)), "box[0] must be in 1..256, got 0"),
    ("box too big", tiled(box=(257, 64)), "box[0] must be in 1..256, got 257"),
    ("element strides length", tiled(element_strides=(1,)), "element_strides has 1 entries for rank 2"),
    ("element stride 9", tiled(element_strides=(9, 1)), "element_strides[0] must be in 1..8, got 9"),
    ("element stride 0", tiled(element_strides=(1, 0)), "element_strides[1] must be in 1..8, got 0"),
    ("swizzle", tiled(swizzle=16), "swizzle must be one of (0, 32, 64, 128) (bytes), got 16"),
    ("interleave", tiled(interleave=8), "interleave must be one of (0, 16, 32) (bytes), got 8"),
    ("l2 promotion", tiled(l2_promotion=32), "l2_promotion must be one of (0, 64, 128, 256) (bytes), got 32"),
    ("oob fill", tiled(oob_fill="inf"), "oob_fill must be one of ('zero', 'nan'), got 'inf'"),
    ("nan for integers", tiled("U", "uint8", oob_fill="nan"),
     "oob_fill 'nan' needs a floating-point TMA data type, uint8 travels as UINT8"),
    ("nan for float8", tiled("E", "float8_e4m3", oob_fill="nan"),
     "oob_fill 'nan' needs a floating-point TMA data type, float8_e4m3 travels as UINT8"),
    ("interleave rank", tiled(interleave=16), "interleave 16 needs a tensor of rank 3 or more"),
    ("interleave 32 swizzle", desc("d", "V", "float16", box=(1, 4, 4, 16), interleave=32, swizzle=64),
     "interleave 32 needs swizzle 32, got swizzle 64"),
    ("inner box bytes", tiled(box=(64, 4)),
     "without interleave the inner box (box[1] * 2 bytes = 8 bytes) must be a multiple of 16 bytes"),
    ("inner box over swizzle", tiled(box=(8, 64), swizzle=64),
     "with swizzle 64 the inner box (box[1] * 2 bytes = 128 bytes) must be at most 64 bytes"),
    ("im2col fields on tiled", tiled(channels_per_pixel=8), "are im2col fields; a tiled descriptor leaves them unset"),
    ("im2col box", im2col(box=(1, 1, 1, 64)), "box must be empty, got [1, 1, 1, 64]"),
    ("im2col corner length", im2col(lower_corner=(0,)),
     "lower_corner has 1 entries; rank 4 im2col needs one per spatial axis (2)"),
    ("im2col corner range", im2col(upper_corner=(0, 128)), "upper_corner[1] must be in [-128, 127] for rank 4, got 128"),
    ("im2col corner low", im2col(lower_corner=(-129, 0)), "lower_corner[0] must be in [-128, 127] for rank 4, got -129"),
    ("channels", im2col(channels_per_pixel=257), "channels_per_pixel must be in 1..256, got 257"),
    ("channels zero", im2col(channels_per_pixel=0), "channels_per_pixel must be in 1..256, got 0"),
    ("pixels", im2col(pixels_per_column=1025), "pixels_per_column must be in 1..1024, got 1025"),
    ("im2col inner over swizzle", im2col(channels_per_pixel=64, swizzle=64),
     "with swizzle 64 the inner box (channels_per_pixel * 2 bytes = 128 bytes) must be at most 64 bytes"),
]


@pytest.mark.parametrize("param, rule", [v[1:] for v in VIOLATIONS], ids=[v[0] for v in VIOLATIONS])
def test_render_refuses_a_descriptor_that_breaks_a_rule(param, rule):
    with pytest.raises(LauncherABIError) as info:
        render_launcher(with_desc(param), tilecute_version=VERSION)
    message = str(info.value)
    assert message.startswith("one_desc: kernel 'k' parameter 'd'")
    assert rule in message
    if param.tma is not None and param.source in ("A", "V", "U", "E"):
        assert message.startswith(f"one_desc: kernel 'k' parameter 'd' (TMA descriptor over argument "
                                  f"'{param.source}'): ")


@pytest.mark.parametrize("param", [
    tiled(box=(256, 8)),                                         # 16-byte inner box, no swizzle
    tiled(box=(1, 32), swizzle=64, element_strides=(8, 1)),      # 64 bytes under swizzle 64
    tiled("U", "uint8", box=(2, 128), swizzle=128),
    tiled("E", "float8_e4m3", box=(2, 16), swizzle=32, oob_fill="zero"),
    tiled("F", "float16", box=(3, 8), l2_promotion=64, oob_fill="nan"),
    desc("d", "V", "float16", box=(1, 4, 4, 8), interleave=32, swizzle=32),   # interleave: any inner box
    desc("d", "V", "float16", box=(1, 2, 8, 12), interleave=16),
    im2col(lower_corner=(-128, 127), upper_corner=(127, -128), channels_per_pixel=256, pixels_per_column=1024),
], ids=["box-256", "swizzle-64", "uint8", "float8", "nan-fill", "interleave-32", "interleave-16", "im2col-limits"])
def test_render_accepts_the_edges_of_each_rule(param):
    source = render_launcher(with_desc(param), tilecute_version=VERSION)
    assert f"tc_encode_tma_{param.tma.mode}(tc_launcher, &k0_d, tma_{param.source}, kTmaDescriptors[0]);" in source


# -- build and load -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def launchers(tmp_path_factory) -> dict[str, Path]:
    """function name -> built launcher.so; the three build in parallel."""
    root = tmp_path_factory.mktemp("tma_launchers")

    def build(abi: LaunchABI) -> Path:
        folder = root / abi.function
        folder.mkdir()
        source = write_launcher(abi, folder, tilecute_version=VERSION)
        return build_launcher(source, folder, extra_cflags=("-Wall", "-Wextra", "-Werror"))

    with ThreadPoolExecutor(len(ABIS)) as pool:
        return dict(zip(ABIS, pool.map(build, ABIS.values())))


@pytest.fixture(scope="module")
def mods(launchers):
    return {name: tvm_ffi.load_module(str(path)) for name, path in launchers.items()}


def test_launchers_build_and_load(mods):
    for name, mod in mods.items():
        for export in (name, "__tilecute_set_cubin", "__tilecute_ensure_device", "cleanup"):
            assert callable(mod[export]), (name, export)


# -- launch-time checks of the tensors that descriptors read (before any driver call) ----------


def f16(*shape):
    return torch.zeros(*shape, dtype=torch.float16)


def gemm_args(m=256, n=128, k=64, a=None, b=None):
    a = f16(m, k) if a is None else a
    b = f16(n, k) if b is None else b
    return a, b, torch.zeros(a.shape[0], b.shape[0]), 1.0


def test_tma_checks_come_with_the_argument_checks(mods):
    f = mods["gemm_tma"]["gemm_tma"]
    # every rule holds: the call gets as far as the device check (CPU tensors)
    raises(ValueError, ["gemm_tma: argument 'A': expected a CUDA tensor, got cpu"], f, *gemm_args())
    # A (contiguous): the row stride K * 2 bytes must be a multiple of 16
    raises(ValueError, ["gemm_tma: argument 'A': TMA needs strides[0] in bytes to be a multiple of 16 and below 2^40, "
                        "got 100 (200 bytes)"], f, *gemm_args(k=100))
    # B (declared strides): its row stride, and its inner stride, which the ABI leaves free
    b = f16(128, 130)[:, :64]
    raises(ValueError, ["gemm_tma: argument 'B': TMA needs strides[0] in bytes to be a multiple of 16 and below 2^40, "
                        "got 130 (260 bytes)"], f, *gemm_args(b=b))
    b = f16(128, 128)[:, ::2]
    raises(ValueError, ["gemm_tma: argument 'B': TMA needs the last axis contiguous (strides[1] == 1), got 2"],
           f, *gemm_args(b=b))
    # a strided view whose strides are 16-byte multiples is fine
    raises(ValueError, ["expected a CUDA tensor, got cpu"], f, *gemm_args(b=f16(128, 72)[:, :64]))
    # every extent in [1, 2^32]: a tensor without elements has no descriptor
    raises(ValueError, ["gemm_tma: argument 'A': TMA needs every extent in [1, 2^32], got shape [0, 64]"],
           f, *gemm_args(m=0))
    # a size-1 axis never moves the address: its stride is not held against it
    raises(ValueError, ["expected a CUDA tensor, got cpu"], f, *gemm_args(m=1, k=4, n=1))


def test_tma_alignment_and_interleave_granule(mods):
    g = mods["conv_tma"]["conv_tma"]
    x, w, y = f16(2, 8, 8, 64), torch.zeros(32, 3, 3, 64, dtype=torch.bfloat16), torch.zeros(2, 8, 8, 32)
    raises(ValueError, ["conv_tma: argument 'X': expected a CUDA tensor, got cpu"], g, x, w, y)
    # X declares no alignment: the descriptor's 16 bytes are checked
    shifted = f16(2 * 8 * 8 * 64 + 8)[1:2 * 8 * 8 * 64 + 1].view(2, 8, 8, 64)
    raises(ValueError, ["conv_tma: argument 'X': TMA needs the data pointer (data + byte_offset) aligned to 16 bytes, "
                        "got ", "(2 bytes past a 16-byte boundary)"], g, shifted, w, y)
    # Y is read by an interleave-32 descriptor: 32-byte address and strides
    fake_y = FakeTensor((2, 8, 8, 32), device="cpu", data=0x10000, byte_offset=16)
    raises(ValueError, ["conv_tma: argument 'Y': TMA needs the data pointer (data + byte_offset) aligned to 32 bytes, "
                        "got 0x10010 (16 bytes past a 32-byte boundary)"], g, x, w, fake_y)
    raises(ValueError, ["conv_tma: argument 'Y': TMA needs strides[2] in bytes to be a multiple of 32 and below 2^40, "
                        "got 4 (16 bytes)"], g, x, torch.zeros(4, 3, 3, 64, dtype=torch.bfloat16), torch.zeros(2, 8, 8, 4))


@needs_no_driver
def test_encoding_needs_the_driver(mods):
    a = FakeTensor((256, 64), "float16")
    b = FakeTensor((128, 64), "float16")
    c = FakeTensor((256, 128), "float32")
    raises(RuntimeError, ["gemm_tma: no CUDA driver (libcuda.so.1 could not be loaded: "], mods["gemm_tma"]["gemm_tma"],
           a, b, c, 1.0)


# -- the driver path, against the fake libcuda.so.1 with tensor-map encoding ---------------------

DRIVER_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import tvm_ffi
from fake_cuda import FakeTensor, open_driver

paths = json.loads(sys.argv[2])
cuda = open_driver()
out = {}

def drain():
    launches = cuda.fake_log().decode().splitlines()
    encodes = cuda.fake_tma_log().decode().splitlines()
    cuda.fake_clear_log()
    cuda.fake_clear_tma_log()
    return {"launches": [l for l in launches if l.startswith("launch")], "encodes": encodes}

def error(fn, *args):
    try:
        fn(*args)
    except Exception as e:
        return [type(e).__name__, str(e).splitlines()[0]]
    return None

def requests(fn, *args):
    cuda.fake_clear_requests()
    fn(*args)
    return [line.split()[0] for line in cuda.fake_requests().decode().splitlines()]

mods = {name: tvm_ffi.load_module(path) for name, path in paths["launchers"].items()}
for mod in mods.values():
    mod["__tilecute_set_cubin"](paths["cubin"])

x = FakeTensor((300, 64), "float16", data=0x100000)
out["copy_requests"] = requests(mods["copy_rows"]["copy_rows"], x, x)
drain()

gemm = mods["gemm_tma"]["gemm_tma"]
a = FakeTensor((300, 64), "float16", data=0x200000)
b = FakeTensor((200, 64), "float16", strides=(72, 1), data=0x300000)
c = FakeTensor((300, 200), "float32", data=0x400000)
out["gemm_requests"] = requests(gemm, a, b, c, 2.0)
gemm(a, b, c, 2.0)
a2 = FakeTensor((300, 64), "float16", data=0x280000)
gemm(a2, b, c, 2.0)
out["gemm"] = drain()
cuda.fake_fail_next_encode(500)
out["encode_failure"] = error(gemm, a, b, c, 2.0)
out["after_failure"] = drain()

conv = mods["conv_tma"]["conv_tma"]
X = FakeTensor((2, 16, 16, 64), "float16", data=0x500000)
W = FakeTensor((128, 3, 3, 64), "bfloat16", data=0x600000)
Y = FakeTensor((2, 16, 16, 128), "float32", data=0x700000)
out["conv_requests"] = requests(conv, X, W, Y)
out["conv"] = drain()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def driver(launchers, tmp_path_factory):
    """What the fake driver saw when DRIVER_SCRIPT called the three launchers."""
    root = tmp_path_factory.mktemp("fake_cuda_tma")
    cubin = text_cubin(root / "fake.cubin", [k for abi in ABIS.values() for k in abi.kernels])
    paths = {"launchers": {name: str(p) for name, p in launchers.items()}, "cubin": str(cubin)}
    run = subprocess.run([sys.executable, "-c", DRIVER_SCRIPT, str(TESTS), json.dumps(paths)],
                         capture_output=True, text=True, env=driver_env(fake_libcuda(tensor_maps=True)),
                         timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def descriptor_bytes(encode_number: int, address: int) -> str:
    return struct.pack("<3Q", 0x414D54, encode_number, address).hex() + "00" * (128 - 24)


def test_driver_resolves_encoders_only_when_used(driver):
    assert "cuTensorMapEncodeTiled" not in driver["copy_requests"]
    assert "cuTensorMapEncodeIm2col" not in driver["copy_requests"]
    assert driver["gemm_requests"][-1] == "cuTensorMapEncodeTiled"  # after the others, before cuInit
    assert "cuTensorMapEncodeIm2col" not in driver["gemm_requests"]
    assert driver["conv_requests"][-2:] == ["cuTensorMapEncodeTiled", "cuTensorMapEncodeIm2col"]


def test_driver_encodes_tiled_descriptors_in_tma_order(driver):
    encodes = [parse_encode(line) for line in driver["gemm"]["encodes"]]
    assert len(encodes) == 6  # two descriptors, three calls: encoded on every call
    a, b = encodes[:2]
    assert a == {"mode": "tiled", "type": FLOAT16, "rank": 2, "address": 0x200000, "dims": [64, 300],
                 "strides": [128], "box": [64, 128], "element_strides": [1, 1],
                 "interleave": 0, "swizzle": SWIZZLE_128B, "l2": L2_256B, "oob": 0}
    # declared strides: the row stride 72 elements = 144 bytes
    assert b == {"mode": "tiled", "type": FLOAT16, "rank": 2, "address": 0x300000, "dims": [64, 200],
                 "strides": [144], "box": [64, 64], "element_strides": [1, 1],
                 "interleave": 0, "swizzle": SWIZZLE_128B, "l2": 0, "oob": OOB_NAN}
    assert encodes[4]["address"] == 0x280000  # a new tensor, a new descriptor: nothing is cached


def test_driver_passes_each_descriptor_by_value(driver):
    launches = [parse_launch(line) for line in driver["gemm"]["launches"]]
    assert len(launches) == 3
    first = launches[0]
    assert (first["symbol"], first["grid"], first["smem"]) == ("gemm_tma_kernel", "3,4,1", str(96 * 1024))
    a_desc, b_desc, c_ptr, alpha, m, n = first["params"]
    assert a_desc == descriptor_bytes(1, 0x200000)  # the 128 bytes the encoder wrote
    assert b_desc == descriptor_bytes(2, 0x300000)
    assert c_ptr == struct.pack("<Q", 0x400000).hex()
    assert (alpha, m, n) == (struct.pack("<f", 2.0).hex(), struct.pack("<i", 300).hex(), struct.pack("<i", 200).hex())
    assert launches[1]["params"][:2] == [descriptor_bytes(3, 0x200000), descriptor_bytes(4, 0x300000)]
    assert launches[2]["params"][:2] == [descriptor_bytes(5, 0x280000), descriptor_bytes(6, 0x300000)]


def test_driver_encode_failure_is_a_runtime_error(driver):
    kind, message = driver["encode_failure"]
    assert kind == "RuntimeError"
    assert message == ("gemm_tma: argument 'A': encoding TMA descriptor 'A_desc' of kernel 'gemm_tma_kernel' failed: "
                       "cuTensorMapEncodeTiled returned CUDA_ERROR_NOT_FOUND (fake driver error)")
    assert driver["after_failure"]["launches"] == []  # nothing launched


def test_driver_encodes_im2col_and_interleaved_descriptors(driver):
    x, w, y0, y1 = (parse_encode(line) for line in driver["conv"]["encodes"])
    # X (2, 16, 16, 64) float16: corners (D, H, W) in the ABI become (W, H) for TMA
    assert x == {"mode": "im2col", "type": FLOAT16, "rank": 4, "address": 0x500000, "dims": [64, 16, 16, 2],
                 "strides": [128, 2048, 32768], "lower": [-2, -1], "upper": [0, -1], "channels": 64, "pixels": 128,
                 "element_strides": [1, 1, 1, 1], "interleave": 0, "swizzle": SWIZZLE_128B, "l2": 0, "oob": 0}
    assert w == {"mode": "tiled", "type": BFLOAT16, "rank": 4, "address": 0x600000, "dims": [64, 3, 3, 128],
                 "strides": [128, 384, 1152], "box": [64, 1, 1, 64], "element_strides": [1, 1, 1, 1],
                 "interleave": 0, "swizzle": SWIZZLE_128B, "l2": L2_128B, "oob": 0}
    assert y0 == {"mode": "tiled", "type": FLOAT32, "rank": 4, "address": 0x700000, "dims": [128, 16, 16, 2],
                  "strides": [512, 8192, 131072], "box": [32, 8, 8, 1], "element_strides": [1, 2, 2, 1],
                  "interleave": 0, "swizzle": SWIZZLE_128B, "l2": 0, "oob": 0}
    assert y1["interleave"] == INTERLEAVE_32B and y1["swizzle"] == SWIZZLE_32B and y1["box"] == [8, 4, 4, 1]
    fprop, epilogue = (parse_launch(line) for line in driver["conv"]["launches"])
    # encodes 1 to 6 were the gemm calls'
    assert fprop["params"] == [descriptor_bytes(n, addr) for n, addr in
                               ((7, 0x500000), (8, 0x600000), (9, 0x700000))]
    assert epilogue["params"] == [descriptor_bytes(10, 0x700000), struct.pack("<Q", 0x700000).hex()]


# -- the cubin check and the 128-byte parameter ----------------------------------------------------


def test_check_abi_takes_a_128_byte_descriptor_aligned_to_64():
    k = CONV.kernels[1]  # (Y_desc: 128 bytes, align 64; Y_ptr: 8 bytes)
    assert [(p.size, p.align) for p in k.params] == [(128, 64), (8, 8)]
    launch = KernelLaunch("k", ("1", "1", "1"), (32, 1, 1),
                          (ptr("Y", "float32"), k.params[0], sym("Nb"), k.params[0]))
    # sm_90: parameters start at c[0x0][0x210] and alignment is absolute, so the descriptor
    # after an 8-byte pointer sits at 48 (0x210 + 48 = 0x240)
    assert launch.param_offsets() == [0, 48, 176, 240]
    abi = dataclasses.replace(CONV, kernels=(launch,))
    table = (CubinParam(0, 0, 8), CubinParam(1, 48, 128), CubinParam(2, 176, 4), CubinParam(3, 240, 128))
    check_abi(CubinInfo("k.cubin", "sm_90a", {"k": CubinKernel("k", table, 368)}), abi)
    # a kernel that took the descriptor by pointer instead is refused
    by_pointer = (CubinParam(0, 0, 8), CubinParam(1, 8, 8), CubinParam(2, 16, 4), CubinParam(3, 240, 128))
    with pytest.raises(ABIMismatch, match="parameter 'Y_desc': the launch ABI packs it at offset 48 with size 128"):
        check_abi(CubinInfo("k.cubin", "sm_90a", {"k": CubinKernel("k", by_pointer, 368)}), abi)


# A kernel taking two 128-byte, 64-byte aligned descriptors by value (CUDA 13's CUtensorMap is
# aligned to 128, so a struct of the ABI's alignment stands in for it).
DESC_KERNEL_CU = r"""
struct alignas(64) TmaDescriptor { unsigned long long opaque[16]; };
extern "C" __global__ void two_desc(const __grid_constant__ TmaDescriptor a, float* p, int n,
                                    const __grid_constant__ TmaDescriptor b) {
  if (threadIdx.x == 0) p[n] = static_cast<float>(a.opaque[0] + b.opaque[1]);
}
"""

TWO_DESC = LaunchABI(
    function="two_desc",
    args=(TensorArg("A", "float16", ("M", 64)), TensorArg("P", "float32", ("M",))),
    symbols=(SymbolSpec("M", 0, "shape", 0),),
    kernels=(KernelLaunch("two_desc", ("1", "1", "1"), (32, 1, 1),
                          (desc("a", "A", "float16", box=(8, 64)), ptr("P", "float32"), sym("M"),
                           desc("b", "A", "float16", box=(16, 64)))),),
)


def _desc_cubin(tmp_path: Path, arch: str) -> Path:
    pytest.importorskip("elftools")
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc to build a real cubin")
    source = tmp_path / "two_desc.cu"
    source.write_text(DESC_KERNEL_CU)
    cubin = tmp_path / f"two_desc_{arch}.cubin"
    subprocess.run([nvcc, "-cubin", f"-arch={arch}", str(source), "-o", str(cubin)],
                   check=True, capture_output=True, text=True)
    return cubin


def test_real_cubin_with_descriptors_matches_the_abi_on_sm_90a(tmp_path):
    from tilecute.runtime.cubin import read_cubin

    info = read_cubin(str(_desc_cubin(tmp_path, "sm_90a")))
    assert [(p.offset, p.size) for p in info.kernels["two_desc"].params] == [(48, 128), (176, 8), (184, 4), (240, 128)]
    check_abi(info, TWO_DESC)


@pytest.mark.xfail(strict=True, raises=ABIMismatch, reason=(
    "KernelLaunch.param_offsets counts alignment from sm_90's parameter bank base (0x210); on sm_100 "
    "parameters start 64-byte aligned (0x380), so the cubin has the descriptor at 0, not 48.  The "
    "driver places kernelParams by the cubin's own table, so the launch is right; only the check refuses."))
def test_real_cubin_with_descriptors_matches_the_abi_on_sm_100a(tmp_path):
    from tilecute.runtime.cubin import read_cubin

    info = read_cubin(str(_desc_cubin(tmp_path, "sm_100a")))
    assert [(p.offset, p.size) for p in info.kernels["two_desc"].params] == [(0, 128), (128, 8), (136, 4), (192, 128)]
    check_abi(info, TWO_DESC)


# -- on a GPU (-m gpu): real descriptors, real TMA loads, checked against torch -------------------

# Three kernels, each issuing one kind of TMA load through the descriptor it takes by value and
# copying what landed in shared memory out to global memory.
TMA_KERNELS_CU = r"""
#include <cuda.h>
#include <cuda_fp16.h>
#include <cstdint>

__device__ inline uint32_t smem(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

// One thread: init the barrier, announce the bytes; everyone waits for phase 0.
__device__ inline void bar_init(uint64_t* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem(bar)));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

__device__ inline void bar_expect(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(smem(bar)), "r"(bytes) : "memory");
}

__device__ inline void bar_wait(uint64_t* bar) {
  uint32_t done = 0;
  while (!done) {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(smem(bar)) : "memory");
  }
}

// X (M, N) float32, box (8, 32): block (bx, by) copies its tile to out.
extern "C" __global__ void tma_tile2d(const __grid_constant__ CUtensorMap src, float* out, int M, int N) {
  __shared__ alignas(128) float tile[8][32];
  __shared__ alignas(8) uint64_t bar;
  if (threadIdx.x == 0) bar_init(&bar);
  __syncthreads();
  if (threadIdx.x == 0) {
    bar_expect(&bar, sizeof(tile));
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                 :: "r"(smem(tile)), "l"(reinterpret_cast<uint64_t>(&src)), "r"(blockIdx.x * 32), "r"(blockIdx.y * 8),
                    "r"(smem(&bar)) : "memory");
  }
  bar_wait(&bar);
  for (int r = 0; r < 8; ++r) {
    const int row = blockIdx.y * 8 + r, col = blockIdx.x * 32 + threadIdx.x;
    if (row < M && col < N) out[row * N + col] = tile[r][threadIdx.x];
  }
}

// Y (A, B, C) float16, box (4, 8, 64) with element strides (2, 1, 1): rows 0 and 2 of axis 0.
extern "C" __global__ void tma_strided3d(const __grid_constant__ CUtensorMap src, __half* out) {
  __shared__ alignas(128) __half box[2][8][64];
  __shared__ alignas(8) uint64_t bar;
  if (threadIdx.x == 0) bar_init(&bar);
  __syncthreads();
  if (threadIdx.x == 0) {
    bar_expect(&bar, sizeof(box));
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];"
                 :: "r"(smem(box)), "l"(reinterpret_cast<uint64_t>(&src)), "r"(0), "r"(0), "r"(0), "r"(smem(&bar))
                 : "memory");
  }
  bar_wait(&bar);
  for (int i = threadIdx.x; i < 2 * 8 * 64; i += blockDim.x) out[i] = (&box[0][0][0])[i];
}

// Z (Nb, H, W, 64) float16, im2col: 64 pixels of 64 channels from pixel (n0, h0, w0).
extern "C" __global__ void tma_im2col(const __grid_constant__ CUtensorMap src, __half* out, int w0, int h0, int n0) {
  __shared__ alignas(128) __half column[64][64];
  __shared__ alignas(8) uint64_t bar;
  if (threadIdx.x == 0) bar_init(&bar);
  __syncthreads();
  if (threadIdx.x == 0) {
    bar_expect(&bar, sizeof(column));
    const uint16_t zero = 0;
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};"
                 :: "r"(smem(column)), "l"(reinterpret_cast<uint64_t>(&src)), "r"(0), "r"(w0), "r"(h0), "r"(n0),
                    "r"(smem(&bar)), "h"(zero), "h"(zero) : "memory");
  }
  bar_wait(&bar);
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) out[i] = (&column[0][0])[i];
}
"""

IM2COL_LOWER, IM2COL_UPPER = (-1, -2), (0, -1)  # (H, W), tensor axis order

GPU_CHECK = LaunchABI(
    function="tma_gpu_check",
    args=(
        TensorArg("X", "float32", ("M", "N"), ("sx", 1), 16), TensorArg("O1", "float32", ("M", "N")),
        TensorArg("Y", "float16", ("A", "B", "C")), TensorArg("O2", "float16", (2, 8, 64)),
        TensorArg("Z", "float16", ("Nb", "H", "W", 64)), TensorArg("O3", "float16", (64, 64)),
        ScalarArg("w0", "int32"), ScalarArg("h0", "int32"), ScalarArg("n0", "int32"),
    ),
    symbols=(SymbolSpec("M", 0, "shape", 0), SymbolSpec("N", 0, "shape", 1), SymbolSpec("sx", 0, "stride", 0),
             SymbolSpec("A", 2, "shape", 0), SymbolSpec("B", 2, "shape", 1), SymbolSpec("C", 2, "shape", 2),
             SymbolSpec("Nb", 4, "shape", 0), SymbolSpec("H", 4, "shape", 1), SymbolSpec("W", 4, "shape", 2)),
    kernels=(
        KernelLaunch("tma_tile2d", ("tc_ceildiv(sym_N, 32)", "tc_ceildiv(sym_M, 8)", "1"), (32, 1, 1),
                     (desc("X_desc", "X", "float32", box=(8, 32)), ptr("O1", "float32"), sym("M"), sym("N"))),
        KernelLaunch("tma_strided3d", ("1", "1", "1"), (64, 1, 1),
                     (desc("Y_desc", "Y", "float16", box=(4, 8, 64), element_strides=(2, 1, 1)),
                      ptr("O2", "float16"))),
        KernelLaunch("tma_im2col", ("1", "1", "1"), (64, 1, 1),
                     (desc("Z_desc", "Z", "float16", mode="im2col", lower_corner=IM2COL_LOWER,
                           upper_corner=IM2COL_UPPER, channels_per_pixel=64, pixels_per_column=64),
                      ptr("O3", "float16"), KernelParam("w0", "scalar", "int32", "w0"),
                      KernelParam("h0", "scalar", "int32", "h0"), KernelParam("n0", "scalar", "int32", "n0"))),
    ),
)


def im2col_reference(z, w0: int, h0: int, n0: int, pixels: int = 64):
    """The column TMA loads: pixels walk W, then H, then N through the bounding box
    [lower, extent - 1 + upper] of each spatial axis, from pixel (n0, h0, w0); outside the
    tensor they read zero."""
    nb, h, w, c = z.shape
    (lo_h, lo_w), (up_h, up_w) = IM2COL_LOWER, IM2COL_UPPER
    hb, wb = h + up_h - lo_h, w + up_w - lo_w
    out = torch.zeros(pixels, c, dtype=z.dtype, device=z.device)
    start = (n0 * hb + (h0 - lo_h)) * wb + (w0 - lo_w)
    for p in range(pixels):
        n, rest = divmod(start + p, hb * wb)
        y, x = rest // wb + lo_h, rest % wb + lo_w
        if n < nb and 0 <= y < h and 0 <= x < w:
            out[p] = z[n, y, x]
    return out


@pytest.mark.gpu
def test_gpu_descriptors_load_what_torch_holds(tmp_path):
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("needs an sm_90+ GPU")
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc to build the TMA kernels")
    source = tmp_path / "tma_kernels.cu"
    source.write_text(TMA_KERNELS_CU)
    major, minor = torch.cuda.get_device_capability()
    cubin = tmp_path / "tma_kernels.cubin"
    subprocess.run([nvcc, "-cubin", f"-arch=sm_{major}{minor}a", str(source), "-o", str(cubin)],
                   check=True, capture_output=True, text=True)
    launcher = write_launcher(GPU_CHECK, tmp_path, tilecute_version=VERSION)
    mod = tvm_ffi.load_module(str(build_launcher(launcher, tmp_path / "build")))
    mod["__tilecute_set_cubin"](str(cubin))
    f = mod["tma_gpu_check"]

    cuda = dict(device="cuda")
    x = torch.randn(50, 108, **cuda)[:, :100]  # declared strides: rows 432 bytes apart
    y = torch.randn(5, 9, 64, **cuda).half()
    z = torch.randn(2, 5, 6, 64, **cuda).half()
    o1, o2, o3 = torch.zeros(50, 100, **cuda), torch.zeros(2, 8, 64, **cuda).half(), torch.zeros(64, 64, **cuda).half()
    for w0, h0, n0 in ((IM2COL_LOWER[1], IM2COL_LOWER[0], 0), (1, 2, 0)):
        f(x, o1, y, o2, z, o3, w0, h0, n0)
        torch.cuda.synchronize()
        assert torch.equal(o1, x)  # every tile, the partial ones at the edges too
        assert torch.equal(o2, y[0:4:2, 0:8, :])  # element stride 2 on axis 0 (TMA's outermost)
        assert torch.equal(o3, im2col_reference(z, w0, h0, n0)), (w0, h0, n0)
    # a new tensor at a new address: the descriptor is encoded again
    x2 = torch.randn(50, 100, **cuda)
    f(x2, o1, y, o2, z, o3, 0, 0, 0)
    torch.cuda.synchronize()
    assert torch.equal(o1, x2)
    mod["cleanup"]()
