"""CUDA-event timing shared by the decode benchmarks (decode.py, mla_decode.py)."""

from __future__ import annotations

import statistics

import torch


def time_us(fn, reps: int, inner: int = 10) -> float:
    """Median over ``reps`` of the mean time of ``inner`` back-to-back calls: a decode step
    follows another on the stream, so the host's per-call work (output and workspace
    allocation, argument checks) overlaps the previous call's kernels, as when serving."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / inner)
    return statistics.median(times)


def time_us_graph(fn, reps: int, inner: int = 10) -> float:
    """As :func:`time_us`, but the ``inner`` calls captured once in a CUDA graph and
    replayed: the kernels' own time, without the host's per-call work (serving replays
    decode steps so)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(inner):
            fn()
    return time_us(graph.replay, reps, inner=1) / inner
