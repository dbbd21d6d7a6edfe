"""tilecute.compile end to end on a CPU machine: entries with host module and launcher,
the launcher loaded through TVM FFI, argument errors, cache hits in new processes without
CUTLASS, concurrent builds, damaged entries, tilecute.load and tilecute show."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import elementwise as E  # noqa: E402
import tile_ops  # noqa: E402
import tilecute  # noqa: E402
from tilecute.cli import main as cli  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": f"{ROOT / 'examples'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    """One cache for the module: each example's launcher is built once (seconds each)."""
    d = tmp_path_factory.mktemp("cache")
    old = os.environ.get("TILECUTE_CACHE_DIR")
    os.environ["TILECUTE_CACHE_DIR"] = str(d)
    yield d
    if old is None:
        del os.environ["TILECUTE_CACHE_DIR"]
    else:
        os.environ["TILECUTE_CACHE_DIR"] = old


@pytest.fixture(scope="module")
def vadd(shared_cache):
    return tilecute.compile(E.vector_add("float16"), target="sm_90a")


EXAMPLES = {**E.ALL, **tile_ops.ALL}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_every_example_builds_an_entry_whose_launcher_loads(name, shared_cache):
    kernel = tilecute.compile(EXAMPLES[name](), target="sm_90a")
    for f in ("host.py", "kernel_cute.py", "launcher.cpp", "tilecute_launcher.h", "launcher.so",
              "abi.json", "ir.json", "manifest.json"):
        assert (kernel.path / f).is_file(), f
    assert f"def {kernel.name}(" in kernel.get_source("cute")
    assert "TVM_FFI" in kernel.get_source("launcher") or "tvm" in kernel.get_source("launcher")
    assert json.loads(kernel.get_source("abi"))["function"] == kernel.name
    import tvm_ffi

    module = tvm_ffi.load_module(str(kernel.path / "launcher.so"))
    assert callable(module[kernel.name]) and callable(module["cleanup"])


def test_ensure_cubin_builds_without_a_gpu_and_records_its_hash(vadd):
    cubin = Path(vadd.ensure_cubin())
    assert cubin.name == "kernel.cubin" and cubin.stat().st_size > 0
    manifest = json.loads((vadd.path / "manifest.json").read_text())
    assert "kernel.cubin" in manifest["files"]
    assert vadd.ensure_cubin() == str(cubin)  # produced once


def test_argument_errors_name_kernel_argument_expected_and_got(vadd):
    a = torch.randn(64).half()
    with pytest.raises(ValueError, match=r"vector_add: argument 'B': expected dtype float16, got float32"):
        vadd(a, a.float(), a)
    with pytest.raises(ValueError, match=r"vector_add: argument 'C'.*(1 dim|rank)"):
        vadd(a, a, a.view(8, 8))
    with pytest.raises(TypeError, match=r"vector_add"):
        vadd(a, a)
    with pytest.raises(ValueError, match=r"vector_add: argument 'A': expected a CUDA tensor, got cpu"):
        vadd(a, a, a)
    with pytest.raises(ValueError, match=r"vector_add: argument 'B'.*\bN\b"):
        vadd(a, a[:32], a)


def test_get_source_kinds_and_show_cli(vadd, capsys):
    assert "@cute.kernel" in vadd.get_source("cute")
    assert "def load_launcher" in vadd.get_source("host")
    with pytest.raises(ValueError, match="kind must be one of"):
        vadd.get_source("ptx")
    assert cli(["show", vadd.path.name[:10], "--kind", "launcher"]) == 0
    assert "tc_launch_kernels(tc_launcher, " in capsys.readouterr().out
    assert cli(["show", vadd.path.name[:10], "--kind", "launcher-runtime"]) == 0
    assert "g_cuda.LaunchKernel(" in capsys.readouterr().out
    assert cli(["show", str(vadd.path)]) == 0
    assert "@cute.kernel" in capsys.readouterr().out
    # the lowered IR as the printer shows it: the passes' decisions in TileLang's form
    assert cli(["show", vadd.path.name[:10], "--kind", "script"]) == 0
    script = capsys.readouterr().out
    assert script == vadd.get_source("script") and "T.Parallel(1024, vector_width=8)" in script


def test_entry_carries_the_launcher_runtime(vadd, capsys):
    """launcher.cpp includes the launcher runtime header and links the runtime's code; the
    entry holds a copy of both (listed in the manifest, shown by `tilecute show`), so the
    entry's launcher builds from the entry."""
    from tilecute.host.launcher import runtime_header, runtime_source

    header = vadd.path / "tilecute_launcher.h"
    code = vadd.path / "tilecute_launcher_runtime.cpp"
    assert header.read_bytes() == runtime_header().read_bytes()
    assert code.read_bytes() == runtime_source().read_bytes()
    assert '#include "tilecute_launcher.h"' in vadd.get_source("launcher")
    manifest = json.loads((vadd.path / "manifest.json").read_text())
    assert "tilecute_launcher.h" in manifest["files"]
    assert "tilecute_launcher_runtime.cpp" in manifest["files"]
    assert cli(["show", vadd.path.name[:10], "--kind", "launcher-header"]) == 0
    assert capsys.readouterr().out == header.read_text()
    assert vadd.get_source("launcher-runtime") == code.read_text()


def _child(code: str, cache_dir) -> dict:
    env = {**ENV, "TILECUTE_CACHE_DIR": str(cache_dir), "TILECUTE_ARCH": "sm_90a"}
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


HIT_CHILD = """
    import json, sys, time
    import elementwise as E
    import tilecute
    from tilecute import cache
    calls = []
    real = cache.get_or_build
    def spy(key, build, **kwargs):
        def counting(folder):
            calls.append(key)
            return build(folder)
        return real(key, counting, **kwargs)
    cache.get_or_build = spy
    t = time.perf_counter()
    k = tilecute.compile(E.vector_add("float16"))
    dt = time.perf_counter() - t
    k.launcher  # loads launcher.so and hands it the cubin
    print(json.dumps({"builds": len(calls), "path": str(k.path), "seconds": dt,
                      "cutlass": "cutlass" in sys.modules,
                      "compiler_modules": sorted(m for m in sys.modules if m.startswith(
                          ("tilecute.codegen", "tilecute.transform", "tilecute.host", "jinja2")))}))
"""


def test_second_process_hits_the_cache_without_cutlass_or_the_codegen(tmp_path):
    first = _child(HIT_CHILD, tmp_path)
    assert first["builds"] == 1
    second = _child(HIT_CHILD, tmp_path)
    assert second["builds"] == 0 and second["path"] == first["path"]
    assert second["cutlass"] is False  # the cubin was produced by the first process
    assert second["compiler_modules"] == []


def test_eight_processes_compiling_one_new_program_build_it_once(tmp_path):
    counter = tmp_path / "builds.txt"
    code = f"""
        import json, os, elementwise as E, tilecute
        from tilecute import driver
        real = driver.build_entry
        def counted(*a, **k):
            with open({str(counter)!r}, "a") as f:
                f.write(str(os.getpid()) + "\\n")
            return real(*a, **k)
        driver.build_entry = counted
        k = tilecute.compile(E.two_kernels("float32"))
        k.launcher
        print(json.dumps({{"path": str(k.path)}}))
    """
    env = {**ENV, "TILECUTE_CACHE_DIR": str(tmp_path / "c"), "TILECUTE_ARCH": "sm_90a"}
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(8)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    paths = {json.loads(o[0].strip().splitlines()[-1])["path"] for o in outs}
    assert len(paths) == 1
    assert len(counter.read_text().split()) == 1


@pytest.mark.parametrize("victim", ["host.py", "launcher.so", "abi.json", "kernel_cute.py",
                                    "tilecute_launcher.h", "tilecute_launcher_runtime.cpp"])
def test_damaged_artifact_is_reported_and_rebuilt(victim, cache_dir):
    k = tilecute.compile(E.vector_add("float16"), target="sm_90a")
    path = k.path
    with open(path / victim, "r+b") as f:
        f.truncate(10)
    with pytest.warns(Warning, match=victim):
        k2 = tilecute.compile(E.vector_add("float16"), target="sm_90a")
    assert k2.path == path and (path / victim).stat().st_size > 10


def test_load_refuses_a_damaged_entry_and_runs_a_whole_one(cache_dir):
    k = tilecute.compile(E.vector_add("float16"), target="sm_90a")
    loaded = tilecute.load(k.path)
    assert loaded.abi == k.abi
    (k.path / "abi.json").write_text("{}")
    with pytest.raises(RuntimeError, match="abi.json"):
        tilecute.load(k.path)


def test_world_writable_cache_root_is_refused(cache_dir):
    cache_dir.mkdir(mode=0o777)
    os.chmod(cache_dir, 0o777)
    with pytest.raises(PermissionError, match="writable"):
        tilecute.compile(E.vector_add("float16"), target="sm_90a")


def test_out_idx_must_name_tensors(cache_dir):
    with pytest.raises(ValueError, match="out_idx 3 names scalar argument 'alpha'"):
        tilecute.compile(E.scaled_add(), out_idx=[3], target="sm_90a")


def test_jit_decorator_caches_per_arguments(cache_dir):
    calls = []

    @tilecute.jit(target="sm_90a")
    def make(block):
        calls.append(block)
        return E.vector_add("float16", block=block)

    assert make(512) is make(512) and len(calls) == 1
    assert make(256) is not make(512)


def test_stream_handles_from_any_framework():
    from tilecute.runtime.kernel import stream_handle

    class Protocol:
        def __cuda_stream__(self):
            return (0, 1234)

    class TorchLike:
        cuda_stream = 77

    class CupyLike:
        ptr = 88

    assert stream_handle(5) == 5
    assert stream_handle(Protocol()) == 1234
    assert stream_handle(TorchLike()) == 77
    assert stream_handle(CupyLike()) == 88
    with pytest.raises(TypeError, match="cannot take a CUDA stream handle from str"):
        stream_handle("default")


def test_launch_with_stream_keyword_reaches_the_launcher(vadd):
    a = torch.randn(64).half()
    # the stream is accepted and the call proceeds to the argument checks
    with pytest.raises(ValueError, match="expected a CUDA tensor"):
        vadd.launch(a, a, a, stream=0)
