"""TileLang's ``tilelang.autotuner.param``: ``CompileArgs`` / ``ProfileArgs`` records and
``AutotuneResult.save_to_disk`` / ``load_from_disk`` (its autotuning guide saves the
best kernel and reloads it in a later process)."""

import json
import os

import pytest

import tilecute
import tilecute.language as T
from tilecute.autotuner import AutotuneResult
from tilecute.autotuner.param import CompileArgs, ProfileArgs


@pytest.fixture(autouse=True)
def _env(monkeypatch, tmp_path):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    monkeypatch.setenv("TILECUTE_CACHE_DIR", str(tmp_path / "cache"))


def scale(n=1024, block=256):
    @T.prim_func
    def scale(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, block), threads=128) as bx:
            for i in T.Parallel(block):
                Y[bx * block + i] = X[bx * block + i] * 3.0
    return scale


def test_compile_args_compile_and_profile_args_keep_tilelangs_defaults():
    kernel = CompileArgs(out_idx=[-1], execution_backend="cython").compile_program(scale())
    assert kernel.out_idx == [1]
    p = ProfileArgs()
    assert (p.warmup, p.rep, p.timeout, p.backend, p.rtol, p.atol) == (25, 100, 30, "event", 1e-2, 1e-2)
    assert not p.skip_check and p.cache_input_tensors
    with pytest.raises(Exception):
        p.warmup = 1  # frozen, as TileLang's


def test_a_saved_result_loads_with_its_kernel(tmp_path):
    kernel = tilecute.compile(scale(), out_idx=[-1])
    result = AutotuneResult(latency=0.25, config={"block": 256}, ref_latency=0.5,
                            libcode=kernel.get_kernel_source(), kernel=kernel)
    where = tmp_path / "out" / "best" / "scale_1024"
    result.save_to_disk(where, verbose=True)
    assert json.loads((where / "best_config.json").read_text()) == {"block": 256}
    assert not any(p.name.startswith(".") for p in where.parent.iterdir())  # no staging left
    stamp = os.stat(where / "best_config.json").st_mtime_ns
    result.save_to_disk(where)  # a complete result is kept
    assert os.stat(where / "best_config.json").st_mtime_ns == stamp

    again = AutotuneResult.load_from_disk(where, CompileArgs())
    assert (again.latency, again.config, again.ref_latency) == (0.25, {"block": 256}, 0.5)
    assert again.kernel.out_idx == [1] and again.libcode == kernel.get_kernel_source()
    assert again.kernel.abi.to_json() == kernel.abi.to_json()
    assert AutotuneResult.load_from_disk(tmp_path / "missing", CompileArgs()) is None


def test_saving_a_result_without_a_kernel_is_refused(tmp_path):
    with pytest.raises(ValueError, match="has no compiled kernel"):
        AutotuneResult(latency=1.0, config={}).save_to_disk(tmp_path / "x")


@pytest.mark.gpu
def test_a_loaded_result_runs():
    import torch

    kernel = tilecute.compile(scale(), out_idx=[-1])
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        AutotuneResult(latency=0.1, config={"block": 256}, kernel=kernel).save_to_disk(f"{d}/r")
        again = AutotuneResult.load_from_disk(f"{d}/r", CompileArgs(out_idx=[-1]))
        x = torch.randn(1024, device="cuda")
        torch.testing.assert_close(again.kernel(x), x * 3)
