"""TileLang's ``T.pdl_sync()`` / ``T.pdl_trigger()`` and TVM's ``T.let``: a kernel holding the PDL forms launches with
Programmatic Dependent Launch (sm_90+: ``KernelScope.pdl``, the launcher's attribute) and
waits / lets the next kernel start exactly where the program says (no wait inserted at the
kernel's start, unlike the ``pdl`` option); on sm_80, which has no PDL, they are no-ops."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir.serialize import from_json
from tilecute.transform.pipeline import run_passes

SRC = '''import tilecute.language as T


@T.prim_func
def add_one(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32")):
    with T.Kernel(8, threads=128) as bx:
        T.pdl_sync()
        for i in T.Parallel(128):
            B[bx * 128 + i] = A[bx * 128 + i] + 1.0
        T.pdl_trigger()
'''


def test_pdl_forms_round_trip_and_mark_the_kernel():
    func = T.from_script(SRC)
    assert "        T.pdl_sync()\n" in func.script() and "        T.pdl_trigger()\n" in func.script()
    assert T.from_script(func.script()) == func and from_json(func.to_json()) == func
    assert [k.pdl for k in run_passes(func, "sm_90a").kernels] == [True]
    on_80 = run_passes(func, "sm_80")
    assert [k.pdl for k in on_80.kernels] == [False] and "pdl_" not in on_80.script()


def test_pdl_forms_wait_where_written(tmp_path, monkeypatch):
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path))
    func = T.from_script(SRC)
    for options in ({}, {"pdl": True}):  # the option adds no second wait at the start
        k = tilecute.compile(func, target="sm_90a", options=options)
        src = k.get_source("cute")
        assert src.count("cute.arch.griddepcontrol_wait()") == 1
        first_access = min(i for i in (src.find("A.iterator"), src.find("A["), src.find("B["))
                           if i >= 0)
        assert src.index("griddepcontrol_wait()") < first_access
        assert src.count("griddepcontrol_launch_dependents()") == 1
        assert [kl.pdl for kl in k.abi.kernels] == [True]
        assert k.ensure_cubin()
    k80 = tilecute.compile(func, target="sm_80")
    assert "griddepcontrol" not in k80.get_source("cute") and k80.ensure_cubin()


@pytest.mark.gpu
def test_pdl_chain_matches_torch():
    import torch

    k = tilecute.compile(T.from_script(SRC))
    a = torch.randn(1024, device="cuda")
    b, c = torch.empty_like(a), torch.empty_like(a)
    for _ in range(3):
        k(a, b)
        k(b, c)  # waits for the first kernel's B at its T.pdl_sync()
    torch.testing.assert_close(c, a + 2)


LET = '''import tilecute.language as T


@T.prim_func
def shifted(A: T.Tensor((256, 64), "float16"), B: T.Tensor((64, 64), "float16")):
    with T.Kernel(1, threads=128) as bx:
        S = T.alloc_shared((64, 64), "float16")
        for ko in T.serial(4):
            off = T.int32()
            T.let(off, ko * 64)
            T.copy(A[off, 0], S)
            T.copy(S, B[0, 0])
'''


def test_let_gives_a_declared_variable_its_value(tmp_path):
    """TVM's ``off = T.int32(); T.let(off, expr)`` inside a kernel (TileLang's alias test):
    the declaration binds nothing, T.let makes ``off`` name ``expr``; a use before T.let
    is an error naming ``off``."""
    func = T.from_script(LET)
    assert "            off = ko * 64\n" in func.script()
    assert T.from_script(func.script()) == func
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names
    with pytest.raises(ValueError, match="name 'off' is not defined"):
        T.from_script(LET.replace("            T.let(off, ko * 64)\n", ""))


def test_let_with_a_body_is_refused_by_name():
    """TVM's ``T.let(v, value, body)`` (its deprecated Let expression) names ``body``."""
    text = LET.replace("T.let(off, ko * 64)", "T.let(off, ko * 64, ko)")
    with pytest.raises(T.FrontendError, match="body=.*T.let\\(v, value, body\\) is TVM's deprecated"):
        T.from_script(text)
