"""The launcher's phase timing (docs/performance.md), on a CPU machine: built with
-DTILECUTE_PHASE_TIMING it exports __tilecute_phase_times / __tilecute_phase_reset and
records the phases a call finished; built without it (the cache entry's own launcher) it
exports neither and its call function holds no timing code.

Two launcher builds in all: the entry's (by tilecute.compile) and the timed one."""

import os
import re
import shutil
import subprocess

import pytest

torch = pytest.importorskip("torch")
tvm_ffi = pytest.importorskip("tvm_ffi")

import elementwise as E  # noqa: E402
import tilecute  # noqa: E402
from fake_cuda import FakeTensor  # noqa: E402
from tilecute.toolchain import build_launcher, launcher_build_command  # noqa: E402

DEFINE = "-DTILECUTE_PHASE_TIMING"
PHASES = ("checks", "pack", "stream", "slot", "context", "launch")
KEYS = (*PHASES, "calls", "clock_read_ps")


@pytest.fixture(scope="module")
def entry(tmp_path_factory):
    """vector_add (float16) in a private cache; its launcher.so is built without the define."""
    d = tmp_path_factory.mktemp("cache")
    old = os.environ.get("TILECUTE_CACHE_DIR")
    os.environ["TILECUTE_CACHE_DIR"] = str(d)
    try:
        yield tilecute.compile(E.vector_add("float16"), target="sm_90a").path
    finally:
        if old is None:
            del os.environ["TILECUTE_CACHE_DIR"]
        else:
            os.environ["TILECUTE_CACHE_DIR"] = old


@pytest.fixture(scope="module")
def timed(entry, tmp_path_factory):
    """The entry's launcher.cpp (and the launcher runtime beside it) built with the
    define, loaded."""
    folder = tmp_path_factory.mktemp("timed")
    for name in ("launcher.cpp", "tilecute_launcher.h", "tilecute_launcher_runtime.cpp"):
        shutil.copyfile(entry / name, folder / name)
    source = folder / "launcher.cpp"
    return tvm_ffi.load_module(str(build_launcher(source, folder, extra_cflags=(DEFINE,))))


def times(module) -> dict:
    return dict(module["__tilecute_phase_times"]())


# -- tests ---------------------------------------------------------------------------------


def test_timed_launcher_exports_phase_times_and_reset(timed):
    assert timed.implements_function("__tilecute_phase_times")
    assert timed.implements_function("__tilecute_phase_reset")
    timed["__tilecute_phase_reset"]()
    got = times(timed)
    assert tuple(got) == KEYS  # the documented order
    assert all(isinstance(v, int) for v in got.values())
    assert all(got[k] == 0 for k in (*PHASES, "calls"))
    assert got["clock_read_ps"] > 0
    with pytest.raises(TypeError, match="__tilecute_phase_times: expected no arguments, got 1"):
        timed["__tilecute_phase_times"](1)


def test_calls_that_fail_their_checks_record_nothing(timed):
    """The device check is the last check: CPU tensors raise inside the checks phase, so
    no phase is finished and nothing is recorded."""
    timed["__tilecute_phase_reset"]()
    a = torch.zeros(1024, dtype=torch.float16)
    for _ in range(50):
        with pytest.raises(ValueError, match="vector_add: argument 'A': expected a CUDA tensor, got cpu"):
            timed["vector_add"](a, a, a)
    with pytest.raises(ValueError, match="expected dtype float16"):
        timed["vector_add"](a, a.float(), a)
    got = times(timed)
    assert {k: got[k] for k in (*PHASES, "calls")} == dict.fromkeys((*PHASES, "calls"), 0), got


def test_finished_phases_are_recorded_and_calls_count_only_returns(timed):
    """Tensors labelled cuda:0 pass every check; the call fails at the device slot (no
    driver here; no cubin is set on a GPU machine).  checks, pack and stream were finished
    and hold time; slot, context and launch hold none; the call did not return, so
    `calls` stays 0.  Reset zeroes everything."""
    timed["__tilecute_phase_reset"]()
    labelled = [FakeTensor((1024,), "float16") for _ in range(3)]  # cuda:0, no memory
    args = [tvm_ffi.from_dlpack(x) for x in labelled]
    assert str(args[0].device) == "cuda:0"
    for _ in range(100):
        with pytest.raises(RuntimeError, match=r"vector_add: (no CUDA driver|no cubin)"):
            timed["vector_add"](*args)
    got = times(timed)
    assert got["checks"] > 0 and got["pack"] > 0 and got["stream"] > 0, got
    assert got["slot"] == got["context"] == got["launch"] == got["calls"] == 0, got
    timed["__tilecute_phase_reset"]()
    assert all(v == 0 for k, v in times(timed).items() if k != "clock_read_ps")
    del args


def test_launcher_without_the_define_has_no_phase_exports(entry):
    module = tvm_ffi.load_module(str(entry / "launcher.so"))
    assert module.implements_function("vector_add")
    assert not module.implements_function("__tilecute_phase_times")
    assert not module.implements_function("__tilecute_phase_reset")


def test_call_function_without_the_define_preprocesses_to_no_timing_code(entry, tmp_path):
    """The TC_PHASE_* macros in the generated source expand to nothing."""
    source = entry / "launcher.cpp"
    text = source.read_text()
    assert "TC_PHASE_MARK(kPhaseChecks);" in text  # the source names the phases ...
    out = tmp_path / "launcher.ii"
    cmd = launcher_build_command(source, out)
    cmd = [c for c in cmd if not c.startswith(("-Wl,", "-L", "-l"))]
    cmd[cmd.index("-shared")] = "-E"
    subprocess.run(cmd, check=True, capture_output=True)
    pre = out.read_text()
    body = re.search(r"void call_vector_add\(.*?\n}\n", pre, re.S).group(0)
    assert "tc_launch_kernels(tc_launcher, device_id, stream_arg, launches, nullptr);" in body
    for word in ("PhaseTimer", "tc_phase_timer", "kPhase", "steady_clock", "TC_PHASE"):
        assert word not in body  # ... which compile to nothing
    for word in ("class TcPhaseTimer {", "steady_clock", "tc_phase_add", "__tilecute_phase"):
        assert word not in pre
