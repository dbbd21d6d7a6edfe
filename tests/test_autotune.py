"""tilecute.autotune (issue 20 item 2): configs compiled in parallel, failures and
timeouts recorded and skipped, results stored under a key of everything that changes the
answer and reused without compiling or profiling; `tilecute tune`."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tilecute
from tilecute import autotuner as A

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import autotune_programs as P  # noqa: E402


@pytest.fixture(autouse=True)
def _env(monkeypatch, tmp_path):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path / "cache"))


def _tuner(configs, **kw):
    return tilecute.autotune(configs=configs, **kw)(P.scale)


def test_configs_compile_in_parallel_and_failures_are_recorded():
    tuned = _tuner([{"block": 256}, {"block": 512}, {"block": 384}, {"block": 128, "threads": 2048}])
    results = tuned.compile_all(1024)
    by_block = {(r.config["block"], r.config.get("threads")): r for r in results}
    assert by_block[(256, None)].kernel is not None and by_block[(512, None)].kernel is not None
    assert "does not divide" in by_block[(384, None)].error
    assert by_block[(128, 2048)].error.startswith("compile failed")
    assert Path(by_block[(256, None)].kernel.ensure_cubin()).stat().st_size > 0
    for r in (by_block[(256, None)], by_block[(512, None)]):  # its build's two phases
        assert r.entry_s > 0 and r.cubin_s > 0
        assert abs(r.entry_s + r.cubin_s - r.compile_s) < 1e-6
    assert by_block[(384, None)].entry_s is None  # no entry was built


def test_a_config_past_the_timeout_is_skipped_not_the_tuner():
    """(Killed processes and what they leave: tests/test_autotune_timeout.py.)"""
    tuned = _tuner([{"block": 256}, {"block": 512, "delay": 30.0}], timeout=20)
    results = tuned.compile_all(1024)
    assert results[0].kernel is not None
    assert results[1].error == "compile took longer than timeout=20 s (killed)"
    assert results[1].kernel is None and results[1].compile_s < 30


def test_the_key_changes_with_every_part(monkeypatch):
    configs = [{"block": 256}, {"block": 512}]
    base = _tuner(configs).key((1024,), {}, configs)
    assert _tuner(configs).key((1024,), {}, configs) == base
    assert _tuner(configs).key((2048,), {}, configs) != base  # arguments (shapes)
    other = [{"block": 256}, {"block": 128}]
    assert _tuner(other).key((1024,), {}, other) != base  # a config's IR
    f32 = tilecute.autotune(configs=configs)(tilecute.jit(out_idx=[1])(P.scale_program))
    assert f32.key((1024,), {}, configs) != base  # out_idx ([-1] and [1] differ as written)
    opts = tilecute.autotune(configs=configs)(
        tilecute.jit(out_idx=[-1], options={"disable_tma": True})(P.scale_program))
    assert opts.key((1024,), {}, configs) != base  # options
    monkeypatch.setenv("TILECUTE_ARCH", "sm_80")
    assert _tuner(configs).key((1024,), {}, configs) != base  # arch
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setattr("tilecute.cache.tool_versions", lambda: {"tilecute": "other"})
    assert _tuner(configs).key((1024,), {}, configs) != base  # versions


def test_stored_results_are_reused_without_compiling_or_profiling(monkeypatch):
    configs = [{"block": 256}, {"block": 512}]
    tuned = _tuner(configs)
    key = tuned.key((1024,), {}, configs)
    A._store(key, "scale", (1024,), {}, [A.ConfigResult({"block": 256}, 0.02),
                                          A.ConfigResult({"block": 512}, 0.01)], {"block": 512})

    def boom(*a, **k):
        raise AssertionError("compiled or profiled again")
    monkeypatch.setattr(A.AutoTuner, "compile_all", boom)
    monkeypatch.setattr(A.AutoTuner, "profile", boom)
    kernel = tuned(1024)
    assert tuned.result.from_store and tuned.result.best == {"block": 512}
    assert kernel.abi.kernels[0].grid[0] in (2, "2")  # 1024 / 512 blocks
    assert tuned(1024) is kernel
    # another process: same key, the stored winner, no compile of the others
    code = textwrap.dedent(f"""
        import sys; sys.path.insert(0, {str(HERE)!r})
        import tilecute, autotune_programs as P
        from tilecute import autotuner as A
        A.AutoTuner.compile_all = A.AutoTuner.profile = None
        t = tilecute.autotune(configs={configs!r})(P.scale)
        t(1024)
        print(t.result.from_store, t.result.best)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True", "{'block':", "512}"]


def test_without_a_gpu_tuning_says_so():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("has a GPU")
    tuned = _tuner([{"block": 256}])
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        tuned(1024)


def test_autotune_refuses_what_it_cannot_tune():
    with pytest.raises(TypeError, match="stacks on @tilecute.jit"):
        tilecute.autotune(configs=[{}])(P.scale_program)
    with pytest.raises(TypeError, match="unsupported argument"):
        tilecute.autotune(configs=[{}], benchmark_backend="nvbench")


def test_tune_cli(capsys):
    from tilecute.cli import main

    A._store("ab" * 32, "scale", (1024,), {}, [A.ConfigResult({"block": 256}, 0.02)], {"block": 256})
    assert main(["tune", "ls"]) == 0
    assert "abababababab  scale" in capsys.readouterr().out
    assert main(["tune", "show", "abab"]) == 0
    assert json.loads(capsys.readouterr().out)["best"] == {"block": 256}
    assert main(["tune", "clear"]) == 0
    assert "removed 1 tuning result" in capsys.readouterr().out
    assert main(["tune", "show", "abab"]) == 1


@pytest.mark.gpu
def test_tuning_picks_a_correct_kernel_on_the_gpu():
    import torch

    tuned = _tuner([{"block": 256}, {"block": 512}, {"block": 384}],
                   ref_prog=lambda a: a * 2, warmup=2, rep=5)
    kernel = tuned(1 << 20)
    assert tuned.result.best in ({"block": 256}, {"block": 512})
    assert sum(r.time_ms is not None for r in tuned.result.configs) == 2
    x = torch.randn(1 << 20, device="cuda")
    torch.testing.assert_close(kernel(x), x * 2)


def test_a_config_may_carry_its_own_pass_configs():
    """TileLang's per-config ``"pass_configs"``: merged over the jit's options for that
    config's build (its manifest records them); a value tilecute refuses fails that config
    only, naming the key."""
    import json

    from tilecute.transform import PassConfigKey

    tuned = _tuner([{"block": 256, "pass_configs": {PassConfigKey.TL_ENABLE_FAST_MATH: True}},
                    {"block": 512},
                    {"block": 128, "pass_configs": {"tl.disable_tma_lower": "maybe"}}])
    results = tuned.compile_all(1024)
    options = [json.loads((Path(r.kernel.path) / "manifest.json").read_text())["options"]
               if r.kernel is not None else None for r in results]
    assert options[0].get("fast_math") is True and not options[1].get("fast_math")
    assert results[2].kernel is None and "tl.disable_tma_lower" in results[2].error


def test_close_configs_are_timed_again_in_rounds(monkeypatch):
    """The configs within 5% of the best first time are timed again in rotated rounds and
    keep the median: a lucky first sample does not win."""
    import tilecute.profiler as prof

    first = {"a": 1.00, "b": 1.02, "c": 1.04, "d": 2.0}
    later = {"a": [1.10, 1.09, 1.11], "b": [1.00, 1.01, 0.99], "c": [1.05, 1.06, 1.04]}
    calls = []

    def fake_bench(fn, warmup, rep, backend="event", early_stop_baseline=None):
        name = fn()
        calls.append(name)
        seen = calls.count(name)
        return first[name] if seen == 1 else later[name][seen - 2]

    monkeypatch.setattr(prof, "_cuda", lambda: None)
    monkeypatch.setattr(prof, "do_bench", fake_bench)
    monkeypatch.setattr(A.AutoTuner, "_make_inputs", lambda self, kernel: [])
    monkeypatch.setattr(A.AutoTuner, "_check_scalar_inputs", lambda self, kernel: None)
    tuner = A.AutoTuner(None, configs=[], skip_check=True)
    tuner.__name__ = "fake"
    results = [A.ConfigResult({"name": n}, kernel=(lambda n=n: n)) for n in "abcd"]
    tuner.profile(results)
    times = {r.config["name"]: r.time_ms for r in results}
    assert times == {"a": 1.10, "b": 1.00, "c": 1.05, "d": 2.0}
    assert calls[4:] == ["a", "b", "c", "b", "c", "a", "c", "a", "b"]  # rotated rounds
    assert min(results, key=lambda r: r.time_ms).config["name"] == "b"
