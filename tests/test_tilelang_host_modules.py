"""TileLang's host-side modules under tilecute's names (issue 17 item 6): PassConfigKey
(every key: mapped, kept at its default, or refused by name), compile_flags and the
ptxas options they reach, tilecute.transform / contrib.nvcc / engine / carver / tvm /
cuda.intrinsics / language.fp8 / math / env, and the TileLang modules tilecute lacks
importing with their names refused on use."""

import importlib
import importlib.util
import sys
import textwrap

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.options import (PASS_CONFIGS, OptionError, PassConfigKey, check_options,
                              from_compile_flags, from_pass_configs)


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def add_one():
    @T.prim_func
    def add_one(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32")):
        with T.Kernel(8, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] + 1.0
    return add_one


# ---- PassConfigKey -----------------------------------------------------------------------
def test_every_pass_config_key_has_a_rule_and_is_importable_from_transform():
    from tilecute.transform import PassConfigKey as FromTransform

    assert FromTransform is PassConfigKey is tilecute.PassConfigKey
    assert set(PASS_CONFIGS) == set(PassConfigKey) and len(PassConfigKey) >= 57
    assert PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL == "tl.ptxas_register_usage_level"
    for key, rule in PASS_CONFIGS.items():
        if hasattr(rule, "values") and rule.values:  # kept: its default is accepted
            assert from_pass_configs({key: rule.values[0]}) == {}, key


def test_pass_configs_map_onto_options():
    K = PassConfigKey
    assert from_pass_configs({K.TL_DISABLE_WARP_SPECIALIZED: True,
                              K.TL_PTXAS_REGISTER_USAGE_LEVEL: 10}) == {
        "disable_warp_specialize": True, "ptxas_options": "--register-usage-level=10"}
    assert from_pass_configs({K.TL_CONFIG_INDEX_BITWIDTH: 64}) == {"wide_offsets": True}
    assert from_pass_configs({K.TL_DISABLE_WGMMA: True, "tl.disable_data_race_check": True}) == {
        "disable_wgmma": True}
    assert from_pass_configs({K.TL_DEVICE_COMPILE_FLAGS: "--use_fast_math -O3"}) == {
        "fast_math": True}
    assert from_pass_configs({K.TL_SIMPLIFY: {"enable_simplify_let_inline": True}}) == {}
    assert from_pass_configs({K.TL_DISABLE_VECTORIZE_256: True}) == {}  # tilecute: 16 B max
    assert from_pass_configs({K.TL_ENABLE_PTXAS_VERBOSE_OUTPUT: True}) == {"ptxas_options": "-v"}


@pytest.mark.parametrize("config,needle", [
    ({PassConfigKey.TL_DISABLE_THREAD_STORAGE_SYNC: 1},
     r"TL_DISABLE_THREAD_STORAGE_SYNC\] \('tl.disable_thread_storage_sync'\) takes True or "
     r"False, got 1"),
    ({"tl.disable_data_race_check": False}, "no data-race check"),
    ({PassConfigKey.TIR_DISABLE_CSE: True}, "no TVM TIR pipeline"),
    ({PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL: 11}, r"int in \[0, 10\]"),
    ({PassConfigKey.TL_CONFIG_INDEX_BITWIDTH: 16}, "takes 32 or 64"),
    ({PassConfigKey.TL_SIMPLIFY: {"enable_simplify_let_inline": False}}, "default simplifier"),
    ({PassConfigKey.TL_ENABLE_FAST_MATH: 1}, "takes True or False"),
    ({"tl.no_such_key": True}, "not one of TileLang's PassConfigKey keys"),
])
def test_pass_configs_tilecute_cannot_honor_are_refused_by_name(config, needle):
    with pytest.raises(OptionError, match=needle):
        from_pass_configs(config, "kern")
    with pytest.raises(OptionError, match="kern: pass_configs"):
        from_pass_configs(config, "kern")


# ---- compile_flags and ptxas options ------------------------------------------------------
def test_compile_flags_map_or_are_refused():
    flags = ["-O3", "-Wno-deprecated-declarations", "-U__CUDA_NO_HALF_OPERATORS__",
             "--expt-relaxed-constexpr", "--expt-extended-lambda", "-DNDEBUG",
             "--ptxas-options=-v,--register-usage-level=10", "--use_fast_math"]
    assert from_compile_flags(flags) == {"fast_math": True,
                                         "ptxas_options": "-v --register-usage-level=10"}
    assert from_compile_flags(["-Xptxas", "--maxrregcount=64"]) == {
        "ptxas_options": "--maxrregcount=64"}
    assert from_compile_flags("-maxrregcount=128") == {"ptxas_options": "--maxrregcount=128"}
    with pytest.raises(OptionError, match=r"k: compile_flags '-I/opt/include' is not supported"):
        from_compile_flags(["-I/opt/include"], "k")
    with pytest.raises(OptionError, match="ptxas flag '--fmad=false' is not one tilecute passes"):
        from_compile_flags(["--ptxas-options=--fmad=false"], "k")
    assert check_options({"ptxas_options": "-v  -v --maxrregcount=32"}) == {
        "ptxas_options": "-v --maxrregcount=32"}
    assert check_options({"ptxas_options": ""}) == {}
    with pytest.raises(OptionError, match="takes a string of ptxas flags"):
        check_options({"ptxas_options": 10})


def test_jit_takes_compile_flags_and_the_host_module_passes_ptxas_options_on():
    @tilecute.jit(pass_configs={PassConfigKey.TL_PTXAS_REGISTER_USAGE_LEVEL: 10},
                  compile_flags=["-O3", "--ptxas-options=--maxrregcount=64"])
    def factory():
        return add_one()

    assert factory.__tilecute_jit__[2] == {"ptxas_options":
                                           "--register-usage-level=10 --maxrregcount=64"}
    host = factory().get_source("host")
    assert 'PTXAS_OPTIONS = "--register-usage-level=10 --maxrregcount=64"' in host
    assert "ptxas_options=PTXAS_OPTIONS" in host
    assert "PTXAS_OPTIONS" not in tilecute.compile(add_one()).get_source("host")
    with pytest.raises(OptionError, match="factory: compile_flags '-lineinfo'"):
        tilecute.jit(compile_flags=["-lineinfo"])(factory)


def test_ptxas_options_reach_ptxas(tmp_path, capfd):
    """-v makes ptxas print its report (CuTe DSL's ptxas remarks); --maxrregcount caps it."""
    tilecute.build_cubin(add_one(), "sm_90a", out_dir=str(tmp_path),
                         options={"ptxas_options": "-v --maxrregcount=24"})
    err = capfd.readouterr().err
    assert "ptxas info" in err and "Compiling entry function" in err, err[-2000:]
    used = int(err.split("Used ")[1].split(" registers")[0])
    assert used <= 24


def bf16_scale_through_shared(M=256, N=256, block=64):
    """TileOPs / sglang style: a bf16 kernel whose jit passes -DENABLE_BF16 and asks for
    TileLang's aggressive shared-memory merge."""
    @tilecute.jit(out_idx=[-1], compile_flags=["-O3", "-DENABLE_BF16", "-DTL_ENABLE_L2_PREFETCH=1"],
                  pass_configs={PassConfigKey.TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE: True})
    def build():
        @T.prim_func
        def scale(X: T.Tensor((M, N), "bfloat16"), Y: T.Tensor((M, N), "bfloat16")):
            with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block), threads=128) as (bx, by):
                x_s = T.alloc_shared((block, block), "bfloat16")
                y_s = T.alloc_shared((block, block), "bfloat16")
                T.copy(X[by * block, bx * block], x_s)
                for i, j in T.Parallel(block, block):
                    y_s[i, j] = x_s[i, j] * 2.0
                T.copy(y_s, Y[by * block, bx * block])
        return scale
    return build()


def test_define_flags_and_aggressive_merge_are_accepted_and_build(tmp_path):
    """A -D define reaches only the C++ preprocessor of TileLang's CUDA source (its
    templates read ENABLE_BF16); TileLang's aggressive merge only shares more bytes: both
    accepted, the kernel builds its sm_90a cubin."""
    assert from_compile_flags(["-DENABLE_BF16", "-DTL_ENABLE_L2_PREFETCH=1", "-DNDEBUG"]) == {}
    for bad in ("-D", "-D=1", "-I/opt/include"):
        with pytest.raises(OptionError, match=f"k: compile_flags '{bad}' is not supported"):
            from_compile_flags([bad], "k")
    assert from_pass_configs({PassConfigKey.TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE: True}) == {}
    kernel = bf16_scale_through_shared()
    assert kernel.ensure_cubin().endswith(".cubin")


@pytest.mark.gpu
def test_define_flags_kernel_matches_torch():
    import torch

    x = torch.randn(256, 256, device="cuda", dtype=torch.bfloat16)
    torch.testing.assert_close(bf16_scale_through_shared()(x), x * 2)


# ---- modules ------------------------------------------------------------------------------
def test_contrib_nvcc():
    from tilecute.contrib import nvcc

    assert nvcc.get_target_compute_version("sm_90a") == "9.0"
    assert nvcc.get_target_compute_version("cuda:sm_100a") == "10.0"
    assert nvcc.get_target_compute_version() == "9.0"  # no GPU here: TILECUTE_ARCH
    assert nvcc.parse_compute_version("8.6") == (8, 6) and nvcc.get_target_arch("9.0") == "90a"
    assert nvcc.have_fp8("8.9") and not nvcc.have_fp8("8.6") and nvcc.have_bf16("8.0")
    assert nvcc.have_tma("sm_90a") and not nvcc.have_tma("sm_80")
    major, minor = nvcc.get_cuda_version()
    assert major >= 12
    with pytest.raises(NotImplementedError, match="compile_cuda is not supported by tilecute"):
        nvcc.compile_cuda("__global__ void f() {}")


def test_engine_callbacks_import_and_refuse():
    from tilecute.engine.callback import register_cuda_postproc_callback  # noqa: F401

    with pytest.raises(NotImplementedError, match="rewrites the CUDA C/HIP/C source"):
        @register_cuda_postproc_callback
        def edit(code, target):
            return code
    with pytest.raises(NotImplementedError, match="register_cuda_postproc is not"):
        tilecute.register_cuda_postproc(lambda code, target: code)


def test_tvm_data_type_and_refused_tir(monkeypatch):
    if importlib.util.find_spec("tvm") is not None and "tilecute" not in str(
            importlib.util.find_spec("tvm").loader):
        pytest.skip("a real TVM is installed: it wins over tilecute.tvm")
    from tilecute import DataType, tvm

    assert DataType("float16").bits == 16 and DataType(T.bfloat16).bits == 16
    assert DataType("int8x4").bits == 8 and DataType("int8x4").lanes == 4
    assert DataType("int4").bits == 4 and DataType("float8_e4m3fn").bits == 8
    assert DataType("float16") == "half" and str(DataType("int8x4")) == "int8x4"
    monkeypatch.delitem(sys.modules, "tvm", raising=False)
    tvm_mod = importlib.import_module("tvm")
    assert tvm_mod is tvm and tvm_mod.DataType is DataType
    tirx = importlib.import_module("tvm.tirx")
    assert tirx.const(1, "int32") == N.Const(1, "int32")  # served: tilecute's IR (see
    # test_tvm_tirx_dequant); TVM's other tirx names are refused by name
    with pytest.raises(NotImplementedError, match=r"tvm\.tirx\.IndexMap is not supported by "
                                                  r"tilecute: it is TVM's"):
        tirx.IndexMap(None)
    from tvm import tirx as attr_tirx
    assert attr_tirx.PrimExpr is N.Expr  # an annotation, and isinstance(x, tirx.PrimExpr)
    assert "tvm.tirx.Var: not supported" in repr(attr_tirx.Var)
    with pytest.raises(NotImplementedError, match="tvm.tirx.Var is not supported"):
        attr_tirx.Var("x", "int32")


def test_cuda_intrinsics_mma_swizzle_layout_in_a_prim_func():
    text = textwrap.dedent("""\
        import tilecute.language as T
        from tilecute.cuda.intrinsics import make_mma_swizzle_layout


        @T.prim_func
        def copy_through_shared(A: T.Tensor((128, 64), "float16"), B: T.Tensor((128, 64), "float16")):
            with T.Kernel(1, threads=128) as bx:
                tile = T.alloc_shared((128, 64), "float16")
                narrow = T.alloc_shared((128, 16), "float16")
                T.annotate_layout({tile: make_mma_swizzle_layout(tile),
                                   narrow: make_mma_swizzle_layout(narrow)})
                T.copy(A, tile)
                T.copy(A[0, 0], narrow)
                T.copy(tile, B)
        """)
    script = T.from_script(text).script()
    assert 'tile = T.alloc_shared((128, 64), "float16", layout=T.Layout("tma_swizzled", ' \
           'swizzle=128))' in script
    assert 'narrow = T.alloc_shared((128, 16), "float16", layout=T.Layout("row_major"))' in script
    from tilecute.cuda.intrinsics import TensorCoreIntrinEmitter
    from tilecute.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter as E

    for refused in (TensorCoreIntrinEmitter, E):
        with pytest.raises(NotImplementedError, match="TVM TIR"):
            refused(a_dtype="float16")


@pytest.mark.parametrize("module", ["tilecute.cuda.intrinsics.layout",
                                    "tilecute.cuda.intrinsics.layout.mma_layout"])
def test_mma_swizzle_layout_from_the_layout_modules(module):
    """TileLang's programs import ``make_mma_swizzle_layout`` from
    ``tilelang.cuda.intrinsics.layout(.mma_layout)`` too: the same constructor (it was
    refused there with the module's TIR index maps); those maps stay refused by name."""
    from tilecute.cuda.intrinsics import make_mma_swizzle_layout

    mod = importlib.import_module(module)
    assert mod.make_mma_swizzle_layout is make_mma_swizzle_layout
    text = textwrap.dedent(f"""\
        import tilecute.language as T
        from {module} import make_mma_swizzle_layout


        @T.prim_func
        def staged(A: T.Tensor((64, 32), "float32"), B: T.Tensor((64, 32), "float32")):
            with T.Kernel(1, threads=64) as bx:
                S = T.alloc_shared((64, 32), "float32")
                T.annotate_layout({{S: make_mma_swizzle_layout(S)}})
                T.copy(A, S)
                T.copy(S, B)
        """)
    script = T.from_script(text).script()
    assert 'S = T.alloc_shared((64, 32), "float32", layout=T.Layout("tma_swizzled", ' \
           'swizzle=128))' in script
    with pytest.raises(NotImplementedError, match=r"tilelang\.cuda\.intrinsics\.layout\..*"
                                                  r"get_swizzle_layout is not supported by tilecute"):
        mod.get_swizzle_layout(None)
    from tilecute.cuda.intrinsics.layout.mma_sm70_layout import shared_16x4_to_mma_a_32x4_layout
    with pytest.raises(NotImplementedError, match="TVM TIR"):
        shared_16x4_to_mma_a_32x4_layout(0, 0)


def test_sparse_metadata_layout_module_serves_the_gemm_sp_contract():
    """T.gemm_sp's metadata contract (TileLang's compressors import it): 2 of every 4 for
    8/16-bit values, a 4-bit field per group, so an int16 indexes 16 values."""
    import tilecute.language as T
    from tilecute.cuda.intrinsics.sparse_layout import (GROUP_CONFIG, get_e_factor,
                                                        get_e_replicate_factor)
    from tilecute.language.dtypes import _TORCH_DTYPE_TO_STR, dtype

    assert GROUP_CONFIG[T.float16] == GROUP_CONFIG["bfloat16"] == (2, 4)
    assert get_e_factor(T.float16, T.int16) == 16 and get_e_factor("int8", "int32") == 32
    assert get_e_replicate_factor(T.float16) == 2 and get_e_replicate_factor(T.int8) == 1
    torch = pytest.importorskip("torch")
    assert dtype(_TORCH_DTYPE_TO_STR[torch.bfloat16]) == T.bfloat16


def test_carver_arch_driver_and_templates(monkeypatch):
    torch = pytest.importorskip("torch")
    from tilecute.carver.arch import CDNA, CUDA, driver, is_hopper_arch
    from tilecute.carver.roller.rasterization import NoRasterization, Rasterization2DRow
    from tilecute.carver.template import MatmulTemplate

    class Props:
        name, multi_processor_count, major, minor, L2_cache_size = "H100", 132, 9, 0, 50 << 20

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: Props())
    monkeypatch.setattr(driver, "get_device_attribute", lambda attr, d=0: {8: 49152}[attr])
    assert driver.get_num_sms() == 132 and driver.get_device_name() == "H100"
    arch = CUDA("cuda")
    assert arch.target == "sm_90a" and arch.sm_version == 90 and is_hopper_arch(arch)
    assert arch.compute_max_core == 132 and arch.smem_cap == 49152 and arch.compute_capability == "90"
    assert CUDA("sm_80").sm_version == 80
    assert Rasterization2DRow(8).panel_width == 8 and NoRasterization().get_code() == []
    with pytest.raises(NotImplementedError, match="MatmulTemplate is not supported by tilecute: "
                                                  "its roller analyses TVM TIR"):
        MatmulTemplate(M=1024, N=1024, K=1024)
    with pytest.raises(NotImplementedError, match="AMD CDNA"):
        CDNA("hip")


def test_small_top_level_names(monkeypatch):
    import tilecute.runtime.kernel
    from tilecute.language.fp8 import determine_fp8_type
    from tilecute.tileop.base import GemmWarpPolicy

    assert tilecute.JITKernel is tilecute.jit.kernel.JITKernel
    assert issubclass(tilecute.runtime.kernel.Kernel, tilecute.JITKernel)
    assert tilecute.next_power_of_2(5) == 8 == tilecute.math.next_power_of_2(8)
    assert tilecute.math.next_power_of_2(1) == 1 and tilecute.math.cdiv(7, 2) == 4
    assert GemmWarpPolicy is T.GemmWarpPolicy is tilecute.tileop.base.GemmWarpPolicy
    # tilelang.Layout / tilelang.Fragment are its layout constructors, tilelang.dtypes its
    # language's dtypes module
    assert tilecute.Layout is tilecute.layout.Layout and tilecute.Fragment is tilecute.layout.Fragment
    assert tilecute.dtypes.bfloat16 == T.bfloat16 and tilecute.dtypes is tilecute.language.dtypes
    assert determine_fp8_type() == T.float8_e4m3 and determine_fp8_type("e5m2") == T.float8_e5m2
    monkeypatch.delenv("TILECUTE_DISABLE_CACHE", raising=False)
    tilecute.disable_cache()
    assert not tilecute.is_cache_enabled()
    tilecute.enable_cache()
    assert tilecute.is_cache_enabled()
    tilecute.set_log_level("WARNING")
    monkeypatch.setenv("TILECUTE_CACHE_DIR", "/tmp/tc-env-test-cache")
    assert tilecute.env.TILELANG_CACHE_DIR == "/tmp/tc-env-test-cache"
    with pytest.raises(NotImplementedError, match="CUTLASS_INCLUDE_DIR"):
        tilecute.env.CUTLASS_INCLUDE_DIR.strip()
    with pytest.raises(NotImplementedError, match="tilelang.transform.PassContext"):
        tilecute.transform.PassContext()
    from tilecute.tools import plot_layout

    with pytest.raises(NotImplementedError, match="tilelang.tools.plot_layout"):
        plot_layout(None)


def test_tilelang_dtype_names_tilecute_lacks_are_refused_by_name():
    torch = pytest.importorskip("torch")
    assert T.int == T.int32 and T.long == "int64" and T.short == "int16" and T.ulong == "uint64"
    assert T.float8_e4m3fn.as_torch() is torch.float8_e4m3fn and T.bfloat16.bits == 16
    assert "a TileLang dtype tilecute does not have" in repr(T.int2)
    assert repr(T.float16x2).startswith("<T.float16x2:") and repr(T.float4_e2m1fn)
    with pytest.raises(AttributeError):
        T.int3  # noqa: B018  (not a TileLang dtype either)
    text = textwrap.dedent("""\
        import tilecute.language as T


        @T.prim_func
        def packed(A: T.Tensor((64, 64), T.int2), B: T.Tensor((64, 64), T.int32)):
            with T.Kernel(1, threads=128) as bx:
                for i, j in T.Parallel(64, 64):
                    B[i, j] = 0
        """)
    with pytest.raises(T.FrontendError, match=r"<script>:5: .*parameter 'A': unknown dtype "
                                              r"<T.int2: a TileLang dtype tilecute does not have>"):
        T.from_script(text)
    with pytest.raises(NotImplementedError, match="T.int2 is a TileLang dtype that tilecute does "
                                                  "not have"):
        T.int2(3)


def test_utils_device():
    """TileLang's tilelang.utils.device (TileOPs' top-k selector imports
    get_current_device to place its autotuning inputs)."""
    import os

    from tilecute.utils import device

    assert device.IS_CUDA is __import__("torch").cuda.is_available()
    if not device.IS_CUDA and not device.IS_MPS:
        assert device.get_current_device() is None
    assert device.get_available_cpu_count() == len(os.sched_getaffinity(0))
