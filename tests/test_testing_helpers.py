"""tilecute.testing: TileLang's test marks and helpers, as tilelang.testing spells them."""

import pytest
import torch

import tilecute.testing as tt


def _skips(mark) -> bool:
    (m,) = mark.marks()
    assert m.name == "skipif"
    return bool(m.args[0])


def test_marks_for_other_backends_always_skip():
    for mark in (tt.requires_rocm, tt.requires_cdna, tt.requires_gfx950, tt.requires_metal,
                 tt.requires_llvm):
        assert _skips(mark), mark.reason


def test_requires_cuda_follows_torch(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _skips(tt.requires_cuda) and _skips(tt.requires_cuda_or_cdna)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert not _skips(tt.requires_cuda)


def test_requires_compute_version(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    assert not _skips(tt.requires_cuda_compute_version_ge(9, 0))
    assert _skips(tt.requires_cuda_compute_version_gt(9, 0))
    assert _skips(tt.requires_cuda_compute_version_eq(8, 0))
    assert not _skips(tt.requires_cuda_compute_version_lt(10))
    assert not _skips(tt.requires_cuda_compute_version(8, 6, mode="ge"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert _skips(tt.requires_cuda_compute_version_ge(7, 0))
    with pytest.raises(ValueError, match="mode='ne'"):
        tt.requires_cuda_compute_version(9, 0, mode="ne")


def test_requires_package():
    assert not _skips(tt.requires_package("json", "torch"))
    assert _skips(tt.requires_package("json", "no_such_package_tilecute"))


def test_mark_decorates_a_test():
    @tt.requires_rocm
    def t():
        pass

    (m,) = t.pytestmark
    assert m.name == "skipif" and m.args[0] is True and "CUDA code only" in m.kwargs["reason"]


# ---- process_func / regression: TileLang's perf-regression runner ----------------------
_BENCH_MODULE = '''
import tilecute.testing as tt
calls = []

def bench(scale=1.0):
    calls.append(scale)
    return 0.5 * scale

def regression_b_rows():
    tt.process_func(bench, "regression_rows", scale=4.0)

def regression_a_cols():
    tt.process_func(bench, "cols")

def helper_not_a_case():
    calls.append("helper")

tt.regression(verbose=False)
'''


def _run_bench_module(tmp_path, monkeypatch, capsys, **env):
    import runpy

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    path = tmp_path / "regression_bench.py"
    path.write_text(_BENCH_MODULE)
    scope = runpy.run_path(str(path))
    return scope["calls"], capsys.readouterr().out.splitlines()


def test_regression_runs_cases_in_name_order_and_prints_latencies(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("TL_PERF_REGRESSION_FORMAT", raising=False)
    monkeypatch.delenv("TL_PERF_REGRESSION_ONLY", raising=False)
    calls, lines = _run_bench_module(tmp_path, monkeypatch, capsys)
    assert calls == [1.0, 4.0]  # regression_a_cols before regression_b_rows; no helper
    assert lines == ["cols: 0.5", "rows: 2.0"]  # the regression_ prefix dropped


def test_regression_json_format_and_only_filter(tmp_path, monkeypatch, capsys):
    import json

    calls, lines = _run_bench_module(tmp_path, monkeypatch, capsys,
                                     TL_PERF_REGRESSION_FORMAT="json",
                                     TL_PERF_REGRESSION_ONLY="B_ROW*")
    assert calls == [4.0]
    (line,) = lines
    prefix = "__TILELANG_PERF_RESULTS_JSON__="
    assert line.startswith(prefix)
    assert json.loads(line[len(prefix):]) == [{"name": "rows", "latency": 2.0, "case": "b_rows"}]


def test_process_func_retries_a_non_positive_latency():
    times = iter([0.0, -1.0, 3.0])
    before = len(tt._perf_results)
    tt.process_func(lambda: next(times), "retry")
    assert tt._perf_results[before:] == [{"name": "retry", "latency": 3.0}]
    del tt._perf_results[before:]
    with pytest.warns(RuntimeWarning, match="never has latency 0.0 <= 0"):
        tt.process_func(lambda: 0.0, "never")
    assert len(tt._perf_results) == before
