"""Demo: compile a TileLang-style kernel with tilecute and run it.

With a GPU: runs vector add and a 2-D add, checks them against torch, times one launch.
Without one: builds everything for sm_90a (TILECUTE_ARCH), including the cubin, and
shows where the generated CuTe DSL, host module and C++ launcher are.
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import elementwise as E  # noqa: E402
import tilecute  # noqa: E402


def main():
    try:
        import torch

        gpu = torch.cuda.is_available()
    except ImportError:
        torch, gpu = None, False
    if not gpu:
        os.environ.setdefault("TILECUTE_ARCH", "sm_90a")
    t = time.perf_counter()
    kernel = tilecute.compile(E.vector_add("float16"))
    print(f"compiled {kernel!r} in {time.perf_counter() - t:.2f} s")
    if gpu:
        a = torch.randn(1 << 20, device="cuda", dtype=torch.float16)
        b = torch.randn_like(a)
        c = torch.empty_like(a)
        kernel(a, b, c)
        torch.cuda.synchronize()
        ok = torch.equal(c, a + b)
        print(f"vector_add on {torch.cuda.get_device_name()}: "
              f"{'matches torch' if ok else 'MISMATCH with torch'}")
        add2 = tilecute.compile(E.add_2d(N=1024), out_idx=[2])
        x = torch.randn(333, 1024, device="cuda")
        y = torch.randn_like(x)
        ok2 = torch.equal(add2(x, y), x + y)
        print(f"add_2d (M=333, out_idx): {'matches torch' if ok2 else 'MISMATCH with torch'}")
        sys.exit(0 if ok and ok2 else 1)
    t = time.perf_counter()
    cubin = kernel.ensure_cubin()
    print(f"no GPU here: built the {os.environ['TILECUTE_ARCH']} cubin in "
          f"{time.perf_counter() - t:.2f} s; nothing was launched.")
    print(f"generated sources in {kernel.path}:")
    for name in ("kernel_cute.py", "host.py", "launcher.cpp", "tilecute_launcher.h", "abi.json",
                 Path(cubin).name):
        print(f"  {kernel.path / name}")
    print(f"read them with: tilecute show {kernel.path.name[:12]} "
          "--kind cute|host|launcher|launcher-header|abi")


if __name__ == "__main__":
    main()
