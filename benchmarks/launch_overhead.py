"""Per-call host cost of launching a tiny kernel: tilecute vs its peers, in one run.

Cases (all peers measured in the same process, one after the other):

* "3 tensors" (fp16 vector add, 1024 elements, one block): tilecute vs torch.add(out=),
  CuTe DSL's own --enable-tvm-ffi function (benchmarks/cute_dsl_peer.py), Triton (if
  installed), and a C++ loop of raw cuLaunchKernel on tilecute's own cubin
  (benchmarks/raw_launch.cpp, built with nvcc here).
* "10 tensors + 4 scalars" (examples/elementwise.many_args): tilecute vs the raw loop.
* "2 TMA descriptors" (sm_90+; examples/tma_ops.tma_copy with a 64x64 box on a (64, 64)
  fp16 tensor: one block, one TMA load and one TMA store): tilecute, whose launcher encodes
  both descriptors with cuTensorMapEncodeTiled on every call, vs the raw loop doing the same
  (2 cuTensorMapEncodeTiled + cuLaunchKernel per call: the baseline of this case), the raw
  loop with the descriptors encoded once outside the loop (labelled so; not what a launcher
  that takes new tensors every call can do), the CuTe DSL TMA copy with its descriptors
  built in the DSL's host code (benchmarks/cute_dsl_tma_peer.py, shared with
  benchmarks/tma.py), Triton with host-side TensorDescriptors made per call (if installed
  and new enough), and torch's y.copy_(x) (no TMA; a reference for "one torch op").

Two modes each: a long loop (throughput; the GPU queue may push back) and bursts of
--burst launches with the queue drained between bursts (host latency).  Prints one JSON line
per (case, peer, mode), then per case a summary line with every peer's ratio to the raw
loop (the issue's goal: tilecute <= 1.5x).

    python benchmarks/launch_overhead.py [--iters 20000] [--burst 200] [--cases 3,10,tma]

Without a GPU it checks what it can and exits 0: each case's tilecute kernel compiles to a
cubin (arch from TILECUTE_ARCH, sm_90a if unset), the raw loop's parameter lists are made
from the launch ABIs, raw_launch.cpp compiles (g++ against the CUDA headers), and the CuTe
DSL peers compile (CUTE_DSL_ARCH, sm_90a if unset); one JSON line per check.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "examples"))
if str(HERE) not in sys.path:  # the peers (cute_dsl_peer, ...); after the examples, whose
    sys.path.append(str(HERE))  # gemm.py this folder's gemm.py must not shadow for importers
N = 1024  # one block: the kernel itself is ~2 us of GPU time
TMA_SHAPE = (64, 64)  # one 64x64 box: one block
CASES = {"3": "3 tensors", "10": "10 tensors + 4 scalars", "tma": "2 TMA descriptors"}
RAW = "raw cuLaunchKernel (C++)"


def measure(name, call, iters, burst, case, rounds=50):
    for _ in range(2000):
        call()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        call()
    torch.cuda.synchronize()
    loop = (time.perf_counter() - t0) / iters * 1e6
    total = 0.0
    for _ in range(rounds):
        s = time.perf_counter()
        for _ in range(burst):
            call()
        total += (time.perf_counter() - s) / burst * 1e6
        torch.cuda.synchronize()
    rows = [{"case": case, "peer": name, "mode": "loop", "us_per_call": round(loop, 3)},
            {"case": case, "peer": name, "mode": f"burst{burst}", "us_per_call": round(total / rounds, 3)}]
    for r in rows:
        print(json.dumps(r), flush=True)
    return rows


def skipped(case, peer, error):
    print(json.dumps({"case": case, "peer": peer, "skipped": f"{type(error).__name__}: {error}"}), flush=True)
    return []


# -- peers ------------------------------------------------------------------------------------


def cute_dsl_peer():
    from cute_dsl_peer import build_add

    return build_add()


def cute_dsl_tma_peer():
    """The CuTe DSL TMA copy of one (64, 64) box per block, 2 descriptors (one pair)."""
    import cute_dsl_tma_peer as P

    return P.build(1)


def triton_peer():
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(a, b, c, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(c + offs, tl.load(a + offs, mask=m) + tl.load(b + offs, mask=m), mask=m)

    return lambda a, b, c: add_kernel[(1,)](a, b, c, N, BLOCK=1024)


def triton_tma_kernel():
    """Triton's TMA copy: one (64, 64) box per program through host-side tensor descriptors
    (triton.tools.tensor_descriptor, Triton 3.4+), whose CUtensorMaps Triton's launcher
    encodes on every call."""
    import triton
    import triton.language as tl

    @triton.jit
    def tma_copy_kernel(a_desc, b_desc, BM: tl.constexpr, BN: tl.constexpr):
        m = tl.program_id(0) * BM
        n = tl.program_id(1) * BN
        b_desc.store([m, n], a_desc.load([m, n]))

    return tma_copy_kernel


def triton_tma_peer():
    from triton.tools.tensor_descriptor import TensorDescriptor

    kernel = triton_tma_kernel()
    box = [64, 64]

    def call(x, y):
        grid = (-(-x.shape[0] // box[0]), -(-x.shape[1] // box[1]))
        kernel[grid](TensorDescriptor.from_tensor(x, box), TensorDescriptor.from_tensor(y, box), BM=box[0], BN=box[1])

    return call


# -- the raw cuLaunchKernel loop ------------------------------------------------------------


def _grid_value(expr: str, symbols: dict) -> int:
    """A launch ABI grid expression (C++ over sym_<name> int64 locals and the launcher's
    helpers) evaluated in Python with the same floor semantics."""
    helpers = {"tc_ceildiv": lambda a, b: -(-a // b), "tc_floordiv": lambda a, b: a // b,
               "tc_mod": lambda a, b: a % b, "tc_min": min, "tc_max": max}
    names = {f"sym_{k}": v for k, v in symbols.items()}
    return int(eval(expr, {"__builtins__": {}}, {**helpers, **names}))  # noqa: S307 (our own ABI)


def raw_peer_args(kernel, args) -> list[str]:
    """raw_launch.cpp's command-line arguments after ITERS BURST: GRID BLOCK SMEM PARAM...,
    for a call of ``kernel`` with ``args`` (tensors: shape, dtype and contiguity are read;
    any device).  Pointers get fresh buffers of the tensors' sizes, symbols the values the
    tensors bind, scalars the given values, TMA descriptors the tensor's shape and box."""
    abi = kernel.abi
    if len(abi.kernels) != 1:
        raise NotImplementedError(f"{abi.function}: the raw loop launches one kernel, the ABI has {len(abi.kernels)}")
    launch = abi.kernels[0]
    if launch.cluster:
        raise NotImplementedError(f"{abi.function}: the raw loop does not launch clusters")
    values = {spec.name: value for spec, value in zip(abi.args, args)}
    symbols = {}
    for s in abi.symbols:
        t = args[s.arg]
        symbols[s.name] = int(t.shape[s.dim] if s.field == "shape" else t.stride()[s.dim])
    pointer_index = {}
    params = []
    for i, p in enumerate(launch.params):
        if p.kind == "pointer":
            t = values[p.source]
            pointer_index[p.source] = i
            params.append(f"p:{t.numel() * t.element_size()}")
        elif p.kind == "scalar":
            value = symbols[p.source] if p.from_symbol else values[p.source]
            if p.dtype == "int32":
                params.append(f"i:{int(value)}")
            elif p.dtype == "float32":
                params.append(f"f:{float(value)!r}")
            else:
                raise NotImplementedError(f"{abi.function}: scalar '{p.name}' of dtype {p.dtype}")
        elif p.kind == "tma_desc":
            t, spec = values[p.source], p.tma
            plain = (spec.mode == "tiled" and spec.swizzle == 0 and spec.interleave == 0
                     and spec.oob_fill == "zero" and spec.element_strides in (None, (1,) * len(spec.box)))
            if p.dtype != "float16" or not plain or not t.is_contiguous() or p.source not in pointer_index:
                raise NotImplementedError(f"{abi.function}: descriptor '{p.name}' is not a plain tiled float16 "
                                          "one over a contiguous tensor whose pointer comes first")
            shape = "x".join(str(d) for d in t.shape)
            box = "x".join(str(b) for b in spec.box)
            params.append(f"t:{pointer_index[p.source]}:{shape}:{box}:{spec.l2_promotion}")
        else:
            raise NotImplementedError(f"{abi.function}: parameter kind {p.kind}")
    grid = ",".join(str(_grid_value(g, symbols)) for g in launch.grid)
    block = ",".join(str(b) for b in launch.block)
    return [grid, block, str(launch.dynamic_smem), *params]


def raw_launch_exe() -> Path:
    """raw_launch.cpp built with nvcc (or g++ and the CUDA headers) into a temporary file
    named by the source's hash, so an edited source never runs as an old binary."""
    source = HERE / "raw_launch.cpp"
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    exe = Path(tempfile.gettempdir()) / f"tilecute_raw_launch_{digest}"
    if not exe.exists():
        nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
        tmp = exe.with_name(exe.name + f".{os.getpid()}")
        if Path(nvcc).exists():
            cmd = [nvcc, "-O2", "-o", str(tmp), str(source), "-lcuda"]
        else:
            from tilecute.toolchain import cuda_include_dir, cxx_compiler

            cmd = [cxx_compiler(), "-std=c++17", "-O2", f"-I{cuda_include_dir()}", "-o", str(tmp), str(source),
                   "-lcuda"]
        subprocess.run(cmd, check=True)
        os.replace(tmp, exe)
    return exe


def raw_peer(kernel, args, iters: int, burst: int, case: str):
    """raw_launch.cpp on tilecute's own cubin, parameters described from the launch ABI."""
    cmd = [str(raw_launch_exe()), kernel.ensure_cubin(), kernel.abi.kernels[0].symbol, str(iters), str(burst),
           *raw_peer_args(kernel, args)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"{case}: raw loop failed ({run.returncode}): {' '.join(cmd)}\n{run.stderr}")
    rows = [dict(case=case, **json.loads(line)) for line in run.stdout.splitlines() if line.startswith("{")]
    for r in rows:
        print(json.dumps(r), flush=True)
    return rows


def raw_baseline(rows, case):
    """The raw loop that does what tilecute does per call (for TMA: encodes per call)."""
    return {r["mode"]: r["us_per_call"] for r in rows
            if r["case"] == case and r["peer"].startswith(RAW) and "once" not in r["peer"]}


# -- cases ------------------------------------------------------------------------------------


def case_kernels(cases):
    """{case: (tilecute kernel, its arguments on the CPU)}: what the CPU check and the
    GPU run share."""
    import tilecute
    import elementwise as E
    import tma_ops

    out = {}
    if CASES["3"] in cases:
        out[CASES["3"]] = (tilecute.compile(E.vector_add("float16")),
                           lambda dev: [torch.randn(N, device=dev, dtype=torch.float16) for _ in range(2)]
                           + [torch.empty(N, device=dev, dtype=torch.float16)])
    if CASES["10"] in cases:
        out[CASES["10"]] = (tilecute.compile(E.many_args("float16")),
                            lambda dev: [torch.randn(N, device=dev, dtype=torch.float16) for _ in range(9)]
                            + [torch.empty(N, device=dev, dtype=torch.float16), 0.5, 1.0, 3, 1])
    if CASES["tma"] in cases:
        out[CASES["tma"]] = (tilecute.compile(tma_ops.tma_copy(TMA_SHAPE)),
                             lambda dev: [torch.randn(*TMA_SHAPE, device=dev, dtype=torch.float16),
                                          torch.empty(*TMA_SHAPE, device=dev, dtype=torch.float16)])
    return out


def run_gpu(cases, iters, burst):
    rows = []
    kernels = case_kernels(cases)

    case = CASES["3"]
    if case in kernels:
        kernel, make = kernels[case]
        a, b, c = make("cuda")
        kernel(a, b, c)
        torch.cuda.synchronize()
        assert torch.equal(c, a + b), "tilecute result is wrong"
        rows += measure("tilecute", lambda: kernel(a, b, c), iters, burst, case)
        rows += measure("torch.add(out=)", lambda: torch.add(a, b, out=c), iters, burst, case)
        try:
            f = cute_dsl_peer()
            f(a, b, c)
            torch.cuda.synchronize()
            assert torch.equal(c, a + b)
            rows += measure("CuTe DSL --enable-tvm-ffi", lambda: f(a, b, c), iters, burst, case)
        except ImportError as e:
            print(json.dumps({"peer": "CuTe DSL --enable-tvm-ffi", "skipped": str(e)}))
        try:
            t = triton_peer()
            rows += measure("triton", lambda: t(a, b, c), iters, burst, case)
        except ImportError as e:
            print(json.dumps({"peer": "triton", "skipped": str(e)}))
        rows += raw_peer(kernel, [a, b, c], iters, burst, case)

    case = CASES["10"]
    if case in kernels:
        wide, make = kernels[case]
        args = make("cuda")
        xs, y = args[:9], args[9]
        wide(*args)
        torch.cuda.synchronize()
        ref = (sum(x.float() for x in xs) * 0.5 + 1.0 + 2).half()
        assert torch.allclose(y.float(), ref.float(), rtol=1e-2, atol=1e-1), "many_args result is wrong"
        rows += measure("tilecute", lambda: wide(*args), iters, burst, case)
        rows += raw_peer(wide, args, iters, burst, case)

    case = CASES["tma"]
    if case in kernels:
        major, minor = torch.cuda.get_device_capability()
        if major < 9:
            skipped(case, "all", RuntimeError(f"TMA needs sm_90+, this GPU is sm_{major}{minor}"))
        else:
            rows += run_tma_case(*kernels[case], iters, burst, case)

    for case in [c for c in CASES.values() if c in kernels]:
        raw = raw_baseline(rows, case)
        summary = {r["peer"] + " / " + r["mode"]: round(r["us_per_call"] / raw[r["mode"]], 2)
                   for r in rows if r["case"] == case and r["mode"] in raw}
        print(json.dumps({"summary": f"ratio to raw cuLaunchKernel, {case}",
                          "device": torch.cuda.get_device_name(), **summary}))
    return rows


def run_tma_case(kernel, make, iters, burst, case):
    rows = []
    x, y = make("cuda")

    def check(peer, fn):
        y.zero_()
        fn()
        torch.cuda.synchronize()
        assert torch.equal(y, x), f"{case}: {peer}: wrong result"

    check("tilecute", lambda: kernel(x, y))
    ndesc = sum(p.kind == "tma_desc" for p in kernel.abi.kernels[0].params)
    assert ndesc == 2, f"{case}: the kernel has {ndesc} descriptors"
    rows += measure("tilecute", lambda: kernel(x, y), iters, burst, case)
    peer = "CuTe DSL --enable-tvm-ffi (descriptors built in the DSL)"
    try:
        f = cute_dsl_tma_peer()
        check(peer, lambda: f(x, y))
        rows += measure(peer, lambda: f(x, y), iters, burst, case)
    except Exception as e:  # a peer that cannot run is reported, the others still measured
        skipped(case, peer, e)
    peer = "triton (host TensorDescriptor per call)"
    try:
        t = triton_tma_peer()
        check(peer, lambda: t(x, y))
        rows += measure(peer, lambda: t(x, y), iters, burst, case)
    except Exception as e:
        skipped(case, peer, e)
    rows += measure("torch y.copy_(x) (no TMA)", lambda: y.copy_(x), iters, burst, case)
    rows += raw_peer(kernel, [x, y], iters, burst, case)
    return rows


def check_cpu(cases):
    """No GPU: compile and check what can be compiled and checked; one JSON line each."""
    os.environ.setdefault("TILECUTE_ARCH", "sm_90a")
    os.environ.setdefault("CUTE_DSL_ARCH", os.environ["TILECUTE_ARCH"])

    def ok(case, check, **extra):
        print(json.dumps({"case": case, "check": check, "ok": True, **extra}), flush=True)

    for case, (kernel, make) in case_kernels(cases).items():
        cubin = kernel.ensure_cubin()
        ok(case, "tilecute kernel compiled to a cubin", arch=os.environ["TILECUTE_ARCH"], cubin=cubin,
           descriptors=sum(p.kind == "tma_desc" for p in kernel.abi.kernels[0].params))
        ok(case, "raw loop parameters from the launch ABI",
           argv=[kernel.abi.kernels[0].symbol, *raw_peer_args(kernel, make("cpu"))])
    from tilecute.toolchain import cuda_include_dir, cxx_compiler

    cmd = [cxx_compiler(), "-std=c++17", "-O2", "-Wall", f"-I{cuda_include_dir()}", "-fsyntax-only",
           str(HERE / "raw_launch.cpp")]
    subprocess.run(cmd, check=True)
    ok("all", "raw_launch.cpp compiles", command=" ".join(cmd))
    if CASES["3"] in cases:
        cute_dsl_peer()
        ok(CASES["3"], "CuTe DSL peer compiles", arch=os.environ["CUTE_DSL_ARCH"])
    if CASES["tma"] in cases:
        cute_dsl_tma_peer()
        ok(CASES["tma"], "CuTe DSL TMA peer compiles", arch=os.environ["CUTE_DSL_ARCH"])
    print(json.dumps({"skipped": "no CUDA GPU: nothing was measured"}), flush=True)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=20000, help="launches in the long loop")
    ap.add_argument("--burst", type=int, default=200, help="launches per burst (50 bursts)")
    ap.add_argument("--cases", default="3,10,tma",
                    help="comma-separated: 3 (3 tensors), 10 (10 tensors + 4 scalars), tma (2 TMA descriptors)")
    args = ap.parse_args(argv)
    keys = [k.strip() for k in args.cases.split(",") if k.strip()]
    unknown = [k for k in keys if k not in CASES]
    if unknown or not keys:
        ap.error(f"--cases: unknown {unknown or 'empty'}; choose from {', '.join(CASES)}")
    if args.iters < 1 or args.burst < 1:
        ap.error("--iters and --burst must be positive")
    args.cases = [CASES[k] for k in keys]
    return args


def main(argv=None):
    args = parse_args(argv)
    if not torch.cuda.is_available():
        check_cpu(args.cases)
        return
    run_gpu(args.cases, args.iters, args.burst)


if __name__ == "__main__":
    main()
