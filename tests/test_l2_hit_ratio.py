"""TileLang's ``T.annotate_l2_hit_ratio({B: 0.8})``: the function's kernels launch with an L2
access policy window over B (TileLang's host code sets it on the stream around the call and
raises the context's persisting-L2 limit to the window's bytes, restoring it after).

Frontend and IR (printed, JSON, refusals), the launch ABI's window, the launcher source, the
launcher against the fake driver (limit set to the window's bytes, clamped to the device's
maximum; each launch carries CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW; lines reset and the
limit restored after, a failed launch included), an sm_90a cubin, and on a GPU the result
against torch with the caller's persisting-L2 limit left as it was."""

import json

import pytest

import tilecute
import tilecute.language as T
from fake_cuda import DRIVE_HEAD
from tilecute.ir.serialize import from_json, to_json
from tilecute.ir.validate import ValidationError
from tilecute.language import FrontendError
from tilecute.runtime.abi import L2Window, LaunchABI
from tilecute.transform.pipeline import lower


def add_with_l2(M: int = 64, N: int = 256, block: int = 256, ratio: float = 0.8,
                dtype=T.float32):
    """C = A + B, each block one row; B (read by every call) kept in L2."""

    @T.prim_func
    def add(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(M * N // block, threads=block) as bx:
            T.annotate_l2_hit_ratio({B: ratio})
            tx = T.get_thread_binding()
            idx = bx * block + tx
            C[idx // N, idx % N] = A[idx // N, idx % N] + B[idx // N, idx % N]

    return add


def scaled_rows():
    """Two kernels over a symbolic number of rows, the window on the second's input."""
    m = T.dynamic("m")

    @T.prim_func
    def rows(X: T.Tensor((m, 1024), T.float32), Y: T.Tensor((m, 1024), T.float32)):
        with T.Kernel(m, threads=128) as bx:
            for j in T.Parallel(1024):
                Y[bx, j] = X[bx, j] * 2.0
        with T.Kernel(m, threads=128) as bx:
            T.annotate_l2_hit_ratio({Y: 1})
            for j in T.Parallel(1024):
                Y[bx, j] = Y[bx, j] + 1.0

    return rows


def test_printed_and_json_round_trip():
    f = add_with_l2()
    text = f.script()
    assert "T.annotate_l2_hit_ratio({B: 0.8})" in text
    assert T.from_script(text) == f
    assert from_json(to_json(f)) == f
    assert "l2_hit_ratios" not in to_json(_plain())  # (absent when none: IR JSON unchanged)


def _plain():
    @T.prim_func
    def plain(A: T.Tensor((8,), T.float32)):
        with T.Kernel(1, threads=8) as bx:
            tx = T.get_thread_binding()
            A[tx] = A[tx] + bx
    return plain


def test_abi_carries_one_window_and_round_trips():
    abi = lower(add_with_l2(), "sm_90a").abi
    assert abi.l2_window == L2Window("B", 0.8)
    assert LaunchABI.from_dict(json.loads(abi.to_json())) == abi
    assert "l2_window" not in lower(_plain(), "sm_90a").abi.to_dict()  # unchanged without one
    assert lower(scaled_rows(), "sm_90a").abi.l2_window == L2Window("Y", 1.0)


def test_launcher_source_passes_the_window():
    from tilecute.host.launcher import render_launcher

    text = render_launcher(lower(scaled_rows(), "sm_90a").abi, tilecute_version="test")
    assert ('const TcL2Window l2_window = { "T.annotate_l2_hit_ratio({Y: 1.0})", ptr_Y, '
            'INT64_C(4) * sym_m * INT64_C(1024), static_cast<float>(1.0) };') in text
    assert "tc_launch_kernels(tc_launcher, device_id, stream_arg, launches, TC_PHASE_TIMER, &l2_window);" \
        in text
    plain = render_launcher(lower(_plain(), "sm_90a").abi, tilecute_version="test")
    assert "l2_window" not in plain


@pytest.mark.parametrize("make", [add_with_l2, scaled_rows], ids=["add", "rows"])
def test_builds_sm90a_cubins(make, tmp_path):
    assert tilecute.build_cubin(make(), "sm_90a", out_dir=str(tmp_path)).kernel_names


# ---- refusals -----------------------------------------------------------------------------
def _parse(body: str):
    text = f'''
import tilecute.language as T

@T.prim_func
def f(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32), r: T.float32):
    with T.Kernel(1, threads=64) as bx:
        s = T.alloc_shared((64,), T.float32)
{body}
'''
    f = T.from_script(text)
    lower(f, "sm_90a")
    return f


@pytest.mark.parametrize("body,match,error", [
    ("        T.annotate_l2_hit_ratio({s: 0.5})", "'s' is a shared buffer", FrontendError),
    ("        T.annotate_l2_hit_ratio({A: 1.5})", r"hit ratio of 'A' is 1.5; .*\[0, 1\]", FrontendError),
    ("        T.annotate_l2_hit_ratio({A: r})", "hit ratio of 'A' is a number known when",
     FrontendError),
    ("        T.annotate_l2_hit_ratio({A: 0.5})\n        T.annotate_l2_hit_ratio({A: 0.25})",
     "'A' already has the hit ratio 0.5", FrontendError),
    ("        T.annotate_l2_hit_ratio({A: 0.5, B: 0.5})", "2 L2 windows", ValidationError),
    ("        g = T.alloc_global((64,), T.float32)\n        T.annotate_l2_hit_ratio({g: 0.5})",
     "no global tensor parameter", ValidationError),
    ("        T.annotate_l2_hit_ratio([A])", "l2_hit_ratio_map is a dict", FrontendError),
])
def test_refusals_name_the_rule(body, match, error):
    with pytest.raises(error, match=match):
        _parse(body)


def test_two_kernels_two_tensors_are_refused():
    text = '''
import tilecute.language as T

@T.prim_func
def f(A: T.Tensor((64,), T.float32), B: T.Tensor((64,), T.float32)):
    with T.Kernel(1, threads=64) as bx:
        T.annotate_l2_hit_ratio({A: 0.5})
        A[bx] = 1.0
    with T.Kernel(1, threads=64) as bx:
        T.annotate_l2_hit_ratio({B: 0.5})
        B[bx] = 1.0
'''
    with pytest.raises(ValidationError, match="a launch has one access policy window"):
        lower(T.from_script(text), "sm_90a")


# ---- the launcher against the fake driver ---------------------------------------------------

DRIVE = DRIVE_HEAD + r"""
cuda.fake_set_persisting_limit(0, 5000)  # the caller's limit, restored after each call
x = FakeTensor((100, 1024), "float32", data=0x100000)
y = FakeTensor((100, 1024), "float32", data=0x200000)
cuda.fake_clear_requests()
mod["rows"](x, y)                        # 409600 bytes: under the 1 MiB maximum
out["requests"] = cuda.fake_requests().decode().splitlines()
cuda.fake_clear_requests()
x = FakeTensor((1000, 1024), "float32", data=0x100000)
y = FakeTensor((1000, 1024), "float32", data=0x200000)
mod["rows"](x, y)                        # 4096000 bytes: clamped to the device's 1 MiB
out["requests_again"] = cuda.fake_requests().decode().splitlines()
cuda.fake_fail_next_launch(701)          # CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES
try:
    mod["rows"](x, y)
    out["failed"] = None
except Exception as e:
    out["failed"] = [type(e).__name__, str(e).splitlines()[0]]
mod["cleanup"]()
out["log"] = cuda.fake_log().decode().splitlines()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def driven(tmp_path_factory):
    pytest.importorskip("tvm_ffi")
    from fake_cuda import drive_launcher

    return drive_launcher(lower(scaled_rows(), "sm_90a").abi, tmp_path_factory.mktemp("l2_window"),
                          DRIVE)[1]


def _calls(log: list[str]) -> list[list[str]]:
    """The log after loading, one list per call (a call ends where the limit is restored)."""
    calls, current = [], []
    for line in log:
        if line.startswith(("load", "unload", "release")):
            continue
        current.append(line)
        if line == "set_limit persisting_l2=5000 device=0":
            calls.append(current)
            current = []
    return calls


def test_each_launch_carries_the_window_inside_the_raised_limit(driven):
    from fake_cuda import parse_launch

    first, second, failed = _calls(driven["log"])
    assert first[0] == "set_limit persisting_l2=409600 device=0"
    launches = [parse_launch(line) for line in first[1:3]]
    assert [x["symbol"] for x in launches] == ["tilecute_rows_0", "tilecute_rows_1"]
    # base (Y's data), bytes, hit ratio, hitProp PERSISTING (2), missProp STREAMING (1)
    assert all(x["l2_window"] == f"{0x200000},409600,1,2,1" for x in launches)
    assert first[3:] == ["reset_persisting_l2 device=0", "set_limit persisting_l2=5000 device=0"]
    assert second[0] == "set_limit persisting_l2=1048576 device=0"  # the device's maximum
    assert all(parse_launch(line)["l2_window"] == f"{0x200000},1048576,1,2,1"
               for line in second[1:3])
    # a launch that fails leaves the limit as the caller had it
    assert failed == ["set_limit persisting_l2=1048576 device=0", "reset_persisting_l2 device=0",
                      "set_limit persisting_l2=5000 device=0"]


def test_a_failed_launch_is_the_error_raised(driven):
    kind, message = driven["failed"]
    assert kind == "RuntimeError" and "launching kernel 'tilecute_rows_0'" in message


def test_entry_points_are_resolved_on_the_first_windowed_call(driven):
    names = {line.split()[0] for line in driven["requests"]}
    assert {"cuDeviceGetAttribute", "cuCtxGetLimit", "cuCtxSetLimit",
            "cuCtxResetPersistingL2Cache"} <= names
    assert driven["requests_again"] == []  # once per process


# ---- on a GPU -------------------------------------------------------------------------------

def _persisting_limit(value=None) -> int:
    """The current context's CU_LIMIT_PERSISTING_L2_CACHE_SIZE (set first when `value`)."""
    import ctypes

    cuda = ctypes.CDLL("libcuda.so.1")
    limit = 0x06  # CU_LIMIT_PERSISTING_L2_CACHE_SIZE
    if value is not None:
        assert cuda.cuCtxSetLimit(limit, ctypes.c_size_t(value)) == 0
    out = ctypes.c_size_t()
    assert cuda.cuCtxGetLimit(ctypes.byref(out), limit) == 0
    return out.value


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,ratio", [("float32", 0.8), ("float16", 1.0)])
def test_gpu_add_matches_torch_and_restores_the_limit(dtype, ratio):
    import torch

    M, N = 512, 1024
    kernel = tilecute.compile(add_with_l2(M, N, 256, ratio, dtype))
    tdt = getattr(torch, dtype)
    a = torch.randn(M, N, device="cuda").to(tdt)
    b = torch.randn(M, N, device="cuda").to(tdt)
    c = torch.empty_like(a)
    torch.cuda.synchronize()
    before = _persisting_limit(0)
    for _ in range(3):
        kernel(a, b, c)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b)
    assert _persisting_limit() == before
