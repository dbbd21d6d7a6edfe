"""TileLang's ``T.sync_grid()``: the grid-wide barrier.

Frontend and IR, the launch ABI (the launcher's barrier word as the last kernel parameter,
the kernel launched cooperatively), the CuTe DSL source and its PTX, an sm_90a cubin whose
parameter table matches the ABI, the launcher against the fake driver (cooperative
attribute, one zeroed barrier word per device, the co-residency check), and on a GPU a
two-phase kernel whose second phase reads what other blocks wrote in the first.
"""

from __future__ import annotations

import re

import pytest

import tilecute
import tilecute.language as T
from fake_cuda import DRIVE_HEAD
from tilecute.codegen.cute import emit_cute
from tilecute.transform.launch_abi import LoweringError
from tilecute.transform.pipeline import lower

BLOCKS = 6

# block b doubles its slice of A, then (after every block has) copies block b+1's slice to B
TWO_PHASE = f'''
import tilecute.language as T

@T.prim_func
def rotate(A: T.Tensor(({BLOCKS} * 64,), "float32"), B: T.Tensor(({BLOCKS} * 64,), "float32")):
    with T.Kernel({BLOCKS}, threads=64) as bx:
        tx = T.get_thread_binding()
        A[bx * 64 + tx] = A[bx * 64 + tx] * 2.0
        T.sync_grid()
        B[bx * 64 + tx] = A[(bx + 1) % {BLOCKS} * 64 + tx]
'''


def two_phase():
    return T.from_script(TWO_PHASE)


def test_sync_grid_is_a_statement_in_the_ir():
    func = two_phase()
    assert "T.sync_grid()" in func.script()
    again = T.from_script(func.script())  # the printed form parses back
    assert "T.sync_grid()" in again.script()


def test_abi_passes_the_barrier_word_and_launches_cooperatively():
    plan = lower(two_phase(), "sm_90a")
    (k,) = plan.abi.kernels
    assert k.cooperative
    assert [(p.name, p.kind, p.dtype) for p in k.params][-1] == ("tc_grid_barrier", "grid_barrier", "uint32")
    assert k.params[-1].size == 8
    # the JSON form keeps both
    from tilecute.runtime.abi import LaunchABI
    back = LaunchABI.from_json(plan.abi.to_json())
    assert back.kernels[0].cooperative and back.kernels[0].params[-1].kind == "grid_barrier"


def test_only_the_kernels_that_sync_launch_cooperatively():
    text = TWO_PHASE.replace("        B[bx * 64 + tx] = A[(bx + 1) % 6 * 64 + tx]\n",
                             "        B[bx * 64 + tx] = A[(bx + 1) % 6 * 64 + tx]\n"
                             "    with T.Kernel(1, threads=32) as _:\n"
                             "        B[0] = 1.0\n")
    plan = lower(T.from_script(text), "sm_90a")
    assert [k.cooperative for k in plan.abi.kernels] == [True, False]


def test_cuda_source_calls_the_grid_barrier():
    src = emit_cute(lower(two_phase(), "sm_90a"))
    assert "from tilecute.runtime.cute import grid as tcgrid" in src
    assert re.search(r"def tilecute_rotate_0\(A_ptr: cute.Pointer, B_ptr: cute.Pointer, "
                     r"tc_grid_barrier: cute.Pointer\)", src)
    body = src[src.index("def tilecute_rotate_0"):]
    lines = [line.strip() for line in body.splitlines()]
    i = next(n for n, line in enumerate(lines) if line.startswith("tcgrid.sync_grid(tc_grid_barrier)"))
    assert lines[i - 1].startswith("A[") and lines[i + 1].startswith("B[")


def test_sync_grid_in_a_cluster_kernel_is_refused():
    text = TWO_PHASE.replace("T.Kernel(6, threads=64)", "T.Kernel(6, threads=64, cluster=(2, 1, 1))")
    with pytest.raises(LoweringError, match=r"T.sync_grid\(\) in a kernel launched in clusters"):
        lower(T.from_script(text), "sm_90a")


def test_ptx_counts_on_the_word_between_block_barriers(tmp_path, monkeypatch):
    import cutlass.cute as cute
    from tilecute.runtime.cubingen import import_source

    path = tmp_path / "kernel_cute.py"
    path.write_text(emit_cute(lower(two_phase(), "sm_90a")))
    module = import_source(str(path), "tilecute_test_sync_grid")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    ptx = cute.compile(module.rotate, *module.placeholder_args(),
                       options=f"--keep-ptx --gpu-arch sm_90a --dump-dir {tmp_path}").__ptx__
    body = ptx[ptx.index(".entry tilecute_rotate_0"):]
    order = [m.group(0) for m in re.finditer(
        r"bar\.sync|fence\.acq_rel\.gpu|atom\.global\.add\.u32|ld\.relaxed\.gpu\.global\.b32", body)]
    assert order[:4] == ["bar.sync", "fence.acq_rel.gpu", "atom.global.add.u32",
                         "ld.relaxed.gpu.global.b32"]
    assert order[-2:] == ["fence.acq_rel.gpu", "bar.sync"]


def test_cubin_parameter_table_matches_the_abi(tmp_path):
    info = tilecute.build_cubin(two_phase(), "sm_90a", out_dir=tmp_path)
    (kernel,) = info.kernels.values()
    assert [(p.offset, p.size) for p in kernel.params] == [(0, 8), (8, 8), (16, 8)]


# -- the launcher against the fake driver ----------------------------------------------------

DRIVE = DRIVE_HEAD + r"""
a = FakeTensor((384,), "float32", data=0x100000)
b = FakeTensor((384,), "float32", data=0x200000)
cuda.fake_clear_requests()
mod["rotate"](a, b, 0x1234)
mod["rotate"](a, b, 0x1234)
out["requests"] = cuda.fake_requests().decode().splitlines()
a1 = FakeTensor((384,), "float32", data=0x100000, device="cuda:1")
cuda.fake_set_blocks_per_sm(0)  # device 1 is loaded now: 0 blocks per SM fit
try:
    mod["rotate"](a1, a1)
    out["too_large"] = None
except Exception as e:
    out["too_large"] = [type(e).__name__, str(e).splitlines()[0]]
mod["cleanup"]()
out["log"] = cuda.fake_log().decode().splitlines()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def driven(tmp_path_factory):
    pytest.importorskip("tvm_ffi")
    from fake_cuda import drive_launcher

    source, out = drive_launcher(lower(two_phase(), "sm_90a").abi,
                                 tmp_path_factory.mktemp("sync_grid"), DRIVE)
    assert "CU_LAUNCH_ATTRIBUTE_COOPERATIVE" not in source  # the runtime's, not per launcher
    return out


def test_launcher_launches_cooperatively_with_the_devices_barrier_word(driven):
    from fake_cuda import parse_launch

    log = driven["log"]
    assert log[:5] == ["load device=0", "occupancy tilecute_rotate_0 threads=64 smem=0",
                       f"alloc {0x7000000} bytes=4 device=0", f"memset {0x7000000} value=0 count=1",
                       "synchronize device=0"]
    launches = [parse_launch(line) for line in log if line.startswith("launch")]
    assert len(launches) == 2  # device 1's launch was refused before the driver saw it
    for launch in launches:
        assert launch["cooperative"] == "1" and launch["grid"] == "6,1,1"
        assert launch["params"][2] == (0x7000000).to_bytes(8, "little").hex()  # one word, kept
    assert f"alloc {0x7001000} bytes=4 device=1" in log
    assert {f"free {0x7000000}", f"free {0x7001000}"} <= set(log)  # cleanup gives both back


def test_launcher_refuses_a_grid_that_does_not_fit(driven):
    kind, message = driven["too_large"]
    assert kind == "ValueError"
    assert ("rotate: kernel 'tilecute_rotate_0' calls T.sync_grid(), so every block of its grid must "
            "be resident at once, but its grid has 6 blocks and cuda:1 holds 0 (0 per SM at 64 threads "
            "and 0 bytes of dynamic shared memory, 132 SMs)") in message


def test_launcher_resolves_memory_and_occupancy_entry_points(driven):
    names = {line.split()[0] for line in driven["requests"]}
    assert {"cuMemAlloc", "cuMemFree", "cuMemsetD32", "cuCtxSynchronize", "cuDeviceGetAttribute",
            "cuOccupancyMaxActiveBlocksPerMultiprocessor"} <= names


# -- on a GPU ---------------------------------------------------------------------------------

@pytest.mark.gpu
def test_gpu_blocks_read_what_the_others_wrote_before_the_barrier():
    import torch

    kernel = tilecute.compile(two_phase())
    for _ in range(3):  # the word is reused across launches
        a = torch.arange(BLOCKS * 64, device="cuda", dtype=torch.float32)
        b = torch.zeros_like(a)
        kernel(a, b)
        ref = (torch.arange(BLOCKS * 64, device="cuda", dtype=torch.float32) * 2).roll(-64)
        torch.testing.assert_close(b, ref)


@pytest.mark.gpu
def test_gpu_persistent_grid_of_one_block_per_sm_with_two_barriers():
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    text = f'''
import tilecute.language as T

@T.prim_func
def chain(A: T.Tensor(({sms} * 128,), "int32"), B: T.Tensor(({sms} * 128,), "int32")):
    with T.Kernel({sms}, threads=128) as bx:
        tx = T.get_thread_binding()
        A[bx * 128 + tx] = A[bx * 128 + tx] + 1
        T.sync_grid()
        B[bx * 128 + tx] = A[({sms} - 1 - bx) * 128 + tx]
        T.sync_grid()
        A[bx * 128 + tx] = B[(bx + 1) % {sms} * 128 + tx]
'''
    kernel = tilecute.compile(T.from_script(text))
    a = torch.arange(sms * 128, device="cuda", dtype=torch.int32)
    b = torch.zeros_like(a)
    kernel(a, b)
    a1 = (torch.arange(sms * 128, device="cuda", dtype=torch.int32) + 1).view(sms, 128)
    b_ref = a1.flip(0).reshape(-1)
    torch.testing.assert_close(b, b_ref)
    torch.testing.assert_close(a, b_ref.view(sms, 128).roll(-1, 0).reshape(-1))
    # twice the SMs' worth of blocks at 1 block per SM would not fit: refused, not hung
    big = text.replace(f"T.Kernel({sms}, threads=128)", f"T.Kernel({sms} * 64, threads=1024)")
    big = big.replace(f"({sms} * 128,)", f"({sms} * 64 * 1024,)")
    with pytest.raises(ValueError, match="calls T.sync_grid"):
        tilecute.compile(T.from_script(big))(torch.zeros(sms * 64 * 1024, device="cuda", dtype=torch.int32),
                                             torch.zeros(sms * 64 * 1024, device="cuda", dtype=torch.int32))
