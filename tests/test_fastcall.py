"""The kernels' call path (runtime/fastcall.py, templates/tilecute_fastcall.c): torch
tensors handed to the launcher's TVM FFI function as DLTensor pointers.  A call through it
must do what the TVM FFI function does -- the same launch, the same errors -- and every call
it does not take whole must reach that function unchanged."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import tilecute
from tilecute.runtime.kernel import Kernel

import elementwise as E  # noqa: E402 (examples/, on the path by conftest)


@pytest.fixture(scope="module")
def entry():
    k = tilecute.compile(E.vector_add("float16"))
    k.ensure_cubin()
    return k.path


def _loaded(entry, **kw):
    k = Kernel(entry, **kw)
    k.launcher
    return k


def _raised(fn, *args, **kwargs):
    with pytest.raises(Exception) as info:
        fn(*args, **kwargs)
    return type(info.value), str(info.value)


def test_the_call_path_is_built_and_wraps_the_function(entry):
    k = _loaded(entry)
    assert k._call is not k._func, "the fast call path was not built here (Python headers?)"
    assert k._call.function is k._func
    assert type(k).__dict__["__call__"].__func__ is k._call
    assert "fast call" in repr(k._call)


CPU = torch.zeros(1024, dtype=torch.float16)


class _Param(torch.Tensor):  # a tensor subclass: not converted by the fast path
    pass


@pytest.mark.parametrize("args", [
    (CPU, CPU, CPU),                                     # converted, refused by the launcher
    (CPU, CPU),                                          # another count: TVM FFI's call
    (CPU, CPU, CPU, 0),                                  # with a stream handle
    (CPU, CPU, CPU, -1),                                 # a negative stream handle
    (CPU, CPU, CPU, 2 ** 70),                            # a handle past int64: TVM FFI's call
    (CPU, CPU, CPU, 0, 0),                               # one argument too many
    (CPU, CPU, CPU, CPU),                                # a tensor for the stream
    (CPU, CPU, CPU.float()),                             # dtype
    (CPU, CPU, 3),                                       # an int for a tensor
    (CPU, 2.5, CPU),                                     # a float for a tensor
    (CPU, None, CPU),                                    # None for a tensor
    (CPU, True, CPU),                                    # a bool for a tensor
    (CPU, CPU, 2 ** 70),                                 # an int past int64: TVM FFI's call
    (CPU, CPU, CPU.as_subclass(_Param)),                 # a subclass: TVM FFI's call
    (CPU, CPU, CPU.numpy()),                             # another framework's array
    (CPU, CPU, torch.zeros(1024, dtype=torch.float16).reshape(32, 32)),  # rank
], ids=["cpu", "count", "stream", "negative-stream", "big-stream", "too-many",
        "tensor-stream", "dtype", "int", "float", "none", "bool", "bigint",
        "subclass", "numpy", "rank"])
def test_errors_are_the_tvm_ffi_functions(entry, args):
    k = _loaded(entry)
    assert _raised(k, *args) == _raised(k._func, *args)


def test_keyword_arguments_reach_the_function(entry):
    k = _loaded(entry)
    assert _raised(k._call, CPU, CPU, C=CPU) == _raised(k._func, CPU, CPU, C=CPU)


def test_an_error_keeps_tvm_ffis_traceback_frames(entry):
    """The exception is built the way TVM FFI's binding builds it (its kind, message and
    backtrace): the launcher's C++ frames are in the traceback either way."""
    k = _loaded(entry)
    frames = []
    for fn in (k, k._func):
        with pytest.raises(ValueError) as info:
            fn(CPU, CPU, CPU)
        frames.append({str(f.path) for f in info.traceback if str(f.path).endswith(".cpp")})
    assert frames[0] == frames[1] and any(f.endswith("launcher.cpp") for f in frames[0])


def test_the_switch_turns_it_off_and_the_kernel_calls_the_function():
    code = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")!r})
        import torch, tilecute, elementwise as E
        k = tilecute.compile(E.vector_add("float16"))
        k.launcher
        assert k._call is k._func
        assert type(k).__dict__["__call__"].__func__ is k._func
        print("ok")
    """)
    env = dict(os.environ, TILECUTE_FAST_CALL="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_without_torch_imported_the_kernel_calls_the_function(entry, monkeypatch):
    """No torch in the process: nothing to convert, TVM FFI's binding takes every call."""
    from tilecute.runtime.fastcall import wrap

    k = _loaded(entry)
    assert wrap(k._func, 3) is not None
    monkeypatch.delitem(sys.modules, "torch")
    assert wrap(k._func, 3) is None


def test_a_failed_build_leaves_the_function(tmp_path):
    """A compiler that fails (here: a C++ compiler that is not one): no fast path, the
    compiler's message kept for the benchmark to show, and kernels call TVM FFI's binding."""
    code = textwrap.dedent(f"""
        from pathlib import Path
        from tilecute.runtime import fastcall
        assert fastcall.library(Path({str(tmp_path / 'rt')!r})) is None
        print(fastcall.build_error().splitlines()[0])
    """)
    env = dict(os.environ, CXX="false")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "false" in out.stdout


def test_the_library_is_built_once_per_toolchain(tmp_path):
    from tilecute.runtime import fastcall

    first = fastcall.library(tmp_path / "rt")
    assert first is not None and first.parent.name.startswith("fastcall-")
    assert fastcall.library(tmp_path / "rt") == first
    # a second process finds it built: same path, not rebuilt
    code = (f"from pathlib import Path; from tilecute.runtime import fastcall; "
            f"print(fastcall.library(Path({str(tmp_path / 'rt')!r})))")
    mtime = first.stat().st_mtime_ns
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == str(first) and first.stat().st_mtime_ns == mtime


# ---- on a GPU ----------------------------------------------------------------------------

@pytest.mark.gpu
def test_results_and_streams_match_the_function(entry):
    k = _loaded(entry)
    assert k._call is not k._func
    a = torch.randn(1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, device="cuda", dtype=torch.float16)
    want = a + b
    for args in ((a, b), (a, b.as_subclass(_Param))):  # converted / TVM FFI's call
        c = torch.zeros_like(a)
        k(*args, c)
        torch.cuda.synchronize()
        torch.testing.assert_close(c, want, rtol=0, atol=0)
    # the current torch stream is the launch's: work queued behind a long op on it
    s = torch.cuda.Stream()
    big = torch.randn(8192, 8192, device="cuda")
    c = torch.zeros_like(a)
    with torch.cuda.stream(s):
        big @ big  # occupies the stream
        a2 = a * 1  # made on s, read by the kernel on s
        k(a2, b, c)
        done = c.clone()
    s.synchronize()
    torch.testing.assert_close(done, want, rtol=0, atol=0)
    # an explicit stream (Kernel.launch passes its int handle after the parameters)
    c = torch.zeros_like(a)
    with torch.cuda.stream(s):
        big @ big
        a3 = a * 1
    k.launch(a3, b, c, stream=s)
    s.synchronize()
    torch.testing.assert_close(c, want, rtol=0, atol=0)


@pytest.mark.gpu
def test_cuda_graph_capture_through_the_call_path(entry):
    k = _loaded(entry)
    a = torch.randn(1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, device="cuda", dtype=torch.float16)
    c = torch.zeros_like(a)
    k(a, b, c)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        k(a, b, c)
    c.zero_()
    a.copy_(torch.randn_like(a))
    g.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)
