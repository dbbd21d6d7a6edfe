"""benchmarks/launch_overhead.py, its raw cuLaunchKernel peer, benchmarks/ffi_arg_cost.py and
benchmarks/launcher_cpu.py, checked without a GPU.

- the script's arguments;
- the raw loop's parameter lists, made from each case's launch ABI;
- benchmarks/raw_launch.cpp built with g++ against a fake libcuda (direct entry points):
  it launches the kernel the cubin names with the parameters it was given, and for the TMA
  case encodes the same descriptors as tilecute's launcher (run against the fake driver of
  tests/fake_cuda with its tensor-map encoder) for the same tensor, on every launch for its
  first peer and once for the second;
- ffi_arg_cost.py's CPU run;
- launcher_cpu.py against its do-nothing driver.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

TESTS = Path(__file__).resolve().parent
BENCH = TESTS.parent / "benchmarks"
# after the examples (tests/conftest.py puts them first): benchmarks/gemm.py must not shadow
# examples/gemm.py for the test files that run after this one
sys.path.append(str(BENCH))

import launch_overhead as L  # noqa: E402
import tilecute  # noqa: E402
import tma_ops  # noqa: E402
from fake_cuda import driver_env, fake_direct_libcuda, fake_libcuda, parse_encode, text_cubin  # noqa: E402
from tilecute.toolchain import cuda_include_dir  # noqa: E402

# tilecute's launcher against the fake driver of tests/fake_cuda: the encodes of one call
TILECUTE_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import tvm_ffi
from fake_cuda import FakeTensor, open_driver

launcher, cubin, function = sys.argv[2:5]
cuda = open_driver()
mod = tvm_ffi.load_module(launcher)
mod["__tilecute_set_cubin"](cubin)
x = FakeTensor((64, 64), "float16", data=0x100000)
y = FakeTensor((64, 64), "float16", data=0x200000)
mod[function](x, y)
print(json.dumps(cuda.fake_tma_log().decode().splitlines()))
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """Each case's tilecute kernel and CPU arguments (shapes as in the benchmark)."""
    mp = pytest.MonkeyPatch()
    mp.setenv("TILECUTE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    try:
        compiled = L.case_kernels(list(L.CASES.values()))
        yield {case: (kernel, make("cpu")) for case, (kernel, make) in compiled.items()}
    finally:
        mp.undo()


def kernel_cubin(path: Path, kernel) -> Path:
    """The fake drivers' text "cubin" for a compiled kernel's first launch."""
    return text_cubin(path, kernel.abi.kernels[:1])


def test_the_benchmarks_folder_does_not_shadow_the_examples():
    spec = importlib.machinery.PathFinder.find_spec("gemm", sys.path)
    assert Path(spec.origin).parent.name == "examples", spec.origin


def test_arguments():
    args = L.parse_args([])
    assert (args.iters, args.burst) == (20000, 200)
    assert args.cases == ["3 tensors", "10 tensors + 4 scalars", "2 TMA descriptors"]
    assert L.parse_args(["--cases", "tma", "--iters", "10", "--burst", "5"]).cases == ["2 TMA descriptors"]
    for bad in (["--cases", "3,foo"], ["--cases", ""], ["--iters", "0"]):
        with pytest.raises(SystemExit):
            L.parse_args(bad)


def test_raw_parameters_come_from_the_launch_abi(kernels):
    vector_add, args = kernels["3 tensors"]
    assert L.raw_peer_args(vector_add, args) == ["1,1,1", "128,1,1", "0", "p:2048", "p:2048", "p:2048", "i:1024"]
    many, args = kernels["10 tensors + 4 scalars"]
    assert L.raw_peer_args(many, args) == ["1,1,1", "128,1,1", "0", *["p:2048"] * 10, "i:1024", "f:0.5", "f:1.0",
                                           "i:3", "i:1"]
    tma, args = kernels["2 TMA descriptors"]
    assert [p.name for p in tma.abi.kernels[0].params] == ["A_ptr", "B_ptr", "D0", "D1", "A_desc", "B_desc"]
    assert L.raw_peer_args(tma, args) == ["1,1,1", "128,1,1", str(tma.abi.kernels[0].dynamic_smem),
                                          "p:8192", "p:8192", "i:64", "i:64", "t:0:64x64:64x64:128", "t:1:64x64:64x64:128"]
    # a bigger tensor: the grid expression is evaluated with the launcher's floor semantics
    big = [torch.empty(130, 72, dtype=torch.float16) for _ in range(2)]
    assert L.raw_peer_args(tma, big)[0] == "6,1,1"  # ceildiv(130, 64) * ceildiv(72, 64) blocks


def test_grid_expressions_floor_like_python():
    assert L._grid_value("(tc_ceildiv(sym_N, 1024) * tc_floordiv(sym_M, 3))", {"N": 1025, "M": -7}) == 2 * -3
    assert L._grid_value("tc_max(tc_mod(sym_N, 3), 1)", {"N": -1}) == 2


@pytest.fixture(scope="module")
def raw_exe(tmp_path_factory):
    """raw_launch.cpp built with g++ against tests/fake_cuda/direct_libcuda.cpp (rpath: no
    LD_LIBRARY_PATH)."""
    fake = fake_direct_libcuda()
    exe = tmp_path_factory.mktemp("raw_launch") / "raw_launch"
    build = subprocess.run(["g++", "-std=c++17", "-O2", "-Wall", "-Werror", f"-I{cuda_include_dir()}",
                            str(BENCH / "raw_launch.cpp"), f"-L{fake}", f"-Wl,-rpath,{fake}", "-lcuda", "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    return exe


def run_raw(exe, cubin, kernel, args, iters=10, burst=3):
    out = subprocess.run([str(exe), str(cubin), kernel.abi.kernels[0].symbol, str(iters), str(burst),
                          *L.raw_peer_args(kernel, args)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    report = out.stderr.splitlines()
    counts = {line.split()[0]: int(line.split()[1]) for line in report[:2]}
    seen = dict(line.rsplit(" count=", 1) for line in report[2:])
    encodes = {line: int(n) for line, n in seen.items() if line.startswith("tiled ")}
    launches = {line: int(n) for line, n in seen.items() if line.startswith("launch ")}
    return rows, counts, encodes, launches


def test_raw_loop_launches_the_cubin_kernel_with_its_parameters(raw_exe, kernels, tmp_path):
    kernel, args = kernels["10 tensors + 4 scalars"]
    rows, counts, encodes, launches = run_raw(raw_exe, kernel_cubin(tmp_path / "k.cubin", kernel), kernel, args)
    assert [(r["peer"], r["mode"]) for r in rows] == [(L.RAW, "loop"), (L.RAW, "burst3")]
    assert all(r["us_per_call"] >= 0 for r in rows)
    calls = 1000 + 10 + 50 * 3  # warm-up, loop, 50 bursts
    assert counts == {"encodes": 0, "launches": calls}
    (line,) = launches
    fields = dict(f.split("=", 1) for f in line.split()[2:])
    assert (fields["grid"], fields["block"], fields["smem"], fields["extra"]) == ("1,1,1", "128,1,1", "0", "0")
    params = fields["params"].split(",")
    pointers = [int.from_bytes(bytes.fromhex(p), "little") for p in params[:10]]
    assert len(set(pointers)) == 10 and all(p >= 0x100000 for p in pointers)  # ten fresh buffers
    assert params[10:] == ["00040000", "0000003f", "0000803f", "03000000", "01000000"]  # 1024, 0.5f, 1.0f, 3, 1


def test_raw_loop_encodes_the_descriptors_tilecute_encodes(raw_exe, kernels, tmp_path):
    kernel, args = kernels["2 TMA descriptors"]
    cubin = kernel_cubin(tmp_path / "k.cubin", kernel)
    rows, counts, encodes, launches = run_raw(raw_exe, cubin, kernel, args)
    per_call = f"{L.RAW}, 2 cuTensorMapEncodeTiled per call"
    once = f"{L.RAW}, 2 descriptors encoded once, outside the loop"
    assert [(r["peer"], r["mode"]) for r in rows] == [(per_call, "loop"), (per_call, "burst3"),
                                                      (once, "loop"), (once, "burst3")]
    assert L.raw_baseline([dict(r, case="c") for r in rows], "c") == {r["mode"]: r["us_per_call"] for r in rows[:2]}
    calls = 1000 + 10 + 50 * 3
    # per call: both descriptors before every launch (and once before the warm-up); once: once
    assert counts == {"encodes": 2 * (calls + 1) + 2, "launches": 2 * calls}
    raw = sorted((parse_encode(line) for line in encodes), key=lambda e: e["address"])
    assert len(raw) == 2 and raw[0]["address"] != raw[1]["address"]

    # tilecute's launcher, same kernel, same (64, 64) float16 tensors, on the launcher tests' fake driver
    env = driver_env(fake_libcuda(tensor_maps=True))
    run = subprocess.run([sys.executable, "-c", TILECUTE_SCRIPT, str(TESTS), str(kernel.path / "launcher.so"),
                          str(cubin), kernel.name], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    ours = [parse_encode(line) for line in json.loads(run.stdout.strip().splitlines()[-1])]
    assert [e["address"] for e in ours] == [0x100000, 0x200000]
    for theirs, mine in zip(ours, raw):
        assert {k: v for k, v in theirs.items() if k != "address"} == {k: v for k, v in mine.items() if k != "address"}
    assert ours[0] == {"mode": "tiled", "type": 6, "rank": 2, "address": 0x100000, "dims": [64, 64], "strides": [128],
                       "box": [64, 64], "element_strides": [1, 1], "interleave": 0, "swizzle": 0, "l2": 2, "oob": 0}  # L2_128B

    # each launch gets the descriptors over its own buffers, by value, after the pointers and symbols
    (line,) = launches
    fields = dict(f.split("=", 1) for f in line.split()[2:])
    assert (fields["grid"], fields["block"], fields["smem"]) == ("1,1,1", "128,1,1",
                                                                 str(kernel.abi.kernels[0].dynamic_smem))
    a, b, d0, d1, a_desc, b_desc = fields["params"].split(",")
    assert (d0, d1) == ("40000000", "40000000")
    for ptr, desc in ((a, a_desc), (b, b_desc)):
        address = int.from_bytes(bytes.fromhex(ptr), "little")
        want = (0x414D54).to_bytes(8, "little") + bytes(8) + address.to_bytes(8, "little") + bytes(128 - 24)
        assert desc == want.hex()


def test_ffi_arg_cost_runs_on_cpu():
    run = subprocess.run([sys.executable, str(BENCH / "ffi_arg_cost.py"), "--samples", "1", "--device", "cpu",
                          "--no-subprocess"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert lines[0]["env"] == "versions" and "torch.Tensor.__dlpack_c_exchange_api__" in lines[0]
    rows = {(r["what"], r["args"]): r["ns_per_call"] for r in lines if "what" in r}
    assert ("noop(*torch tensors)", 10) in rows and ("noop(*ints)", 10) in rows
    assert ("fast call (*torch tensors)", 10) in rows  # tilecute's call path, beside TVM FFI's
    assert all(ns > 0 for ns in rows.values())
    (summary,) = [r for r in lines if "summary" in r]
    assert "noop(*torch tensors)" in summary and "torch tensor minus int, per argument (10 of each)" in summary


def test_fragment_vector_compares_two_plans():
    """benchmarks/fragment_vector.py: the forced T.Fragment gives TileLang's plan (one
    element on each of 128 threads), the default tilecute's (4 on 32 threads), and the
    control case the same layout either way; without a GPU the script builds every case."""
    sys.path.insert(0, str(BENCH))
    import fragment_vector as F

    def layout(v, block=128, threads=128):
        src = tilecute.compile(F.program(1 << 14, block, threads, "float32", False, v)).get_kernel_source()
        return [line.strip() for line in src.splitlines() if line.strip().startswith("a = ")][0]

    assert "(4,)" in layout(None) and "4 consecutive" in layout(None)
    assert F.tilelang_vector(128, 128, "float32") == 1 and "(1,)" in layout(1)
    assert F.tilelang_vector(1024, 256, "float32") == 4 and layout(None, 1024, 256) == layout(4, 1024, 256)
    run = subprocess.run([sys.executable, str(BENCH / "fragment_vector.py"), "--n", "65536"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout.splitlines()[-1]) == {"skipped": "no GPU; the programs built"}


def test_launcher_cpu_calls_every_case_through_the_null_driver(tmp_path):
    """benchmarks/launcher_cpu.py: each case's launcher (linking the launcher runtime object)
    passes its checks, encodes its descriptors and launches through null_libcuda.cpp in the
    C++ loop (a failed first call exits 1)."""
    env = dict(os.environ, TILECUTE_CACHE_DIR=str(tmp_path / "cache"),
               TILECUTE_LAUNCHER_RUNTIME_DIR=str(tmp_path / "runtime"))
    run = subprocess.run([sys.executable, str(BENCH / "launcher_cpu.py"), "--calls", "1000", "--rounds", "1",
                          "--repeats", "1"], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    rows = [json.loads(line) for line in run.stdout.splitlines()]
    assert {(r["case"], r["stream"]) for r in rows} == {
        (case, stream) for case in ("3 tensors", "10 tensors + 4 scalars", "3 TMA descriptors")
        for stream in ("env", "explicit")}
    assert all(r["ns_per_call"] > 0 for r in rows)
    assert list((tmp_path / "runtime").glob("*/tilecute_launcher_runtime.o"))
