"""The generated C++ launcher: rendered from hand-written launch ABIs, built, loaded through
TVM FFI, and called with CPU torch tensors and memory-less DLPack tensors.

No GPU is needed.  Every argument check runs before the launcher touches the driver, so
CPU tensors reach all of them; DLPack tensors that claim to live on a CUDA device (they own
no memory, the launcher only reads their fields) reach the device and grid checks and the
driver.  The driver path itself runs in a subprocess against a fake ``libcuda.so.1`` that
records what the launcher asks of it.

Four launchers are built once per module, in parallel.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jinja2
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
    parse_launch,
    raises,
    text_cubin,
)
from tilecute.toolchain import (  # noqa: E402
    LAUNCHER_LIBRARY,
    LauncherBuildError,
    build_launcher,
    cuda_include_dir,
    cxx_version,
)
from tilecute.host.launcher import (  # noqa: E402
    TEMPLATE,
    LauncherABIError,
    launcher_context,
    render_launcher,
    template_environment,
    write_launcher,
)
from tilecute.runtime.abi import (  # noqa: E402
    KernelLaunch,
    KernelParam,
    LaunchABI,
    ScalarArg,
    SymbolSpec,
    TensorArg,
)

VERSION = tilecute.__version__

# -- the launch ABIs ------------------------------------------------------------------------


def ptr(arg: str, dtype: str) -> KernelParam:
    return KernelParam(f"{arg}_ptr", "pointer", dtype, arg)


def sym(name: str, dtype: str = "int32") -> KernelParam:
    return KernelParam(name, "scalar", dtype, name, from_symbol=True)


VECTOR_ADD = LaunchABI(
    function="vector_add",
    args=(
        TensorArg("A", "float16", ("N",), None, 16),
        TensorArg("B", "float16", ("N",), None, 16),
        TensorArg("C", "float16", ("N",), None, 16),
    ),
    symbols=(SymbolSpec("N", 0, "shape", 0, divisibility=8),),
    kernels=(
        KernelLaunch(
            "vector_add_kernel", ("tc_ceildiv(sym_N, 256)", "1", "1"), (256, 1, 1),
            (ptr("A", "float16"), ptr("B", "float16"), ptr("C", "float16"), sym("N")),
        ),
    ),
)

# Declared symbolic strides.  M is bound by Y (the second argument), so X's shape[0] is
# compared after Y is read; sx is bound by X and shared with Z.
COPY2D = LaunchABI(
    function="copy2d",
    args=(
        TensorArg("X", "float32", ("M", 64), ("sx", 1)),
        TensorArg("Y", "float32", ("M", 64), ("sy", 1)),
        TensorArg("Z", "float32", ("M", 64), ("sx", 1)),
    ),
    symbols=(
        SymbolSpec("M", 1, "shape", 0),
        SymbolSpec("sx", 0, "stride", 0, divisibility=4),
        SymbolSpec("sy", 1, "stride", 0),
    ),
    kernels=(
        KernelLaunch(
            "copy2d_kernel", ("tc_ceildiv(sym_M, 4)", "1", "1"), (128, 1, 1),
            (ptr("X", "float32"), ptr("Y", "float32"), ptr("Z", "float32"),
             sym("M"), sym("sx"), sym("sy")),
        ),
    ),
)

AXPY = LaunchABI(
    function="axpy",
    args=(
        ScalarArg("alpha", "float32"),
        TensorArg("X", "float32", ("N",)),
        TensorArg("Y", "float32", ("N",)),
        ScalarArg("n", "int32"),
        ScalarArg("flag", "bool"),
        ScalarArg("beta", "float16"),
        ScalarArg("gamma", "bfloat16"),
        ScalarArg("count", "uint8"),
    ),
    symbols=(SymbolSpec("N", 1, "shape", 0),),
    kernels=(
        KernelLaunch(
            "axpy_kernel", ("tc_ceildiv(sym_N, 128)", "1", "1"), (128, 1, 1),
            (
                ptr("X", "float32"), ptr("Y", "float32"),
                KernelParam("alpha", "scalar", "float32", "alpha"),
                KernelParam("n", "scalar", "int32", "n"),
                KernelParam("flag", "scalar", "bool", "flag"),
                KernelParam("beta", "scalar", "float16", "beta"),
                KernelParam("gamma", "scalar", "bfloat16", "gamma"),
                KernelParam("count", "scalar", "uint8", "count"),
                sym("N", "int64"),
            ),
        ),
    ),
)

# Two kernels: the first needs 64 KiB of dynamic shared memory, the second runs in clusters
# of 16 blocks (a non-portable size).  W is rank 3, contiguous.
TWO_STAGE = LaunchABI(
    function="two_stage",
    args=(TensorArg("X", "float32", ("M", "K")), TensorArg("Y", "float32", ("M",)),
          TensorArg("W", "float32", ("M", "K", 4))),
    symbols=(SymbolSpec("M", 0, "shape", 0), SymbolSpec("K", 0, "shape", 1)),
    kernels=(
        KernelLaunch(
            "two_stage_reduce", ("tc_ceildiv(sym_M, 64)", "tc_min(sym_K, 4)", "tc_max(tc_floordiv(sym_K, 100), 1)"),
            (64, 1, 1), (ptr("X", "float32"), ptr("Y", "float32"), ptr("W", "float32"), sym("M"), sym("K")),
            dynamic_smem=64 * 1024,
        ),
        KernelLaunch(
            "two_stage_finish", ("sym_M", "1", "1"), (32, 4, 1), (ptr("Y", "float32"), sym("M")),
            cluster=(16, 1, 1),
        ),
    ),
)

# No tensor argument (TileLang's `def k(n: T.int32): with T.Kernel(threads=32): ...`): the
# call launches on the caller's current device.
NO_TENSORS = LaunchABI(
    function="no_tensors",
    args=(ScalarArg("n", "int32"),),
    symbols=(),
    kernels=(KernelLaunch("no_tensors_kernel", ("1", "1", "1"), (32, 1, 1),
                          (KernelParam("n", "scalar", "int32", "n"),)),),
)

ABIS = {abi.function: abi for abi in (VECTOR_ADD, COPY2D, AXPY, TWO_STAGE, NO_TENSORS)}


# -- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def launchers(tmp_path_factory) -> dict[str, Path]:
    """function name -> built launcher.so, one build per ABI, built in parallel."""
    root = tmp_path_factory.mktemp("launchers")

    def build(abi: LaunchABI) -> Path:
        folder = root / abi.function
        folder.mkdir()
        source = write_launcher(abi, folder, tilecute_version=VERSION)
        # -Werror: the generated code must build without warnings.
        return build_launcher(source, folder, extra_cflags=("-Wall", "-Wextra", "-Werror"))

    with ThreadPoolExecutor(len(ABIS)) as pool:
        built = dict(zip(ABIS, pool.map(build, ABIS.values())))
    return built


@pytest.fixture(scope="module")
def mods(launchers):
    return {name: tvm_ffi.load_module(str(path)) for name, path in launchers.items()}


def f16(n, **kw):
    return torch.zeros(n, dtype=torch.float16, **kw)


# -- render and build -------------------------------------------------------------------------


def test_builds_and_loads_with_every_export(mods, launchers):
    for name, mod in mods.items():
        assert launchers[name].name == LAUNCHER_LIBRARY
        for export in (name, "__tilecute_set_cubin", "__tilecute_ensure_device", "cleanup"):
            assert callable(mod[export])


def test_generated_source_names_function_and_version():
    source = render_launcher(VECTOR_ADD, tilecute_version=VERSION)
    assert source.splitlines()[0] == (
        f"// Launcher for `vector_add`, generated by tilecute {VERSION} (launch ABI version 1)."
    )
    # the launcher's description, which the runtime reads
    assert 'extern const TcLauncher tc_launcher = {\n    "vector_add", 3, "A, B, C",' in source
    assert '{ "vector_add_kernel", { "ceildiv(N, 256)", "1", "1" }, { 256, 1, 1 }, { 0, 0, 0 }, 0, false, false, false, false },' in source
    assert "const int64_t k0_grid_x = tc_ceildiv(sym_N, 256);" in source
    assert "int32_t k0_N = static_cast<int32_t>(sym_N);  // symbol N as int32" in source
    assert "void* k0_params[] = { &k0_A_ptr, &k0_B_ptr, &k0_C_ptr, &k0_N };" in source
    # rendering is deterministic
    assert source == render_launcher(VECTOR_ADD, tilecute_version=VERSION)


def test_missing_template_variable_fails_loudly():
    context = launcher_context(VECTOR_ADD, tilecute_version=VERSION)
    template = template_environment().get_template(TEMPLATE)
    del context["arg_names"]
    with pytest.raises(jinja2.UndefinedError):
        template.render(**context)
    context = launcher_context(VECTOR_ADD, tilecute_version=VERSION)
    del context["kernels"][0]["params"][0]["init"]
    with pytest.raises(jinja2.UndefinedError):
        template.render(**context)


@pytest.mark.parametrize("abi, message", [
    (LaunchABI("cleanup", VECTOR_ADD.args, VECTOR_ADD.symbols, VECTOR_ADD.kernels), "reserved"),
    (LaunchABI("f", (TensorArg("A", "float16", ("N",)),), (), VECTOR_ADD.kernels),
     "names symbol 'N', which the launch ABI does not declare"),
    (LaunchABI("f", VECTOR_ADD.args, VECTOR_ADD.symbols, (
        KernelLaunch("k", ("sym_Q", "1", "1"), (32, 1, 1), ()),)), "undeclared symbols ['Q']"),
    (LaunchABI("f", VECTOR_ADD.args, VECTOR_ADD.symbols, (
        KernelLaunch("k", ("1", "1", "1"), (32, 1, 1), (ptr("A", "float32"),)),)),
     "points to float32 but argument 'A' is float16"),
    (LaunchABI("f", VECTOR_ADD.args, VECTOR_ADD.symbols, (
        KernelLaunch("k", ("1", "1", "1"), (32, 1, 1), (KernelParam("d", "tma_desc", "float16", "A"),)),)),
     "TMA descriptor"),
    (LaunchABI("f", VECTOR_ADD.args, (SymbolSpec("N", 0, "shape", 1),), VECTOR_ADD.kernels),
     "bound by argument 'A' shape[1]"),
    (LaunchABI("f", VECTOR_ADD.args, VECTOR_ADD.symbols, (
        KernelLaunch("k", ("1", "1", "1"), (1024, 2, 1), ()),)), "not a valid CUDA block"),
    # a symbol bound from the first carrier given: carriers on tensors the caller may pass
    # as None only (A must be given), starting at the binding place
    (LaunchABI("f", VECTOR_ADD.args, (SymbolSpec("N", 0, "shape", 0, carriers=((0, "shape", 0),)),),
               VECTOR_ADD.kernels), "carrier #0 (0, 'shape', 0) is not a dim of a tensor the caller may pass as None"),
    (LaunchABI("f", (TensorArg("A", "float16", ("N",), nullable=True),) + VECTOR_ADD.args[1:],
               (SymbolSpec("N", 0, "shape", 0, carriers=((1, "shape", 0),)),), VECTOR_ADD.kernels),
     "do not start at its binding place"),
])
def test_render_refuses_an_abi_it_cannot_serve(abi, message):
    with pytest.raises(LauncherABIError, match=None) as info:
        render_launcher(abi, tilecute_version=VERSION)
    assert message in str(info.value)
    assert str(info.value).startswith(f"{abi.function}: ")


def test_an_abi_without_tensors_launches_on_the_current_device():
    # TileLang's kernels without tensor parameters (`def k(): with T.Kernel(threads=32)`):
    # no tensor to take the device from, so the call launches on the caller's current device
    abi = LaunchABI("f", (ScalarArg("n", "int32"),), (), (
        KernelLaunch("k", ("1", "1", "1"), (32, 1, 1), (KernelParam("n", "scalar", "int32", "n"),)),))
    source = render_launcher(abi, tilecute_version=VERSION)
    assert "const int device_id = tc_current_device(tc_launcher);" in source
    assert "tc_check_cuda" not in source


def test_build_helpers(tmp_path):
    assert (cuda_include_dir() / "cuda.h").is_file()
    assert (cuda_include_dir() / "cudaTypedefs.h").is_file()
    assert cxx_version() and "\n" not in cxx_version()
    broken = tmp_path / "broken.cpp"
    broken.write_text("int f( {\n")
    with pytest.raises(LauncherBuildError) as info:
        build_launcher(broken, tmp_path / "out")
    assert "broken.cpp" in str(info.value) and "error" in str(info.value)
    assert list((tmp_path / "out").iterdir()) == []  # no partial library left behind


# -- argument checks (all before any driver call) ------------------------------------------------


def test_argument_count_is_a_type_error(mods):
    f = mods["vector_add"]["vector_add"]
    a = f16(1024)
    raises(TypeError, ["vector_add: expected 3 arguments (A, B, C) and an optional stream, got 2"], f, a, a)
    raises(TypeError, ["got 5"], f, a, a, a, 0, 0)
    raises(TypeError, ["axpy: expected 8 arguments (alpha, X, Y, n, flag, beta, gamma, count)"],
           mods["axpy"]["axpy"])


def test_wrong_kind_is_a_type_error(mods):
    f = mods["vector_add"]["vector_add"]
    a = f16(1024)
    raises(TypeError, ["vector_add: argument 'B': expected a tensor, got int"], f, a, 3, a)
    raises(TypeError, ["vector_add: argument 'C': expected a tensor, got str"], f, a, a, "C")
    g = mods["axpy"]["axpy"]
    x = torch.zeros(256)
    ok = (1.0, x, x, 3, True, 0.5, 0.25, 7)
    raises(TypeError, ["axpy: argument 'alpha': expected a float, got tensor"], g, x, *ok[1:])
    raises(TypeError, ["axpy: argument 'alpha': expected a float, got bool"], g, True, *ok[1:])
    raises(TypeError, ["axpy: argument 'n': expected an int, got float"], g, *ok[:3], 3.0, *ok[4:])
    raises(TypeError, ["axpy: argument 'flag': expected a bool, got str"], g, *ok[:4], "yes", *ok[5:])
    raises(TypeError, ["axpy: argument 'stream': expected an integer CUDA stream handle or None, got str"],
           g, *ok, "stream")


def test_dtype(mods):
    f = mods["vector_add"]["vector_add"]
    a = f16(1024)
    message = raises(ValueError, [], f, a, a.float(), a)
    assert message.startswith("vector_add: argument 'B': expected dtype float16, got float32")
    raises(ValueError, ["argument 'A': expected dtype float16, got bfloat16"], f, a.bfloat16(), a, a)
    raises(ValueError, ["argument 'C': expected dtype float16, got int32"], f, a, a, a.int())


def test_rank_and_static_dims(mods):
    f = mods["vector_add"]["vector_add"]
    a = f16(1024)
    raises(ValueError, ["vector_add: argument 'A': expected rank 1, got rank 2 (shape [1, 1024])"], f, a[None], a, a)
    g = mods["copy2d"]["copy2d"]
    x = torch.zeros(8, 64)
    raises(ValueError, ["copy2d: argument 'Z': expected shape[1] == 64, got 32"], g, x, x, torch.zeros(8, 32))


def test_symbol_must_agree_across_arguments(mods):
    f = mods["vector_add"]["vector_add"]
    a = f16(1024)
    raises(ValueError, ["vector_add: argument 'B': expected shape[0] == N = 1024 (from argument 'A' shape[0]), got 1016"],
           f, a, f16(1016), a)
    # M is bound by Y (argument 1); X's shape[0] comes first and is compared right after Y's.
    g = mods["copy2d"]["copy2d"]
    raises(ValueError, ["copy2d: argument 'X': expected shape[0] == M = 8 (from argument 'Y' shape[0]), got 7"],
           g, torch.zeros(7, 64), torch.zeros(8, 64), torch.zeros(8, 64))


def test_divisibility(mods):
    f = mods["vector_add"]["vector_add"]
    a = f16(1004)
    raises(ValueError, ["vector_add: argument 'A': expected shape[0] (N) divisible by 8, got 1004"], f, a, a, a)
    g = mods["copy2d"]["copy2d"]
    x = torch.zeros(8, 66)[:, :64]  # row stride 66 is not a multiple of 4
    raises(ValueError, ["copy2d: argument 'X': expected strides[0] (sx) divisible by 4, got 66"], g, x, x, x)


def test_contiguity(mods):
    f = mods["vector_add"]["vector_add"]
    a = f16(2048)[::2]
    raises(ValueError, ["vector_add: argument 'A': expected a contiguous (row-major) tensor, got shape [1024] with strides [2]"],
           f, a, a, a)
    g = mods["two_stage"]["two_stage"]
    x = torch.zeros(64, 32).t()
    raises(ValueError, ["two_stage: argument 'X': expected a contiguous (row-major) tensor"],
           g, x, torch.zeros(32), torch.zeros(32, 64, 4))
    # size-1 dims may have any stride; a tensor without elements is contiguous whatever its
    # strides; both then get as far as the device check
    one = torch.zeros(1, 64).as_strided((1, 64), (12345, 1))
    w = torch.zeros(1, 64, 4).as_strided((1, 64, 4), (7, 4, 1))
    raises(ValueError, ["argument 'X': expected a CUDA tensor, got cpu"], g, one, torch.zeros(1), w)
    empty = torch.zeros(5, 0).t()
    raises(ValueError, ["argument 'X': expected a CUDA tensor, got cpu"], g, empty, torch.zeros(0), torch.zeros(0, 5, 4))


def test_declared_strides(mods):
    g = mods["copy2d"]["copy2d"]
    base = torch.zeros(8, 128)
    x = base[:, :64]  # strides (128, 1): sx = 128
    raises(ValueError, ["copy2d: argument 'Y': expected strides[1] == 1, got 2"], g, x, base[:, ::2], x)
    raises(ValueError, ["copy2d: argument 'Z': expected strides[0] == sx = 128 (from argument 'X' strides[0]), got 64"],
           g, x, x, torch.zeros(8, 64))
    # sy is free: Y may have its own row stride
    raises(ValueError, ["expected a CUDA tensor, got cpu"], g, x, torch.zeros(8, 64), x)


def test_extents_and_strides_fit_int32(mods):
    g = mods["copy2d"]["copy2d"]
    row = torch.zeros(64)
    huge = row.as_strided((2**31, 64), (0, 1))  # no memory beyond one row
    x = torch.zeros(8, 64)
    raises(ValueError, ["copy2d: argument 'Y': expected shape[0] (M) to fit in int32, got 2147483648"], g, x, huge, x)
    f = mods["two_stage"]["two_stage"]
    cpu = dict(device="cpu")
    raises(ValueError, ["two_stage: argument 'X': expected shape[1] (K) to fit in int32, got 2147483648"],
           f, FakeTensor((2, 2**31), **cpu), FakeTensor((2,), **cpu), FakeTensor((2, 2**31, 4), **cpu))
    # every extent fits, the contiguous outer stride K * 4 does not
    raises(ValueError, ["two_stage: argument 'W': expected strides[0] to fit in int32, got 4294967296"],
           f, FakeTensor((2, 2**30), **cpu), FakeTensor((2,), **cpu), FakeTensor((2, 2**30, 4), **cpu))


def test_alignment(mods):
    f = mods["vector_add"]["vector_add"]
    base = f16(1032)
    a = base[:1024]
    shifted = base[1:1025]  # 2 bytes past a 16-byte boundary
    assert shifted.data_ptr() % 16 == 2
    raises(ValueError, ["vector_add: argument 'C': expected the data pointer (data + byte_offset) aligned to 16 bytes",
                        f"got {hex(shifted.data_ptr())} (2 bytes past a 16-byte boundary)"], f, a, a, shifted)
    fake = FakeTensor((1024,), "float16", device="cpu", data=0x10000, byte_offset=8)
    raises(ValueError, ["argument 'A': expected the data pointer", "got 0x10008 (8 bytes past"], f, fake, a, a)


def test_scalar_ranges(mods):
    g = mods["axpy"]["axpy"]
    x = torch.zeros(256)
    raises(ValueError, ["axpy: argument 'n': expected a value that fits int32, got 4294967296"],
           g, 1.0, x, x, 2**32, True, 0.5, 0.25, 7)
    raises(ValueError, ["axpy: argument 'n': expected a value that fits int32, got an integer outside int64"],
           g, 1.0, x, x, 2**70, True, 0.5, 0.25, 7)
    raises(ValueError, ["axpy: argument 'count': expected a value that fits uint8, got -1"],
           g, 1.0, x, x, 1, True, 0.5, 0.25, -1)
    # ints are floats, bools are ints; then the call reaches the device check
    raises(ValueError, ["axpy: argument 'X': expected a CUDA tensor, got cpu"], g, 1, x, x, True, 1, 2, 3, 255)


def test_stream_argument(mods):
    f = mods["vector_add"]["vector_add"]
    a = f16(1024)
    raises(ValueError, ["vector_add: argument 'stream': expected a CUDA stream handle >= 0, got -1"], f, a, a, a, -1)
    for stream in (None, 0, 0x1234):
        raises(ValueError, ["expected a CUDA tensor, got cpu"], f, a, a, a, stream)


def test_device_checks_come_after_value_checks(mods):
    f = mods["vector_add"]["vector_add"]
    a = f16(1024)
    # a CPU tensor passes every value check, then fails on its device
    message = raises(ValueError, [], f, a, a, a)
    assert message.startswith("vector_add: argument 'A': expected a CUDA tensor, got cpu")
    # a dtype error on B wins over A being on the CPU
    raises(ValueError, ["argument 'B': expected dtype"], f, a, a.float(), a)
    c0 = FakeTensor((1024,), "float16", device="cuda:0")
    c1 = FakeTensor((1024,), "float16", device="cuda:1")
    raises(ValueError, ["vector_add: argument 'C': expected a CUDA tensor, got cpu"], f, c0, c0, a)
    raises(ValueError, ["vector_add: argument 'B': expected a tensor on cuda:0 (the device of argument 'A'), got cuda:1"],
           f, c0, c1, c0)


def test_grid_checks_before_the_driver(mods):
    f = mods["two_stage"]["two_stage"]
    raises(ValueError, ["two_stage: kernel 'two_stage_reduce': grid (0, 4, 1) has an empty dimension: "
                        "its extent along x, `ceildiv(M, 64)`, is 0"],
           f, FakeTensor((0, 8)), FakeTensor((0,)), FakeTensor((0, 8, 4)))
    raises(ValueError, ["two_stage: kernel 'two_stage_finish': grid (17, 1, 1) is not a multiple of the cluster (16, 1, 1)"],
           f, FakeTensor((17, 8)), FakeTensor((17,)), FakeTensor((17, 8, 4)))


@needs_no_driver
def test_call_without_driver_is_a_runtime_error(mods):
    f = mods["vector_add"]["vector_add"]
    c = FakeTensor((1024,), "float16")
    message = raises(RuntimeError, ["no CUDA driver (libcuda.so.1 could not be loaded: "], f, c, c, c)
    assert message.startswith("vector_add: no CUDA driver")
    raises(RuntimeError, ["vector_add: no CUDA driver"], mods["vector_add"]["__tilecute_ensure_device"], 0)


def test_auxiliary_exports(launchers, tmp_path):
    # a copy of the library is a separate dlopen, with its own cubin and slots
    copy = tmp_path / "copy2d_copy.so"
    shutil.copy(launchers["copy2d"], copy)
    mod = tvm_ffi.load_module(str(copy))
    raises(RuntimeError, ["copy2d: cannot read the cubin '", "No such file or directory"],
           mod["__tilecute_set_cubin"], str(tmp_path / "missing.cubin"))
    raises(TypeError, ["copy2d: argument 'path': expected a str, got int"], mod["__tilecute_set_cubin"], 3)
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"\x7fELF not really")
    mod["__tilecute_set_cubin"](str(cubin))
    mod["__tilecute_set_cubin"](str(cubin))  # same path again: nothing to do
    raises(ValueError, ["copy2d: the cubin is already set from"], mod["__tilecute_set_cubin"], str(tmp_path / "other"))
    raises(ValueError, ["argument 'device_id': expected a CUDA device index in [0, 64), got 64"],
           mod["__tilecute_ensure_device"], 64)
    raises(TypeError, ["copy2d: cleanup: expected no arguments, got 1 argument"], mod["cleanup"], 1)
    assert mod["cleanup"]() is None
    assert mod["cleanup"]() is None


# -- the driver path, against a fake libcuda.so.1 (tests/fake_cuda) --------------------------------

# Runs in a subprocess whose LD_LIBRARY_PATH finds the fake libcuda.so.1 first.  It makes the
# calls and prints what the fake driver saw, as JSON; the tests below check it.
DRIVER_SCRIPT = r"""
import json, shutil, sys
sys.path.insert(0, sys.argv[1])
import tvm_ffi
from fake_cuda import FakeTensor, open_driver

paths = json.loads(sys.argv[2])
cuda = open_driver()
out = {}

def log():
    text = cuda.fake_log().decode()
    cuda.fake_clear_log()
    return text.splitlines()

def error(fn, *args):
    try:
        fn(*args)
    except Exception as e:
        return [type(e).__name__, str(e).splitlines()[0]]
    return None

def state():
    return {"retains": [cuda.fake_retains(0), cuda.fake_retains(1)],
            "modules_live": cuda.fake_modules_live(), "modules_loaded": cuda.fake_modules_loaded()}

va = tvm_ffi.load_module(paths["vector_add"])
a = FakeTensor((1000,), "float16", data=0x100000)
b = FakeTensor((1000,), "float16", data=0x200000, byte_offset=32)
c = FakeTensor((1000,), "float16", data=0x300000)
cuda.fake_clear_requests()  # what the process asked before (torch, say) is not ours
out["before_set_cubin"] = error(va["vector_add"], a, b, c)
out["requests"] = cuda.fake_requests().decode().splitlines()
out["state_before"] = state()
va["__tilecute_set_cubin"](paths["cubin"])
sentinel = 0xDEAD000
cuda.fake_set_current(sentinel)
va["vector_add"](a, b, c, 0x1234)
out["current_after_call"] = cuda.fake_current()
va["vector_add"](a, b, c)
with tvm_ffi.use_raw_stream(tvm_ffi.device("cuda:0"), 0x5678):
    va["vector_add"](a, b, c)
    va["vector_add"](a, b, c, None)
    va["vector_add"](a, b, c, 0)
out["vector_add_log"] = log()
out["state_after_calls"] = state()

a1 = FakeTensor((1000,), "float16", device="cuda:1")
va["vector_add"](a1, a1, a1, 7)
out["device1_log"] = log()
out["state_two_devices"] = state()

cuda.fake_fail_next_launch(701)
out["launch_failure"] = error(va["vector_add"], a, b, c)
out["bad_device"] = error(va["__tilecute_ensure_device"], 5)
log()

va["cleanup"]()
out["state_after_cleanup"] = state()
va["cleanup"]()
out["state_after_second_cleanup"] = state()
out["cleanup_log"] = log()
out["current_after_cleanup"] = cuda.fake_current()
va["vector_add"](a, b, c, 1)
out["state_after_relaunch"] = state()
va["cleanup"]()
log()

ax = tvm_ffi.load_module(paths["axpy"])
ax["__tilecute_set_cubin"](paths["cubin"])
x = FakeTensor((300,), data=0x400000)
y = FakeTensor((300,), data=0x500000)
ax["axpy"](2.5, x, y, -7, True, 1.5, 0.1, 200)
betas = [1.5, 65504.0, 65520.0, 1e-8, 6e-8, -0.0, 2049.0, 2051.0, 0.1, 1e-5, float("inf")]
for beta in betas:
    ax["axpy"](1, x, y, 0, False, beta, beta, 0)
out["axpy_log"] = log()
out["betas"] = betas
ax["cleanup"]()
log()

ts = tvm_ffi.load_module(paths["two_stage"])
ts["__tilecute_set_cubin"](paths["cubin"])
ts["two_stage"](FakeTensor((32, 10)), FakeTensor((32,)), FakeTensor((32, 10, 4)))
out["two_stage_empty"] = error(ts["two_stage"], FakeTensor((0, 10)), FakeTensor((0,)), FakeTensor((0, 10, 4)))
out["two_stage_log"] = log()
ts["cleanup"]()
log()

cp = tvm_ffi.load_module(paths["copy2d"])
cp["__tilecute_set_cubin"](paths["cubin_without_copy2d"])
xs = FakeTensor((8, 64), strides=(64, 1))
out["missing_kernel"] = error(cp["copy2d"], xs, xs, xs)
out["state_after_missing_kernel"] = state()
out["missing_kernel_log"] = log()

nt = tvm_ffi.load_module(paths["no_tensors"])
nt["__tilecute_set_cubin"](paths["cubin"])
cuda.fake_set_current(cuda.fake_context(1))  # torch.cuda.set_device(1)
nt["no_tensors"](5)
out["no_tensors_current"] = cuda.fake_current() == cuda.fake_context(1)  # left as it was
cuda.fake_set_current(None)  # no context current: device 0
nt["no_tensors"](6)
out["no_tensors_log"] = log()
nt["cleanup"]()
log()

shutil.copy(paths["vector_add"], paths["vector_add_copy"])  # a second copy: fresh driver state
cuda.fake_set_init_result(100)
fresh = tvm_ffi.load_module(paths["vector_add_copy"])
fresh["__tilecute_set_cubin"](paths["cubin"])
out["init_failure"] = error(fresh["__tilecute_ensure_device"], 0)
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def driver(launchers, tmp_path_factory):
    """What the fake driver saw when DRIVER_SCRIPT ran the launchers."""
    root = tmp_path_factory.mktemp("fake_cuda")
    kernels = [k for abi in ABIS.values() for k in abi.kernels]  # the fake "cubin": every kernel
    cubin = text_cubin(root / "fake.cubin", kernels)
    partial = text_cubin(root / "partial.cubin", [k for k in kernels if k.symbol != "copy2d_kernel"])
    paths = {name: str(p) for name, p in launchers.items()}
    paths.update(cubin=str(cubin), cubin_without_copy2d=str(partial),
                 vector_add_copy=str(root / "vector_add_copy.so"))
    script = root / "drive.py"
    script.write_text(DRIVER_SCRIPT)
    run = subprocess.run([sys.executable, str(script), str(TESTS), json.dumps(paths)],
                         capture_output=True, text=True, env=driver_env(fake_libcuda()), timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def le(fmt: str, value) -> str:
    return struct.pack("<" + fmt, value).hex()


def test_driver_needs_a_cubin_first(driver):
    kind, message = driver["before_set_cubin"]
    assert kind == "RuntimeError"
    assert "vector_add: no cubin: the host module calls __tilecute_set_cubin(path) before the first launch" in message
    assert driver["state_before"] == {"retains": [0, 0], "modules_live": 0, "modules_loaded": 0}


def test_driver_launch_packs_parameters_and_uses_the_right_stream(driver):
    lines = driver["vector_add_log"]
    assert lines[0] == "load device=0"  # loaded once, on first use
    launches = [parse_launch(line) for line in lines[1:]]
    assert len(launches) == 5
    first = launches[0]
    assert first["symbol"] == "vector_add_kernel"
    assert first["grid"] == "4,1,1"  # ceildiv(1000, 256)
    assert first["block"] == "256,1,1"
    assert first["smem"] == "0"
    assert first["cluster"] == "0,0,0"
    assert first["device"] == "0"  # the primary context of device 0 was current
    assert first["params"] == [le("Q", 0x100000), le("Q", 0x200000 + 32), le("Q", 0x300000), le("i", 1000)]
    streams = [int(launch["stream"]) for launch in launches]
    # explicit 0x1234; no stream -> env stream (none set: 0); env stream 0x5678 inside
    # use_raw_stream, also for None; explicit 0 is the default stream even there
    assert streams == [0x1234, 0, 0x5678, 0x5678, 0]


def test_driver_restores_the_callers_context(driver):
    assert driver["current_after_call"] == 0xDEAD000
    assert driver["current_after_cleanup"] == 0xDEAD000


def test_driver_one_slot_per_device(driver):
    assert driver["state_after_calls"] == {"retains": [1, 0], "modules_live": 1, "modules_loaded": 1}
    assert driver["device1_log"][0] == "load device=1"
    launch = parse_launch(driver["device1_log"][1])
    assert launch["device"] == "1" and launch["stream"] == "7"
    assert driver["state_two_devices"] == {"retains": [1, 1], "modules_live": 2, "modules_loaded": 2}


def test_driver_errors_name_the_error_and_the_kernel(driver):
    kind, message = driver["launch_failure"]
    assert kind == "RuntimeError"
    assert message == ("vector_add: launching kernel 'vector_add_kernel' on cuda:0 failed: "
                       "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (fake driver error)")
    kind, message = driver["bad_device"]
    assert kind == "RuntimeError"
    assert message == "vector_add: cuDeviceGet failed on cuda:5: CUDA_ERROR_INVALID_DEVICE (fake driver error)"
    kind, message = driver["init_failure"]
    assert kind == "RuntimeError"
    assert message == ("vector_add: CUDA driver initialization failed: cuInit returned CUDA_ERROR_NO_DEVICE "
                       "(fake driver error)")


def test_driver_cleanup_releases_everything_exactly_once(driver):
    assert driver["state_after_cleanup"] == {"retains": [0, 0], "modules_live": 0, "modules_loaded": 2}
    assert driver["state_after_second_cleanup"] == driver["state_after_cleanup"]
    assert sorted(driver["cleanup_log"]) == ["unload device=0", "unload device=1"]
    # a launch after cleanup fills the slot again
    assert driver["state_after_relaunch"] == {"retains": [1, 0], "modules_live": 1, "modules_loaded": 3}


def test_driver_missing_kernel_gives_everything_back(driver):
    kind, message = driver["missing_kernel"]
    assert kind == "RuntimeError"
    assert message.startswith("copy2d: cuda:0: kernel 'copy2d_kernel' is not in the cubin '")
    assert message.endswith("CUDA_ERROR_NOT_FOUND (fake driver error)")
    assert driver["state_after_missing_kernel"]["retains"] == [0, 0]
    assert driver["state_after_missing_kernel"]["modules_live"] == 0
    assert driver["missing_kernel_log"] == ["load device=0", "unload device=0"]


def test_driver_scalar_parameters(driver):
    launches = [parse_launch(line) for line in driver["axpy_log"] if line.startswith("launch")]
    first = launches[0]
    assert first["grid"] == "3,1,1"  # ceildiv(300, 128)
    x, y, alpha, n, flag, beta, gamma, count, big_n = first["params"]
    assert (x, y) == (le("Q", 0x400000), le("Q", 0x500000))
    assert alpha == le("f", 2.5)
    assert n == le("i", -7)
    assert flag == "01"
    assert beta == le("H", torch.tensor(1.5, dtype=torch.float16).view(torch.int16).item() & 0xFFFF)
    assert gamma == le("H", torch.tensor(0.1, dtype=torch.bfloat16).view(torch.int16).item() & 0xFFFF)
    assert count == le("B", 200)
    assert big_n == le("q", 300)  # a symbol packed as int64
    for value, launch in zip(driver["betas"], launches[1:]):
        half = torch.tensor(value, dtype=torch.float32).to(torch.float16).view(torch.int16).item() & 0xFFFF
        bf16 = torch.tensor(value, dtype=torch.float32).to(torch.bfloat16).view(torch.int16).item() & 0xFFFF
        assert launch["params"][5] == le("H", half), value
        assert launch["params"][6] == le("H", bf16), value
        assert launch["params"][2] == le("f", 1.0) and launch["params"][4] == "00"


def test_driver_two_kernels_attributes_and_clusters(driver):
    lines = driver["two_stage_log"]
    assert lines[0] == "load device=0"
    assert lines[1] == "attribute two_stage_reduce 8=65536"  # MAX_DYNAMIC_SHARED_SIZE_BYTES
    assert lines[2] == "attribute two_stage_finish 14=1"  # NON_PORTABLE_CLUSTER_SIZE_ALLOWED
    reduce, finish = (parse_launch(line) for line in lines[3:5])
    assert (reduce["symbol"], reduce["grid"], reduce["block"], reduce["smem"]) == (
        "two_stage_reduce", "1,4,1", "64,1,1", "65536")
    assert reduce["params"][3:] == [le("i", 32), le("i", 10)]
    assert (finish["symbol"], finish["grid"], finish["block"], finish["cluster"]) == (
        "two_stage_finish", "32,1,1", "32,4,1", "16,1,1")
    # M = 0: an empty grid is an error (TileLang's too), raised before anything launches
    assert "two_stage: kernel 'two_stage_reduce': grid (0, 4, 1) has an empty dimension: its " \
        "extent along x, `ceildiv(M, 64)`, is 0" in driver["two_stage_empty"][1]
    assert len(lines) == 5


def test_driver_no_tensor_call_launches_on_the_current_device(driver):
    lines = driver["no_tensors_log"]
    launches = [parse_launch(line) for line in lines if not line.startswith("load")]
    assert [line for line in lines if line.startswith("load")] == ["load device=1", "load device=0"]
    assert [(x["symbol"], x["device"], x["params"]) for x in launches] == [
        ("no_tensors_kernel", "1", [le("i", 5)]), ("no_tensors_kernel", "0", [le("i", 6)])]
    assert driver["no_tensors_current"]


def test_driver_entry_points_pinned_to_cuda_12(driver):
    # every entry point once, for the CUDA 12.0 driver API, legacy default stream
    # (CU_GET_PROC_ADDRESS_LEGACY_STREAM == 1)
    names = ["cuGetErrorName", "cuGetErrorString", "cuInit", "cuDeviceGet", "cuDevicePrimaryCtxRetain",
             "cuDevicePrimaryCtxRelease", "cuCtxGetCurrent", "cuCtxSetCurrent", "cuCtxGetDevice",
             "cuModuleLoadData",
             "cuModuleUnload", "cuModuleGetFunction", "cuFuncSetAttribute", "cuLaunchKernel", "cuLaunchKernelEx",
             "cuDeviceGetAttribute"]
    assert driver["requests"] == [f"{name} 12000 1" for name in names]


# -- a real cubin: its parameter tables on the CPU, its launches on a GPU (-m gpu) ----------

KERNELS_CU = r"""
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

extern "C" __global__ void no_tensors_kernel(int n) {
  if (n < 0) __trap();
}

extern "C" __global__ void vector_add_kernel(const __half* A, const __half* B, __half* C, int N) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < N) C[i] = __hadd(A[i], B[i]);
}

extern "C" __global__ void copy2d_kernel(const float* X, float* Y, float* Z, int M, int sx, int sy) {
  const int row = blockIdx.x * 4 + threadIdx.x / 32;
  if (row >= M) return;
  for (int c = threadIdx.x % 32; c < 64; c += 32) {
    Y[row * sy + c] = X[row * sx + c];
    Z[row * sx + c] = 2.0f * X[row * sx + c];
  }
}

extern "C" __global__ void axpy_kernel(const float* X, float* Y, float alpha, int n, bool flag, __half beta,
                                       __nv_bfloat16 gamma, unsigned char count, long long N) {
  const long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x;
  if (i < N) {
    Y[i] = alpha * X[i] + Y[i] + (flag ? static_cast<float>(n) : 0.0f) + __half2float(beta) +
           __bfloat162float(gamma) + static_cast<float>(count);
  }
}

// 64 KiB of dynamic shared memory: launching needs the raised limit.
extern "C" __global__ void two_stage_reduce(const float* X, float* Y, const float* W, int M, int K) {
  extern __shared__ float scratch[];
  const int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (blockIdx.y != 0 || blockIdx.z != 0 || row >= M) return;
  float sum = 0.0f;
  for (int k = 0; k < K; ++k) sum += X[row * K + k] + W[(row * K + k) * 4];
  scratch[16383 - threadIdx.x] = sum;
  Y[row] = scratch[16383 - threadIdx.x];
}

// Launched in clusters of 16 blocks (non-portable): each block checks that it is.
extern "C" __global__ void two_stage_finish(float* Y, int M) {
  const unsigned cluster_blocks = cooperative_groups::this_cluster().num_blocks();
  if (threadIdx.x == 0 && threadIdx.y == 0 && blockIdx.x < M) {
    Y[blockIdx.x] = 2.0f * Y[blockIdx.x] + (cluster_blocks == 16 ? 0.0f : 1000.0f);
  }
}
"""


def _gpu_arch() -> str:
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        return f"sm_{major}{minor}" + ("a" if major >= 9 else "")
    return "sm_90a"


@pytest.fixture(scope="module")
def real_cubin(tmp_path_factory) -> Path:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no nvcc to build a real cubin")
    root = tmp_path_factory.mktemp("cubin")
    source = root / "kernels.cu"
    source.write_text(KERNELS_CU)
    cubin = root / "kernels.cubin"
    subprocess.run([nvcc, "-cubin", f"-arch={_gpu_arch()}", "-O2", str(source), "-o", str(cubin)],
                   check=True, capture_output=True, text=True)
    return cubin


def test_real_cubin_matches_every_abi(real_cubin):
    pytest.importorskip("elftools")
    from tilecute.runtime.cubin import check_abi, read_cubin

    info = read_cubin(str(real_cubin))
    for abi in ABIS.values():
        check_abi(info, abi)  # the launcher packs what the cubin's parameter tables expect


gpu = pytest.mark.gpu


@pytest.fixture(scope="module")
def gpu_mods(mods, real_cubin):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    for mod in mods.values():
        mod["__tilecute_set_cubin"](str(real_cubin))
    return mods


@gpu
def test_gpu_vector_add_on_every_stream(gpu_mods):
    f = gpu_mods["vector_add"]["vector_add"]
    device = torch.cuda.current_device()
    a = torch.randn(1000, device="cuda", dtype=torch.float16)
    b = torch.randn(1000, device="cuda", dtype=torch.float16)
    c = torch.empty_like(a)
    f(a, b, c)  # the current torch stream
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
    side = torch.cuda.Stream()
    c.zero_()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        f(a, b, c)  # the env stream is now `side`
    side.synchronize()
    torch.testing.assert_close(c, a + b)
    c.zero_()
    torch.cuda.synchronize()
    f(a, b, c, side.cuda_stream)  # explicit stream
    side.synchronize()
    torch.testing.assert_close(c, a + b)
    assert torch.cuda.current_device() == device


@gpu
def test_gpu_declared_strides(gpu_mods):
    g = gpu_mods["copy2d"]["copy2d"]
    base = torch.randn(8, 128, device="cuda")
    x = base[:, :64]
    y = torch.zeros(8, 96, device="cuda")[:, :64]
    z = torch.zeros(8, 128, device="cuda")[:, :64]
    g(x, y, z)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x)
    torch.testing.assert_close(z, 2 * x)


@gpu
def test_gpu_scalars(gpu_mods):
    h = gpu_mods["axpy"]["axpy"]
    x = torch.randn(300, device="cuda")
    y = torch.randn(300, device="cuda")
    expected = 2.5 * x + y + (-7) + 1.5 + torch.tensor(0.1, dtype=torch.bfloat16).item() + 200
    h(2.5, x, y, -7, True, 1.5, 0.1, 200)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, expected)


@gpu
def test_gpu_two_kernels_smem_and_clusters(gpu_mods):
    t = gpu_mods["two_stage"]["two_stage"]
    x = torch.randn(64, 10, device="cuda")
    w = torch.randn(64, 10, 4, device="cuda")
    y = torch.zeros(64, device="cuda")
    t(x, y, w)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, 2 * (x + w[:, :, 0]).sum(1))
    gpu_mods["two_stage"]["cleanup"]()
    gpu_mods["two_stage"]["cleanup"]()
    y.zero_()
    t(x, y, w)  # the slot is filled again
    torch.cuda.synchronize()
    torch.testing.assert_close(y, 2 * (x + w[:, :, 0]).sum(1))


@gpu
def test_gpu_call_overhead(gpu_mods):
    import time

    f = gpu_mods["vector_add"]["vector_add"]
    a = torch.randn(1024, device="cuda", dtype=torch.float16)
    c = torch.empty_like(a)
    for _ in range(100):
        f(a, a, c)
    torch.cuda.synchronize()
    n = 20000
    start = time.perf_counter()
    for _ in range(n):
        f(a, a, c)
    launcher_us = (time.perf_counter() - start) / n * 1e6
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(n):
        torch.add(a, a, out=c)
    torch_us = (time.perf_counter() - start) / n * 1e6
    torch.cuda.synchronize()
    print(json.dumps({"launcher_call_us": round(launcher_us, 2), "torch_add_us": round(torch_us, 2)}))
    # checks, env stream, slot lookup, context check and launch: a few microseconds (3.8 on
    # an H100 host, torch.add 5.6); a lock, a file read or a module load per call would not fit
    assert launcher_us < 20


CONCURRENCY_SCRIPT = r"""
import json, sys, threading, time
sys.path.insert(0, sys.argv[2])
import tvm_ffi
from fake_cuda import open_driver

paths = json.loads(sys.argv[1])
cuda = open_driver()
mod = tvm_ffi.load_module(paths["vector_add"])
mod["__tilecute_set_cubin"](paths["cubin"])
finished = {}

def first_use(dev):
    mod["__tilecute_ensure_device"](dev)
    finished[dev] = time.perf_counter()

start = time.perf_counter()
slow = threading.Thread(target=first_use, args=(0,))  # device 0's module load takes 600 ms
slow.start()
time.sleep(0.05)
fast = threading.Thread(target=first_use, args=(1,))
fast.start()
fast.join()
slow.join()
out = {"device1_done_s": finished[1] - start, "device0_done_s": finished[0] - start}
mod["cleanup"]()
loaded_before = cuda.fake_modules_loaded()
# 16 threads racing the first use of both devices: each device loads its module once
threads = [threading.Thread(target=mod["__tilecute_ensure_device"], args=(i % 2,)) for i in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
out["loads_in_race"] = cuda.fake_modules_loaded() - loaded_before
out["retains_in_race"] = [cuda.fake_retains(0), cuda.fake_retains(1)]
mod["cleanup"]()
out["retains_after_cleanup"] = [cuda.fake_retains(0), cuda.fake_retains(1)]
print(json.dumps(out))
"""


def test_driver_first_uses_on_two_devices_do_not_serialize(launchers, tmp_path):
    """Per-device slots (CPU, fake driver): a slow first load on device 0 does not hold up
    device 1's first use, and threads racing a device's first use load its module once."""
    cubin = text_cubin(tmp_path / "fake.cubin", ABIS["vector_add"].kernels)
    env = driver_env(fake_libcuda(), FAKE_CUDA_LOAD_DELAY_MS="600")
    paths = {"vector_add": str(launchers["vector_add"]), "cubin": str(cubin)}
    run = subprocess.run([sys.executable, "-c", CONCURRENCY_SCRIPT, json.dumps(paths), str(TESTS)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["device0_done_s"] >= 0.6
    assert out["device1_done_s"] < 0.4, out  # did not wait for device 0's load
    assert out["loads_in_race"] == 2
    assert out["retains_in_race"] == [1, 1]
    assert out["retains_after_cleanup"] == [0, 0]
