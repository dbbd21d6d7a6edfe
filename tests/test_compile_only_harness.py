"""The compile-only harness (.ci/tilelang_gpu/compile_example.py with compile_only.py) on small
TileLang programs written the way TileLang's example files are: the harness is how TileLang's
examples are checked on a machine with no GPU, so what it reports must be what tilecute did.

- A program that, besides its kernel, imports triton.language for a reference, seeds a
  ``cuda`` generator, forks CUDA's RNG and profiles CUDA activity (the habits of
  deepseek_v32, dsa_hisa, flash_decoding) and asks for the free memory still builds its
  kernel: ``COMPILE OK kernels=1``.
- A form tilecute refuses at parse time (a FrontendError naming it at its line) is
  ``COMPILE REFUSED`` naming the form, not a ``CRASH``.
- TileLang's carver ``CUDA("cuda")`` target reads the driver's attributes: an H100's here.
"""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

HARNESS = os.path.join(os.path.dirname(__file__), "..", ".ci", "tilelang_gpu", "compile_example.py")


def _run(tmp_path, source: str) -> str:
    path = tmp_path / "example_program.py"
    path.write_text(textwrap.dedent(source))
    env = {**os.environ, "CUTE_DSL_ARCH": "sm_90a", "TILECUTE_ARCH": "sm_90a",
           "TILECUTE_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run([sys.executable, os.path.abspath(HARNESS), str(path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("COMPILE")]
    assert lines, done.stdout[-2000:] + done.stderr[-2000:]
    return lines[-1]


def test_reference_habits_do_not_stop_the_kernel(tmp_path):
    line = _run(tmp_path, """
        import torch
        import triton
        import triton.language as tl
        import tilelang
        import tilelang.language as T


        @triton.jit
        def double_ref(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 2, mask=offs < n)


        @tilelang.jit(out_idx=[-1])
        def double(N, block=128):
            @T.prim_func
            def double_kernel(A: T.Tensor((N,), T.float32), B: T.Tensor((N,), T.float32)):
                with T.Kernel(T.ceildiv(N, block), threads=block) as bx:
                    for i in T.Parallel(block):
                        B[bx * block + i] = A[bx * block + i] * 2.0

            return double_kernel


        g = torch.Generator(device="cuda").manual_seed(0)
        assert isinstance(g, torch.Generator) and isinstance(torch.default_generator, torch.Generator)
        with torch.random.fork_rng(devices=[0]):
            torch.cuda.manual_seed_all(0)
            a = torch.randn(1024, device="cuda", generator=g)
        assert triton.cdiv(1000, 128) == 8
        free, total = torch.cuda.mem_get_info()  # (inputs sized by the free memory)
        assert free == total == 80 * 2**30
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]):
            b = double(1024)(a)
    """)
    assert line.startswith("COMPILE OK kernels=1 [double_kernel]"), line


def test_parse_time_refusal_is_refused_not_crash(tmp_path):
    line = _run(tmp_path, """
        import tilelang
        import tilelang.language as T


        @tilelang.jit
        def tmem_gemm(block_M=128, block_N=128):
            @T.prim_func
            def tmem_kernel(C: T.Tensor((block_M, block_N), T.float32)):
                with T.Kernel(1, threads=128) as bx:
                    C_tmem = T.alloc_tmem([block_M, block_N], T.float32)
                    T.copy(C_tmem, C)

            return tmem_kernel


        tmem_gemm()
    """)
    assert line.startswith("COMPILE REFUSED kernels=0"), line
    assert "T.alloc_tmem" in line and "tmem_kernel" in line, line


def test_carver_target_reads_h100_attributes(tmp_path):
    line = _run(tmp_path, """
        from tilelang.carver.arch import CUDA

        target = CUDA("cuda")
        assert target.smem_cap == 48 * 1024, target.smem_cap
        print("smem", target.smem_cap)
    """)
    assert line.startswith("COMPILE OK kernels=0"), line
