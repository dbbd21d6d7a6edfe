"""``T.alloc_shared`` with a symbolic size (``T.dynamic`` symbols, integer scalar
parameters): TileLang sizes the block's dynamic shared memory at launch from their values.
tilecute places such a buffer after the kernel's static shared bytes
(``KernelScope.launch_shared_bytes``), the launch ABI carries its bytes as a C++ expression
(``KernelLaunch.launch_smem``), and the launcher adds them up at each call and checks the sum
against the device's limit, naming the kernel."""

from __future__ import annotations

import pytest

import tilecute
import tilecute.language as T
from fake_cuda import DRIVE_HEAD
from tilecute.ir import nodes as N
from tilecute.transform.pipeline import lower, run_passes


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")


def reverse_in_shared():
    """B = 2 * reversed(A), staged whole in a shared buffer of N floats."""
    n = T.dynamic("N")

    @T.prim_func
    def reverse(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            s = T.alloc_shared((n,), "float32")
            for k in T.serial(T.ceildiv(n, 128)):
                if k * 128 + tx < n:
                    s[k * 128 + tx] = A[k * 128 + tx] * 2.0
            T.sync_threads()
            for k in T.serial(T.ceildiv(n, 128)):
                if k * 128 + tx < n:
                    B[k * 128 + tx] = s[n - 1 - k * 128 - tx]
    return reverse


def row_tiles(M=256):
    """Tiles of ``rows`` rows (a scalar argument), copied through shared memory with their
    columns mirrored, beside a static shared buffer of column scales."""
    @T.prim_func
    def row_tiles(A: T.Tensor((M, 64), "float16"), W: T.Tensor((64,), "float16"),
                  B: T.Tensor((M, 64), "float16"), rows: T.int32):
        with T.Kernel(T.ceildiv(M, rows), threads=128) as bx:
            w = T.alloc_shared((64,), "float16")
            s = T.alloc_shared((rows, 64), "float16")
            T.copy(W, w)
            T.copy(A[bx * rows:bx * rows + rows, 0:64], s)
            for i, j in T.Parallel(rows, 64):
                B[bx * rows + i, j] = s[i, 63 - j] * w[j]
    return row_tiles


def window_sums(W=1024):
    """Sums of ``width + 1`` consecutive elements, the window's elements in a shared buffer
    of ``width + 128`` (a dim expression of a symbol)."""
    width = T.dynamic("width")

    @T.prim_func
    def window_sums(X: T.Tensor((W,), "float32"), Y: T.Tensor((W,), "float32"),
                    Taps: T.Tensor((width,), "float32")):
        with T.Kernel(W // 128, threads=128) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((width + 128,), "float32")
            for k in T.serial(T.ceildiv(width + 128, 128)):
                if k * 128 + tx < width + 128:
                    g = bx * 128 + k * 128 + tx
                    s[k * 128 + tx] = T.if_then_else(g < W, X[T.min(g, W - 1)], 0.0)
            T.sync_threads()
            acc = T.alloc_var("float32", 0.0)
            for t in T.serial(width + 1):
                acc += s[tx + t]
            Y[bx * 128 + tx] = acc
    return window_sums


def test_the_buffer_follows_the_static_bytes():
    func = run_passes(row_tiles(), "sm_90a")
    (k,) = func.kernels
    slots = {s.buffer.name: s.slot for s in k.body if isinstance(s, N.Allocate)}
    # after the static bytes: w's 128 and its TMA load's mbarrier's 128
    assert k.shared_bytes == slots["s"].offset == 256
    assert slots["s"].offset >= max(slots[b].offset + 128 for b in ("w", "tc_bar0"))
    assert k.launch_shared_bytes is not None
    abi = lower(row_tiles(), "sm_90a").abi
    (launch,) = abi.kernels
    assert launch.dynamic_smem == 256
    assert launch.launch_smem == "((arg_rows * 64) * 2)", launch.launch_smem
    from tilecute.runtime.abi import LaunchABI
    assert LaunchABI.from_json(abi.to_json()).kernels[0].launch_smem == launch.launch_smem


def test_the_kernel_views_it_at_its_run_time_size():
    src = tilecute.compile(reverse_in_shared(), target="sm_90a").get_kernel_source()
    assert "# 0 bytes, then 's' sized at launch" in src
    assert "s = cute.make_tensor(cute.recast_ptr(tc_smem + 0, dtype=cutlass.Float32), " \
           "cute.make_layout(N))" in src, src
    assert "smem=cutlass.Int64(N) * cutlass.Int64(4)" in src, src  # the jit wrapper's launch
    src = tilecute.compile(row_tiles(), target="sm_90a").get_kernel_source()
    assert "cute.make_layout(rows * 64)" in src and "s[i * 64 + 63 - j]" in src, src
    lowered = run_passes(row_tiles(), "sm_90a").script()
    assert "T.tma_copy(W, w" in lowered and "T.tma_copy(A" not in lowered  # (s: no fixed box)


def two_halves():
    """Two shared buffers sized at launch (N and 2 N halves): the second lies past the
    first's bytes, rounded up to 128."""
    n = T.dynamic("N")

    @T.prim_func
    def two_halves(A: T.Tensor((n,), "float16"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            h = T.alloc_shared((n,), "float16")
            f = T.alloc_shared((n * 2,), "float16")
            for k in T.serial(T.ceildiv(n, 128)):
                if k * 128 + tx < n:
                    h[k * 128 + tx] = A[k * 128 + tx]
                    f[2 * (k * 128 + tx)] = A[n - 1 - k * 128 - tx]
                    f[2 * (k * 128 + tx) + 1] = A[k * 128 + tx]
            T.sync_threads()
            for k in T.serial(T.ceildiv(n, 128)):
                if k * 128 + tx < n:
                    i = k * 128 + tx
                    B[i] = T.Cast("float32", h[i]) * T.Cast("float32", f[2 * i]) + f[2 * i + 1]
    return two_halves


def test_a_second_buffer_lies_past_the_first():
    from tilecute.ir.serialize import from_json, to_json

    lowered = run_passes(two_halves(), "sm_90a")
    assert from_json(to_json(lowered)) == lowered  # (launch_offset, launch_shared_bytes)
    (k,) = lowered.kernels
    slots = {s.buffer.name: s.slot for s in k.body if isinstance(s, N.Allocate)}
    assert slots["h"].offset == slots["f"].offset == 0 and slots["h"].launch_offset is None
    src = tilecute.compile(two_halves(), target="sm_90a").get_kernel_source()
    # f starts at N float16 bytes rounded up to 128
    assert "f = cute.make_tensor(cute.recast_ptr(tc_smem + cute.assume(0 + (cutlass.Int64(N) * " \
           "cutlass.Int64(2) + cutlass.Int64(128) - 1) // cutlass.Int64(128) * cutlass.Int64(128), " \
           "divby=128), dtype=cutlass.Float16), cute.make_layout(N * 2))" in src, src
    (launch,) = lower(two_halves(), "sm_90a").abi.kernels
    assert launch.launch_smem == "((tc_ceildiv((sym_N * 2), 128) * 128) + ((sym_N * 2) * 2))", \
        launch.launch_smem


def test_a_pipelined_copy_into_it_keeps_one_stage():
    text = ("import tilecute.language as T\n\nR = T.dynamic('R')\n\n@T.prim_func\n"
            "def f(A: T.Tensor((R * 4, 64), 'float16'), C: T.Tensor((R, 64), 'float32')):\n"
            "    with T.Kernel(1, threads=128):\n"
            "        s = T.alloc_shared((R, 64), 'float16')\n"
            "        for k in T.Pipelined(4, num_stages=2):\n"
            "            T.copy(A[k * R:k * R + R, 0:64], s)\n"
            "            for i, j in T.Parallel(R, 64):\n"
            "                C[i, j] += s[i, j]\n")
    (k,) = run_passes(T.from_script(text), "sm_90a").kernels
    (s,) = [a for a in k.body if isinstance(a, N.Allocate) and a.buffer.name == "s"]
    assert s.stages == 1 and k.launch_shared_bytes is not None


@pytest.mark.parametrize("factory", [reverse_in_shared, row_tiles, window_sums, two_halves])
def test_launch_sized_programs_build(factory, tmp_path):
    assert tilecute.build_cubin(factory(), "sm_90a", out_dir=str(tmp_path)).kernel_names


def _refusal(body: str, params: str = "") -> str:
    text = ("import tilecute.language as T\n\nN = T.dynamic('N')\n\n@T.prim_func\n"
            f"def f(A: T.Tensor((N,), 'float32'){params}):\n"
            "    with T.Kernel(4, threads=128) as bx:\n" + body + "\n")
    with pytest.raises(Exception) as err:
        tilecute.compile(T.from_script(text), target="sm_90a").get_kernel_source()
    return str(err.value)


@pytest.mark.parametrize("body, words", [
    ("        s = T.alloc_shared((bx + 1,), 'float32')\n        s[0] = A[0]",
     ["T.alloc_shared", "'s'", "T.dynamic symbols and scalar parameters"]),
    ("        s = T.alloc_shared((N,), 'float32', stages=2)\n        s[0] = A[0]",
     ["'s'", "takes no layout= or stages="]),
    ("        f = T.alloc_fragment((N,), 'float32')\n        f[0] = A[0]",
     ["'f'", "the shape must be positive ints known at parse time"]),
    ("        s = T.alloc_shared((N,), 'float32')\n        r = T.alloc_fragment((1,), 'float32')\n"
     "        T.copy(A, s)\n        T.reduce_sum(s, r, dim=0)\n        A[0] = r[0]",
     ["T.reduce_sum takes buffers of constant shape; 's' is a shared buffer sized at launch"]),
    ("        s = T.alloc_shared((N, 16), 'float16')\n        b = T.alloc_shared((16, 16), 'float16')\n"
     "        c = T.alloc_fragment((64, 16), 'float32')\n        T.gemm(s, b, c)",
     ["T.gemm takes buffers of constant shape; 's' is a shared buffer sized at launch"]),
])
def test_refusals_name_the_buffer(body, words):
    msg = _refusal(body)
    assert all(w in msg for w in words), msg


# -- the launcher against the fake driver ----------------------------------------------------

DRIVE = DRIVE_HEAD + r"""
for n in (1000, 58112):  # 4000 bytes; 232448, the device's limit
    a = FakeTensor((n,), "float32", data=0x100000)
    mod["reverse"](a, a)
try:
    a = FakeTensor((58113,), "float32", data=0x100000)
    mod["reverse"](a, a)
    out["too_large"] = None
except Exception as e:
    out["too_large"] = [type(e).__name__, str(e).splitlines()[0]]
out["log"] = cuda.fake_log().decode().splitlines()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def driven(tmp_path_factory):
    pytest.importorskip("tvm_ffi")
    from fake_cuda import drive_launcher

    source, out = drive_launcher(lower(reverse_in_shared(), "sm_90a").abi,
                                 tmp_path_factory.mktemp("launch_sized"), DRIVE)
    return {"source": source, **out}


def test_the_launcher_computes_the_bytes_per_call(driven):
    from fake_cuda import parse_launch

    assert "const int64_t k0_smem = 0 + (sym_N * 4);" in driven["source"], driven["source"]
    # the kernel may take up to the device's opt-in maximum (attribute 8:
    # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    assert "attribute tilecute_reverse_0 8=232448" in driven["log"]
    launches = [parse_launch(line) for line in driven["log"] if line.startswith("launch")]
    assert [x["smem"] for x in launches] == ["4000", "232448"]  # the refused one never launched


def test_the_launcher_refuses_more_than_the_device_allows(driven):
    kind, message = driven["too_large"]
    assert kind == "ValueError"
    assert ("reverse: kernel 'tilecute_reverse_0' needs 232452 bytes of dynamic shared memory at "
            "these arguments (0 static, then its shared buffers sized at launch), above the 232448 "
            "bytes a block may have on cuda:0") in message, message


# -- on a GPU ---------------------------------------------------------------------------------

@pytest.mark.gpu
def test_launch_sized_shared_memory_on_gpu():
    import torch

    kernel = tilecute.compile(reverse_in_shared())
    for n in (100, 4096, 50000):  # 50000 floats: 200 KB, above the 48 KiB default
        a = torch.randn(n, device="cuda")
        b = torch.empty_like(a)
        kernel(a, b)
        torch.testing.assert_close(b, 2 * a.flip(0))
    with pytest.raises(ValueError, match="bytes a block may have on cuda:0"):
        a = torch.randn(100000, device="cuda")
        kernel(a, a)

    a = torch.randn(256, 64, device="cuda").half()
    w = torch.randn(64, device="cuda").half()
    b = torch.empty_like(a)
    tiles = tilecute.compile(row_tiles())
    for rows in (16, 64, 48):
        tiles(a, w, b, rows)
        torch.testing.assert_close(b, a.flip(1) * w, rtol=1e-3, atol=1e-3)

    halves = tilecute.compile(two_halves())
    for n in (5, 3000):
        a = torch.randn(n, device="cuda").half()
        b = torch.empty(n, device="cuda")
        halves(a, b)
        torch.testing.assert_close(b, a.float() * a.flip(0).float() + a.float())

    x = torch.randn(1024, device="cuda")
    y = torch.empty_like(x)
    for width in (3, 200):
        taps = torch.empty(width, device="cuda")
        tilecute.compile(window_sums())(x, y, taps)
        padded = torch.cat([x, torch.zeros(width, device="cuda")])
        want = torch.stack([padded[i:i + width + 1].sum() for i in range(1024)])
        torch.testing.assert_close(y, want, rtol=1e-4, atol=1e-4)
