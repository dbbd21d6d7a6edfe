"""What the round test files (tests/test_unseen_programs*.py) share: the arch fixture, the
tests every round runs over its program list (each listed, each builds a cubin), reading
the kernel body from the generated source, and the GPU launch and comparison helpers.

A round file binds the tests under its own names, so pytest collects them there::

    _arch = rounds.use_arch("TILECUTE_ARCH")
    test_every_program_is_listed = rounds.every_program_is_listed(P, NAMES)
    test_program_builds_a_cubin = rounds.builds_a_cubin(NAMES, rounds.kernel_of(P))
"""

import inspect

import pytest

import tilecute

ARCH = "sm_90a"


def use_arch(*variables):
    """An autouse fixture that sets each environment variable to sm_90a for every test."""

    @pytest.fixture(autouse=True)
    def _arch(monkeypatch):
        for v in variables:
            monkeypatch.setenv(v, ARCH)

    return _arch


# ---- reading the generated source --------------------------------------------------------
def kernel_body(kernel) -> str:
    """The @cute.kernel functions' text (not the launch wrapper) of a kernel or its source."""
    src = kernel if isinstance(kernel, str) else kernel.get_kernel_source()
    return src.split("\n@cute.kernel\n", 1)[1].split("\n@cute.jit", 1)[0]


def kernel_of(P, eager=None):
    """name -> the round's kernel: ``P.name(**kw)``, or ``eager[name]()`` (an eager kernel
    built from CPU tensors that give its shapes)."""
    eager = eager or {}

    def kernel(name, **kw):
        return eager[name]() if name in eager else getattr(P, name)(**kw)

    return kernel


def tir_of(P):
    """name -> the prim_func of ``P.name`` (its ``get_tir()``)."""
    return lambda name: getattr(P, name).get_tir()


def body_of(kernel):
    """name -> the @cute.kernel text of ``kernel(name, **kw)``."""
    return lambda name, **kw: kernel_body(kernel(name, **kw))


def source(func, arch=ARCH, **kw) -> str:
    """The CuTe DSL source ``func`` compiles to for ``arch``."""
    return tilecute.compile(func, target=arch, **kw).get_kernel_source()


def as_list(x) -> list:
    """A program factory's result as a list (some give several kernels)."""
    return x if isinstance(x, list) else [x]


# ---- the tests every round runs ----------------------------------------------------------
def every_program_is_listed(P, names):
    """The test that ``names`` are exactly ``P``'s programs (what has ``get_tir``)."""

    def test():
        assert sorted(names) == sorted(n for n in dir(P) if hasattr(getattr(P, n), "get_tir"))

    return test


def every_kernel_is_listed(P, names, imports=("tilecute", "T")):
    """The test that ``names`` are exactly what ``P`` defines with ``get_kernel_source`` or
    ``compile`` (the modules ``P`` imports under the names ``imports`` aside)."""

    def test():
        defined = [n for n, f in vars(P).items()
                   if hasattr(f, "get_kernel_source") or hasattr(f, "compile")]
        assert sorted(n for n in defined if n not in imports) == sorted(names)

    return test


def every_public_program_is_listed(P, names):
    """The test that ``names`` are exactly ``P``'s public names with ``compile`` (no module)."""

    def test():
        public = [(n, getattr(P, n)) for n in dir(P) if not n.startswith("_")]
        assert sorted(names) == sorted(n for n, f in public
                                       if hasattr(f, "compile") and not inspect.ismodule(f))

    return test


def builds_a_cubin(names, kernel):
    """The test, one per name, that ``kernel(name)`` (a compiled kernel) builds its cubin."""

    @pytest.mark.parametrize("name", names)
    def test(name):
        assert kernel(name).ensure_cubin()

    return test


def assert_builds(func, out_dir, arch=ARCH) -> None:
    """``func`` builds a non-empty cubin with kernels in ``out_dir``."""
    info = tilecute.build_cubin(func, arch, out_dir=str(out_dir))
    assert info.kernel_names and (out_dir / "kernel.cubin").stat().st_size > 0


def builds_sm90a_cubins(names, funcs):
    """The test, one per name, that ``funcs(name)`` (one or a list) each build an sm_90a
    cubin (a prim_func by ``tilecute.build_cubin``, a compiled @tilecute.jit kernel by its
    own)."""

    @pytest.mark.parametrize("name", names)
    def test(name, tmp_path):
        for i, f in enumerate(as_list(funcs(name))):
            if hasattr(f, "ensure_cubin"):  # a compiled @tilecute.jit kernel
                assert f.ensure_cubin()
                continue
            assert_builds(f, tmp_path / str(i))

    return test


def builds_cubin(names, func, arch):
    """The test, one per name, that the prim_func ``func(name)`` builds a cubin for ``arch``."""

    @pytest.mark.parametrize("name", names)
    def test(name, tmp_path):
        assert tilecute.build_cubin(func(name), arch, out_dir=str(tmp_path)).kernel_names

    return test


# ---- on the GPU ----------------------------------------------------------------------------
def run(func, *args) -> None:
    """Compile ``func`` and launch it on ``args``."""
    tilecute.compile(func)(*args)


def randn(*shape, dtype=None, scale=1.0):
    """Standard normal values on the GPU, times ``scale``, in ``dtype`` (float32 if None)."""
    import torch

    t = torch.randn(*shape, device="cuda") * scale
    return t if dtype is None else t.to(dtype)


def close(got, want, tol) -> None:
    """Equal within ``tol`` (absolute and relative), compared in float32."""
    import torch

    torch.testing.assert_close(got.float(), want.float(), atol=tol, rtol=tol)


def close_on_cpu(got, want, atol, rtol) -> None:
    """Equal within ``atol`` / ``rtol``, compared in float32 on the CPU."""
    import torch

    torch.testing.assert_close(got.float().cpu(), want.float().cpu(), atol=atol, rtol=rtol)


def exact(got, want, atol=0.0, rtol=0.0) -> None:
    """Equal (NaN equal to NaN), or within ``atol`` / ``rtol``, in their own dtype."""
    import torch

    torch.testing.assert_close(got, want, atol=atol, rtol=rtol, equal_nan=True)


def equal_on_cpu(got, want) -> None:
    """Bit-for-bit equal values (compared on the CPU)."""
    import torch

    torch.testing.assert_close(got.cpu(), want.cpu(), atol=0, rtol=0)


def max_error_within(got, want, tol) -> None:
    """The largest error at most ``tol`` times the reference's largest magnitude."""
    err = (got.float() - want.float()).abs().max().item()
    assert err <= tol * max(want.float().abs().max().item(), 1e-6), err
