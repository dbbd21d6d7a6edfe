"""``release_gil`` (issue 20, launching from several threads): whether a kernel's call lets go
of the GIL while it launches.  The switch lives on the TVM FFI function tilecute's kernels
call (``tvm_ffi.Function.release_gil``); ``Kernel.release_gil`` sets it before the launcher
is loaded (remembered, applied by ``_load``) and after, for the direct-call path and the
``out_idx`` path; ``tilecute.compile`` / ``tilecute.jit`` take it as a keyword outside the
cache key; the wrappers (several archs, aligned/general variants, eager kernels, packaged
kernels, the autotuner's winner) pass it on.

No GPU is needed: the launcher and the cubin load on CPU (``TILECUTE_ARCH``); only the
threaded call test needs one.
"""

from __future__ import annotations

import json
import threading

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tvm_ffi")

import elementwise as E  # noqa: E402 (examples/, on the path by conftest)
import tilecute  # noqa: E402
from tilecute import cache  # noqa: E402
from tilecute.api import MultiArchKernel  # noqa: E402
from tilecute.runtime.kernel import Kernel  # noqa: E402
from tilecute.runtime.package import ffi_release_gil_default  # noqa: E402
from tilecute.runtime.package import PackagedKernel  # noqa: E402
from tilecute.variants import AlignedOrGeneral  # noqa: E402


@pytest.fixture(autouse=True)
def _ffi_default(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    # these tests assume TVM FFI's own default (the process did not start with
    # TVM_FFI_RELEASE_GIL_BY_DEFAULT=0)
    if not ffi_release_gil_default():
        pytest.skip("TVM_FFI_RELEASE_GIL_BY_DEFAULT=0 in this process")


@pytest.fixture(scope="module")
def program():
    return E.vector_add("float16")


@pytest.fixture(scope="module")
def entry(program):
    """The vector add's cache entry, cubin produced (the first compile of the module)."""
    k = tilecute.compile(program)
    k.ensure_cubin()
    return k.path


def _called_function(k):
    """What ``kernel(...)`` runs once loaded: the class's __call__ (the TVM FFI function
    itself for a kernel without outputs to allocate, behind runtime.fastcall's call path)."""
    return type(k).__dict__.get("__call__")


def _goes_to_function(k) -> bool:
    """A call runs the kernel's TVM FFI function, straight or through the fast call path
    (tilecute_fastcall), with that function's GIL setting."""
    called = _called_function(k).__func__
    assert called is k._call
    if called is k._func:
        return True
    return called.function is k._func and bool(called.release_gil) is bool(k._func.release_gil)


def test_default_is_tvm_ffis_and_the_loaded_function_releases(entry):
    k = Kernel(entry)
    assert k.release_gil is True and k._func is None  # nothing loaded to answer it
    k.launcher
    assert k._func.release_gil is True and k.release_gil is True
    assert _goes_to_function(k)  # calls go straight to that function


def test_property_before_load_is_applied_when_the_launcher_loads(entry):
    k = Kernel(entry)
    k.release_gil = False
    assert k._func is None and k.release_gil is False
    k.launcher
    assert k._func.release_gil is False
    assert _goes_to_function(k)


def test_property_after_load_sets_the_function(entry):
    k = Kernel(entry)
    k.launcher
    k.release_gil = False
    assert k._func.release_gil is False and k.release_gil is False and _goes_to_function(k)
    k.release_gil = True
    assert k._func.release_gil is True and k.release_gil is True and _goes_to_function(k)


def test_each_kernel_object_has_its_own_switch(entry):
    """Two kernels of one entry load their own TVM FFI function objects: one's setting is
    not the other's."""
    holding, releasing = Kernel(entry, release_gil=False), Kernel(entry)
    holding.launcher
    releasing.launcher
    assert holding._func is not releasing._func
    assert holding._func.release_gil is False and releasing._func.release_gil is True


def test_out_idx_kernel_calls_the_function_it_set(entry):
    """An ``out_idx`` kernel keeps its Python ``__call__`` (it allocates the outputs) and
    calls ``self._func``: the setting made before the first call is on that function."""
    k = Kernel(entry, out_idx=[2])
    k.release_gil = False
    a = torch.zeros(1024, dtype=torch.float16)  # CPU: the launcher refuses it, after loading
    with pytest.raises(Exception, match="CUDA|cuda"):
        k(a, a)
    assert k._func is not None and k._func.release_gil is False
    assert k._call is k._func or k._call.release_gil is False  # (the fast call path's)
    assert "__call__" not in type(k).__dict__  # still the allocating __call__
    k.release_gil = True
    assert k._func.release_gil is True
    assert k._call is k._func or k._call.release_gil is True


def test_values_other_than_bools_are_refused(entry, program):
    k = Kernel(entry)
    with pytest.raises(TypeError, match=r"vector_add\.release_gil takes True or False, got 0"):
        k.release_gil = 0
    with pytest.raises(TypeError, match=r"vector_add: release_gil takes True or False, got 'no'"):
        tilecute.compile(program, release_gil="no")

    def factory():
        return program

    with pytest.raises(TypeError, match=r"factory: release_gil takes True or False, got 1"):
        tilecute.jit(release_gil=1)(factory)


def _keys(monkeypatch):
    keys = []
    real = cache.get_or_build

    def spy(key, build, **kwargs):
        keys.append(key)
        return real(key, build, **kwargs)

    monkeypatch.setattr(cache, "get_or_build", spy)
    return keys


def test_compile_keyword_sets_it_outside_the_cache_key(entry, program, monkeypatch):
    keys = _keys(monkeypatch)
    plain = tilecute.compile(program)
    holding = tilecute.compile(program, release_gil=False)
    releasing = tilecute.compile(program, release_gil=True)
    assert len(set(keys)) == 1  # one key, one entry
    assert plain.path == holding.path == releasing.path == entry
    assert holding is not plain  # each compile hands out its own kernel object
    assert holding.release_gil is False and holding._func is None
    holding.launcher
    assert holding._func.release_gil is False
    assert plain.release_gil is True and releasing.release_gil is True
    outs = tilecute.compile(program, out_idx=[-1], release_gil=False)
    assert outs.out_idx == [2] and outs.release_gil is False
    loaded = tilecute.load(entry, release_gil=False)  # deployment's path takes it too
    assert loaded.release_gil is False and tilecute.load(entry).release_gil is True


def test_jit_keyword_reaches_every_kernel_it_compiles(entry, monkeypatch):
    keys = _keys(monkeypatch)

    @tilecute.jit(release_gil=False)
    def vadd(dtype="float16"):
        return E.vector_add(dtype)

    @tilecute.jit
    def vadd_plain(dtype="float16"):
        return E.vector_add(dtype)

    k = vadd()
    assert k.release_gil is False
    assert k.path == vadd_plain().path == entry and len(set(keys)) == 1
    assert vadd_plain().release_gil is True
    k.launcher
    assert k._func.release_gil is False


def test_eager_jit_keyword_and_the_compiled_wrapper():
    import eager_programs as EP

    holding = tilecute.jit(release_gil=False)(EP.add.fn)
    k = holding.compile(M=64, N=64, block_M=32)
    assert k.release_gil is False and k.kernel.release_gil is False
    assert k.path == EP.add.compile(M=64, N=64, block_M=32).path  # same entry
    k.release_gil = True  # the wrapper passes a setting on, never keeps it
    assert k.kernel.release_gil is True and "release_gil" not in vars(k)


def test_several_archs_and_variants_pass_it_on(entry):
    a, b = Kernel(entry), Kernel(entry)
    multi = MultiArchKernel({"sm_90a": a, "sm_80": b})
    multi.release_gil = False
    assert (a.release_gil, b.release_gil, multi.release_gil) == (False, False, False)
    assert "release_gil" not in vars(multi)
    aligned, general = Kernel(entry), Kernel(entry)
    both = AlignedOrGeneral(aligned, general, [(0, 0, 8)])
    general.launcher  # one variant loaded, the other not yet
    both.release_gil = False
    assert general._func.release_gil is False and aligned.release_gil is False
    aligned.launcher
    assert aligned._func.release_gil is False and both.release_gil is False
    assert "release_gil" not in vars(both)


def test_autotune_winner_gets_the_jit_setting():
    from tilecute.autotuner import AutoTuner

    @tilecute.jit(release_gil=False)
    def vadd(block=1024):
        return E.vector_add("float16", block=block)

    @tilecute.jit
    def vadd_plain(block=1024):
        return E.vector_add("float16", block=block)

    assert AutoTuner(vadd, [{"block": 1024}]).release_gil is False
    assert AutoTuner(vadd_plain, [{"block": 1024}]).release_gil is None
    import eager_programs as EP

    assert AutoTuner(tilecute.jit(release_gil=False)(EP.add.fn),
                     [{"block_M": 32}]).release_gil is False


def test_packaged_kernel_switch(entry):
    """An exported package's kernel (runtime/package.py, copied into the package) calls
    the TVM FFI function directly too; its switch works the same way."""
    spec = {"function": "vector_add", "out_idx": [], "archs": ["sm_90a"],
            "variants": [{"archs": {"sm_90a": {
                "dir": entry.name, "abi": json.loads((entry / "abi.json").read_text())}}}]}
    pk = PackagedKernel(str(entry.parent), "vector_add", spec)
    assert pk.release_gil is True
    pk.release_gil = False
    func = pk._load(0, "sm_90a")
    assert func.release_gil is False and pk.release_gil is False
    pk.release_gil = True
    assert func.release_gil is True
    with pytest.raises(TypeError, match=r"vector_add\.release_gil takes True or False"):
        pk.release_gil = "yes"


@pytest.mark.gpu
def test_two_threads_launch_while_holding_the_gil(program):
    """Two Python threads, each on its own stream, calling a kernel that holds the GIL
    through its launches: every result right."""
    k = tilecute.compile(program, release_gil=False)
    k_out = tilecute.compile(program, out_idx=[2], release_gil=False)
    n, rounds = 1 << 16, 200
    errors, results = [], {}

    def work(i):
        try:
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                a = torch.full((n,), float(i + 1), device="cuda", dtype=torch.float16)
                b = torch.arange(n, device="cuda").remainder(64).to(torch.float16)
                c = torch.empty_like(a)
                for _ in range(rounds):
                    k(a, b, c)
                d = k_out(a, b)
            stream.synchronize()
            results[i] = (a, b, c, d)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a launching thread hung"
    assert not errors, errors
    assert k._func.release_gil is False and k_out._func.release_gil is False
    for i, (a, b, c, d) in results.items():
        torch.testing.assert_close(c, a + b)
        torch.testing.assert_close(d, a + b)
    assert sorted(results) == [0, 1]
