"""`tilecute export`: a package for several archs that imports with only apache-tvm-ffi,
its manifest and `tilecute verify`, the wheel, the C++ header and example, and
`tilecute.compile(..., target=[...])`.

The package is exported once per session (examples/export/kernels.py: `vector_add` and
two specializations of `scale`, for sm_90a and sm_80; real cubins, built on the CPU).
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

import tilecute
import tilecute.language as T
from tilecute.export import ExportError, collect, load_module, verify_package
from tilecute.runtime.package import accepts, pick_arch

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "export"
ARCHS = ["sm_90a", "sm_80"]


def _tilecute(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "tilecute", *args], capture_output=True,
                          text=True, env=env, cwd=cwd)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(package folder, wheel) of examples/export/kernels.py for sm_90a and sm_80."""
    out = tmp_path_factory.mktemp("export")
    env = {**os.environ, "TILECUTE_CACHE_DIR": str(out / "cache")}
    r = _tilecute("export", str(EXAMPLE / "kernels.py"), "-o", str(out / "dist"), "--arch",
                  ",".join(ARCHS), "--name", "tcdemo", "--wheel", env=env)
    assert r.returncode == 0, r.stderr
    package, wheel = (Path(line) for line in r.stdout.split())
    assert package == out / "dist" / "tcdemo" and wheel.suffix == ".whl"
    return package, wheel


def _site_with_only(tmp: Path, dists: list[str]) -> Path:
    """A folder with links to the installed top-level modules of ``dists`` (and their
    dist-info), nothing else: a .pth in a fresh venv makes it the venv's only packages."""
    from importlib.metadata import distribution

    site = tmp / "only"
    site.mkdir()
    for name in dists:
        dist = distribution(name)
        tops = {Path(str(f)).parts[0] for f in dist.files
                if not str(f).startswith("..") and not str(f).endswith(".pth")}
        for top in tops:
            src = Path(dist.locate_file(top))
            if src.exists() and not (site / top).exists():
                (site / top).symlink_to(src)
    return site


@pytest.fixture(scope="module")
def fresh_python(tmp_path_factory):
    """A new venv whose only packages are apache-tvm-ffi and what it requires."""
    tmp = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "venv")], check=True)
    python = tmp / "venv" / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    site = _site_with_only(tmp, ["apache-tvm-ffi", "typing-extensions"])
    Path(purelib, "only.pth").write_text(str(site) + "\n")
    return python


def _run_in(python, code: str, cwd, **env):
    return subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=cwd,
                          env={"PATH": os.environ["PATH"], **env})


# ---- the package --------------------------------------------------------------------------
def test_package_layout_and_manifest(exported):
    package, _ = exported
    manifest = json.loads((package / "manifest.json").read_text())
    assert manifest["archs"] == ARCHS and manifest["package"] == "tcdemo"
    assert set(manifest["kernels"]) == {"vector_add", "scale"}
    assert set(manifest["versions"]) >= {"tilecute", "nvidia-cutlass-dsl", "apache-tvm-ffi"}
    scale = manifest["kernels"]["scale"]
    assert scale["out_idx"] == [1] and len(scale["variants"]) == 2
    shapes = [v["archs"]["sm_90a"]["abi"]["args"][0]["shape"] for v in scale["variants"]]
    assert shapes == [[128, 256], [64, 1024]]
    for spec in manifest["kernels"].values():
        for variant in spec["variants"]:
            assert list(variant["archs"]) == ARCHS or set(variant["archs"]) == set(ARCHS)
            for arch, entry in variant["archs"].items():
                folder = package / entry["dir"]
                cubin = (folder / "kernel.cubin").read_bytes()
                assert cubin[:4] == b"\x7fELF"  # a real cubin for that arch
                assert json.loads((folder / "abi.json").read_text()) == entry["abi"]
    # every file is recorded with its sha256
    for name, record in manifest["files"].items():
        data = (package / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == record["sha256"] and len(data) == record["size"]
    assert verify_package(package) == []


def test_cubins_are_for_their_arch(exported):
    from elftools.elf.elffile import ELFFile

    package, _ = exported
    flags = {}
    for arch in ARCHS:
        with open(package / "kernels" / "vector_add" / "0" / arch / "kernel.cubin", "rb") as f:
            flags[arch] = ELFFile(f).header["e_flags"]
    assert flags["sm_90a"] != flags["sm_80"]
    # the cubin's target: the low byte of e_flags is the SM version (0x5a: 90, 0x50: 80)
    assert [flags[a] & 0xFF for a in ARCHS] == [90, 80]


def test_imports_and_checks_arguments_with_only_tvm_ffi(exported, fresh_python):
    package, _ = exported
    code = r"""
import sys, json
try:
    import tilecute
    print("tilecute importable"); sys.exit(1)
except ImportError: pass
try:
    import torch
    print("torch importable"); sys.exit(1)
except ImportError: pass
import tcdemo
assert "tvm_ffi" not in sys.modules  # imported at the first call only
assert tcdemo.ARCHS == ["sm_90a", "sm_80"], tcdemo.ARCHS
out = {"doc": tcdemo.__doc__, "repr": repr(tcdemo.scale)}
for name, call in [("count", lambda: tcdemo.vector_add(1, 2)),
                   ("kind", lambda: tcdemo.vector_add("a", "b", "c")),
                   ("scale_count", lambda: tcdemo.scale()),
                   ("scale_shape", lambda: tcdemo.scale(object()))]:
    try:
        call()
        out[name] = "no error"
    except Exception as e:
        out[name] = [type(e).__name__, str(e)]
print(json.dumps(out))
"""
    r = _run_in(fresh_python, code, package.parent, TILECUTE_ARCH="sm_80")
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert "vector_add(A: float32[N], B: float32[N], C: float32[N])" in out["doc"]
    assert out["count"][0] == "TypeError" and "expected 3 arguments" in out["count"][1]
    assert out["kind"][0] == "TypeError" and "'A'" in out["kind"][1]
    assert out["scale_count"][0] == "TypeError" and "expected 1 argument" in out["scale_count"][1]
    # a shape the package was not built for: refused, naming what it serves
    assert out["scale_shape"][0] == "ValueError"
    assert "float16[128, 256]" in out["scale_shape"][1] and "float16[64, 1024]" in out["scale_shape"][1]


def test_no_gpu_and_no_arch_is_a_clear_error(exported, fresh_python):
    package, _ = exported
    code = "import tcdemo\ntry:\n    tcdemo.vector_add(1, 2, 3)\nexcept tcdemo.PackageError as e:\n    print('PackageError', e)\n"
    import ctypes.util

    r = _run_in(fresh_python, code, package.parent)
    if ctypes.util.find_library("cuda") is None:  # no driver: the message says what to do
        assert r.returncode == 0, r.stderr
        assert "PackageError" in r.stdout and "TILECUTE_ARCH" in r.stdout
    else:  # a driver: the launcher of the GPU's arch checks the arguments
        assert "TypeError" in r.stderr or "PackageError" in r.stdout


def test_verify_finds_damage(exported, tmp_path):
    package, _ = exported
    copy = tmp_path / "tcdemo"
    shutil.copytree(package, copy)
    assert _tilecute("verify", str(copy)).returncode == 0
    (copy / "__pycache__").mkdir(exist_ok=True)  # written by an import: not damage
    (copy / "__pycache__" / "x.pyc").write_bytes(b"")
    assert _tilecute("verify", str(copy)).returncode == 0
    cubin = copy / "kernels" / "scale" / "1" / "sm_80" / "kernel.cubin"
    data = bytearray(cubin.read_bytes())
    data[-1] ^= 1
    cubin.write_bytes(bytes(data))
    (copy / "kernels" / "planted.so").write_bytes(b"x")
    r = _tilecute("verify", str(copy))
    assert r.returncode == 1
    assert "kernels/scale/1/sm_80/kernel.cubin: sha256" in r.stdout
    assert "kernels/planted.so" in r.stdout
    r = _tilecute("verify", str(tmp_path))
    assert r.returncode == 1 and "not an exported package" in r.stderr


def test_wheel_installs_into_a_venv_with_only_tvm_ffi(exported, tmp_path):
    package, wheel = exported
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    assert wheel.name == f"tcdemo-0.1.0-py3-none-{platform}.whl"
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        record = zf.read("tcdemo-0.1.0.dist-info/RECORD").decode()
        metadata = zf.read("tcdemo-0.1.0.dist-info/METADATA").decode()
    assert "tcdemo/kernels/vector_add/0/sm_90a/kernel.cubin" in names
    assert "Requires-Dist: apache-tvm-ffi" in metadata
    assert all(n in record for n in names)
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True)
    pip = tmp_path / "venv" / "bin" / "pip"
    r = subprocess.run([str(pip), "install", "-q", "--no-deps", "--no-index", str(wheel)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    python = tmp_path / "venv" / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    site = _site_with_only(tmp_path, ["apache-tvm-ffi", "typing-extensions"])
    Path(purelib, "only.pth").write_text(str(site) + "\n")
    code = ("import tcdemo, os\n"
            "try:\n    tcdemo.vector_add(1)\nexcept TypeError as e:\n    print('TypeError', e)\n"
            "print(os.path.dirname(tcdemo.__file__))")
    r = _run_in(python, code, tmp_path, TILECUTE_ARCH="sm_90a")
    assert r.returncode == 0, r.stderr
    assert "TypeError vector_add: expected 3 arguments" in r.stdout
    installed = Path(r.stdout.strip().splitlines()[-1])
    assert "site-packages" in str(installed)
    # the installed copy is the package, byte for byte, and verifies
    assert verify_package(installed) == []


def test_cpp_example_compiles_against_the_header(exported, tmp_path):
    from tilecute.toolchain import _tvm_ffi_libinfo, cxx_compiler

    package, _ = exported
    header = (package / "include" / "tcdemo.h").read_text()
    assert "class vector_add" in header and "class scale" in header
    assert 'kArchs[] = {"sm_90a", "sm_80"}' in header
    libinfo = _tvm_ffi_libinfo()
    lib = Path(libinfo.find_libtvm_ffi()).parent
    cuda_home = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    if not (cuda_home / "include" / "crt" / "host_config.h").exists():
        pytest.skip("the example uses the CUDA runtime API: needs a CUDA toolkit (CUDA_HOME)")
    cuda_lib = cuda_home / "lib64"
    command = [cxx_compiler(), "-std=c++17", "-O1", "-Wall", "-Werror", str(EXAMPLE / "main.cpp"),
               f"-I{package / 'include'}", f"-I{libinfo.find_include_path()}",
               f"-I{libinfo.find_dlpack_include_path()}", f"-I{cuda_home / 'include'}"]
    if (cuda_lib / "libcudart.so").exists():  # link too (no Python library is linked)
        command += ["-o", str(tmp_path / "demo"), f"-L{lib}", "-ltvm_ffi", f"-L{cuda_lib}", "-lcudart"]
    else:
        command += ["-c", "-o", str(tmp_path / "demo.o")]
    r = subprocess.run(command, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    built = tmp_path / ("demo" if "-lcudart" in command else "demo.o")
    assert built.stat().st_size > 0
    if "-lcudart" in command:
        needed = subprocess.run(["readelf", "-d", str(built)], capture_output=True, text=True).stdout
        assert "libtvm_ffi" in needed and "python" not in needed.lower()


# ---- what export takes ----------------------------------------------------------------------
def test_collect_names_and_errors(tmp_path, cache_dir):
    src = tmp_path / "mod.py"
    src.write_text(
        "import tilecute\nimport tilecute.language as T\n"
        "@T.prim_func\n"
        "def copy(A: T.Tensor((256,), 'float32'), B: T.Tensor((256,), 'float32')):\n"
        "    with T.Kernel(1, threads=256) as bx:\n"
        "        for i in T.Parallel(256):\n"
        "            B[i] = A[i]\n"
        "copy_kernel = tilecute.compile(copy, out_idx=[1])\n"
        "@tilecute.jit(out_idx=[-1])\n"
        "def never(n):\n"
        "    return copy\n"
        "pair = {'first': copy, 'second': copy_kernel}\n"
        "not_a_kernel = 3\n")
    module = load_module(str(src), ["sm_90a"])
    everything = {k.name: k for k in collect(module, None)}
    # the prim_func the compiled kernel was built from is that kernel, not a second one
    assert set(everything) == {"copy_kernel", "first", "second"}
    assert everything["copy_kernel"].out_idx == [1] and everything["first"].out_idx == []
    assert [k.name for k in collect(module, "copy")] == ["copy"]
    with pytest.raises(ExportError, match="no specialization compiled"):
        collect(module, "never")
    with pytest.raises(ExportError, match="not a kernel"):
        collect(module, "not_a_kernel")
    with pytest.raises(ExportError, match="no attribute 'missing'"):
        collect(module, "missing")


def test_cli_errors(tmp_path):
    r = _tilecute("export", str(EXAMPLE / "kernels.py") + ":nothing", "-o", str(tmp_path),
                  "--arch", "sm_90a")
    assert r.returncode == 2 and "no attribute 'nothing'" in r.stderr and "Traceback" not in r.stderr
    r = _tilecute("export", str(EXAMPLE / "kernels.py"), "-o", str(tmp_path), "--arch", "sm_91")
    assert r.returncode == 1 and "sm_91" in r.stderr and "Traceback" not in r.stderr
    r = _tilecute("export", str(EXAMPLE / "kernels.py"), "-o", str(tmp_path))
    assert r.returncode == 2 and "--arch" in r.stderr


# ---- the runtime's choices ------------------------------------------------------------------
@pytest.mark.parametrize("archs, capability, expected", [
    (["sm_90a", "sm_80"], (9, 0), "sm_90a"),
    (["sm_90a", "sm_80"], (8, 0), "sm_80"),
    (["sm_90a", "sm_80"], (8, 9), "sm_80"),    # an sm_80 cubin runs on 8.x, x >= 0
    (["sm_80", "sm_86"], (8, 9), "sm_86"),     # the highest minor below the GPU's
    (["sm_90", "sm_90a"], (9, 0), "sm_90a"),   # the arch-specific one on its exact version
    (["sm_90a"], (10, 0), None),               # a cubin never runs on another major
    (["sm_100a"], (10, 3), None),              # an "a" cubin only on its exact version
    (["sm_80"], (7, 5), None),
])
def test_pick_arch(archs, capability, expected):
    assert pick_arch(archs, capability) == expected


def test_accepts_matches_static_dims_dtypes_and_checks():
    class Arg:
        def __init__(self, shape, dtype):
            self.shape, self.dtype = shape, dtype

    abi = {"args": [{"kind": "tensor", "name": "A", "dtype": "float16", "shape": ["M", 64]},
                    {"kind": "tensor", "name": "B", "dtype": "float16", "shape": ["M", 64]},
                    {"kind": "scalar", "name": "n", "dtype": "int32"}]}
    assert accepts(abi, [], [], [Arg((5, 64), "torch.float16"), Arg((5, 64), "float16"), 3])
    assert not accepts(abi, [], [], [Arg((5, 64), "float16"), Arg((6, 64), "float16"), 3])
    assert not accepts(abi, [], [], [Arg((5, 32), "float16"), Arg((5, 32), "float16"), 3])
    assert not accepts(abi, [], [], [Arg((5, 64), "bfloat16"), Arg((5, 64), "bfloat16"), 3])
    assert not accepts(abi, [], [[0, 0, 8]], [Arg((5, 64), "float16"), Arg((5, 64), "float16"), 3])
    assert accepts(abi, [1], [[0, 0, 8]], [Arg((16, 64), "float16"), 3])


# ---- several archs in the normal cache ------------------------------------------------------
def test_compile_for_several_archs(cache_dir, monkeypatch):
    N = T.symbolic("N")

    @T.prim_func
    def twice(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 256), threads=256) as bx:
            for i in T.Parallel(256):
                if bx * 256 + i < N:
                    B[bx * 256 + i] = A[bx * 256 + i] * 2.0

    kernel = tilecute.compile(twice, target=["sm_90a", "sm_80"])
    assert kernel.archs == ["sm_90a", "sm_80"]
    assert {k.host.ARCH for k in kernel.kernels.values()} == {"sm_90a", "sm_80"}
    cubins = kernel.ensure_cubin()
    assert len(cubins) == 2 and len({Path(c).parent for c in cubins}) == 2
    assert kernel.name == "twice" and "twice" in kernel.get_source("cute")
    # the pick: TILECUTE_ARCH stands for the GPU here; the chosen kernel checks the arguments
    monkeypatch.setenv("TILECUTE_ARCH", "sm_80")
    with pytest.raises(TypeError, match="expected 2 arguments"):
        kernel(1)
    assert kernel.pick([]) is kernel.kernels["sm_80"]
    with pytest.raises(tilecute.TargetError if hasattr(tilecute, "TargetError") else ValueError):
        tilecute.compile(twice, target=["sm_90a", "sm_42"])


# ---- GPU: the package runs ----------------------------------------------------------------
@pytest.mark.gpu
def test_exported_package_runs_on_the_gpu(exported, tmp_path):
    import torch

    package, _ = exported
    code = r"""
import torch, tcdemo
a = torch.randn(100_003, device="cuda"); b = torch.randn_like(a); c = torch.empty_like(a)
tcdemo.vector_add(a, b, c)
torch.testing.assert_close(c, a + b)
for rows, cols in ((128, 256), (64, 1024)):
    x = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(tcdemo.scale(x), x * 2)
try:
    tcdemo.scale(torch.randn(3, 3, device="cuda", dtype=torch.float16))
except ValueError as e:
    print("refused", e)
print("ok")
"""
    env = {k: v for k, v in os.environ.items() if k != "TILECUTE_ARCH"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=package.parent, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("ok") and "refused" in r.stdout
    assert torch.cuda.is_available()


# ---- warm-up and sealing --------------------------------------------------------------------
def test_warmup_builds_everything_and_seal_refuses_new_shapes(cache_dir):
    calls = []

    @tilecute.jit(out_idx=[-1])
    def double(n, dtype="float32"):
        calls.append(n)

        @T.prim_func
        def double_(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype)):
            with T.Kernel(1, threads=128) as bx:
                for i in T.Parallel(n):
                    B[i] = A[i] + A[i]

        return double_

    kernels = double.warmup((256,), {"n": 512, "dtype": "float16"}, devices=())
    assert calls == [256, 512] and len(kernels) == 2
    for k in kernels:
        assert (k.path / "kernel.cubin").is_file() and k._func is not None  # launcher loaded
    assert double(256) is kernels[0]  # served without a compile
    double.seal()
    with pytest.raises(ValueError, match=r"double\(1024\): not compiled.*sealed.*\(256\)"):
        double(1024)
    assert calls == [256, 512]


def test_eager_warmup_and_seal(cache_dir):
    @tilecute.jit
    def neg(X, block: int = 128):
        n = T.const("n")
        X: T.Tensor((n,), "float32")
        Y = T.empty((n,), "float32")
        with T.Kernel(T.ceildiv(n, block), threads=block) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    Y[bx * block + i] = -X[bx * block + i]
        return Y

    (k,) = neg.warmup({"n": 1000}, devices=())
    assert (k.path / "kernel.cubin").is_file()
    neg.seal()
    assert neg.compile(n=1000) is k
    with pytest.raises(ValueError, match="n=2000.*sealed.*n=1000"):
        neg.compile(n=2000)
