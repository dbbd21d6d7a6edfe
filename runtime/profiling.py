"""Timing and checking compiled kernels, and making their inputs: what TileLang's
``tilelang.profiler`` and ``tilelang.utils`` offer (re-exported as ``tilecute.profiler``
and ``tilecute.utils``; here so that ``kernel.get_profiler`` stays inside the runtime).
Times are CUDA-event milliseconds; timing needs a GPU (and torch) and says so when there
is none."""

from __future__ import annotations

import enum
import statistics
from typing import Callable, Optional, Sequence


class TensorSupplyType(enum.Enum):
    """How :meth:`tilecute.profiler.Profiler` makes the input tensors (TileLang's meanings):
    ``Integer``: random integers in [-2, 2] (as the dtype; [0, 3] for unsigned),
    ``Uniform``: uniform in [-1, 1), ``Normal``/``Randn``: standard normal, ``Zero``,
    ``One``, ``Auto``: ``Integer`` for integer dtypes, ``Normal`` for floating ones."""

    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


def map_torch_type(dtype: str):
    """The torch dtype of a tilecute dtype name (``"float16"`` -> ``torch.float16``)."""
    import torch

    from .dtypes import DTYPES

    name = str(dtype)
    if name not in DTYPES:
        raise ValueError(f"map_torch_type: unknown dtype {dtype!r}; the dtypes are "
                         f"{', '.join(DTYPES)}")
    torch_name = {"float8_e4m3": "float8_e4m3fn"}.get(name, name)
    return getattr(torch, torch_name)


def make_tensor(shape, dtype: str, supply: TensorSupplyType, device="cuda"):
    """A tensor of ``shape`` and ``dtype`` filled as ``supply`` says."""
    import torch

    t = map_torch_type(dtype)
    floating = t.is_floating_point
    if supply == TensorSupplyType.Auto:
        supply = TensorSupplyType.Normal if floating else TensorSupplyType.Integer
    if supply == TensorSupplyType.Zero:
        return torch.zeros(shape, dtype=t, device=device)
    if supply == TensorSupplyType.One:
        return torch.ones(shape, dtype=t, device=device)
    if supply == TensorSupplyType.Integer:
        if t == torch.bool:
            return torch.randint(0, 2, shape, device=device).bool()
        low, high = (0, 4) if (not floating and not t.is_signed) else (-2, 3)
        return torch.randint(low, high, shape, device=device).to(t)
    if not floating:
        raise ValueError(f"TensorSupplyType.{supply.name} makes floating-point tensors; "
                         f"{dtype} is an integer type (use Integer or Auto)")
    if supply == TensorSupplyType.Uniform:
        return (torch.rand(shape, device=device) * 2 - 1).to(t)
    return torch.randn(shape, device=device).to(t)  # Normal, Randn


def _cuda():
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("tilecute.profiler: timing needs a CUDA GPU; none is available")
    return torch


def do_bench(fn: Callable, warmup: float = 25, rep: float = 100, _n_warmup: int = 0,
             _n_repeat: int = 0, return_mode: str = "mean", quantiles=None) -> float:
    """Milliseconds per call of ``fn()``: ``warmup`` and ``rep`` are milliseconds of
    warm-up and of measurement (the numbers of calls are estimated from one timed call;
    ``_n_warmup``/``_n_repeat`` fix them), each call timed with CUDA events, the L2 cache
    flushed between calls.  ``return_mode``: "mean", "median", "min" or "max"; with
    ``quantiles`` the list of those quantiles instead (as triton.testing.do_bench)."""
    torch = _cuda()
    if return_mode not in ("mean", "median", "min", "max"):
        raise ValueError(f"do_bench: return_mode must be mean, median, min or max, got "
                         f"{return_mode!r}")
    fn()
    torch.cuda.synchronize()
    cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        cache.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)
    n_warmup = _n_warmup or max(1, int(warmup / estimate))
    n_repeat = _n_repeat or max(1, int(rep / estimate))
    for _ in range(n_warmup):
        fn()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    for s, e in zip(starts, ends):
        cache.zero_()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    if quantiles is not None:
        q = torch.quantile(torch.tensor(times), torch.tensor(list(quantiles))).tolist()
        return q[0] if len(q) == 1 else q
    return {"mean": statistics.fmean, "median": statistics.median, "min": min,
            "max": max}[return_mode](times)


class Profiler:
    """``kernel.get_profiler(tensor_supply_type)``: makes the kernel's inputs (every
    parameter not in ``out_idx``) as the supply type says, with symbolic dims from
    ``shapes`` (a dict symbol -> size) where the kernel's shapes are not static."""

    def __init__(self, kernel, supply: TensorSupplyType = TensorSupplyType.Auto,
                 shapes: Optional[dict] = None):
        if not isinstance(supply, TensorSupplyType):
            raise TypeError(f"get_profiler: tensor_supply_type must be a TensorSupplyType, "
                            f"got {supply!r}")
        self.kernel, self.supply, self.shapes = kernel, supply, dict(shapes or {})

    def _inputs(self) -> list:
        from .abi import TensorArg

        out = []
        for i, arg in enumerate(self.kernel.args):
            if i in self.kernel.out_idx:
                continue
            if not isinstance(arg, TensorArg):
                raise ValueError(f"{self.kernel.name}: the profiler makes tensors only; "
                                 f"pass inputs for scalar parameter '{arg.name}' with "
                                 "do_bench(input_tensors=...)")
            shape = []
            for d in arg.shape:
                if isinstance(d, int):
                    shape.append(d)
                elif d in self.shapes:
                    shape.append(int(self.shapes[d]))
                else:
                    raise ValueError(f"{self.kernel.name}: parameter '{arg.name}' has symbolic "
                                     f"dim '{d}'; give its size: get_profiler(shapes={{'{d}': "
                                     "...}})")
            out.append(make_tensor(shape, arg.dtype, self.supply))
        return out

    def do_bench(self, func: Optional[Callable] = None, warmup: float = 25, rep: float = 100,
                 n_warmup: int = 0, n_repeat: int = 0,
                 input_tensors: Optional[Sequence] = None, return_mode: str = "mean") -> float:
        """Milliseconds per call of the kernel (or of ``func``, a reference program taking
        the same inputs) on generated inputs, or on ``input_tensors``."""
        _cuda()
        inputs = list(input_tensors) if input_tensors is not None else self._inputs()
        target = func if func is not None else self.kernel
        return do_bench(lambda: target(*inputs), warmup, rep, n_warmup, n_repeat, return_mode)

    def assert_allclose(self, reference_program: Callable, input_tensors: Optional[Sequence] = None,
                        atol: float = 1e-2, rtol: float = 1e-2,
                        max_mismatched_ratio: float = 0.01) -> None:
        """Run the kernel and ``reference_program`` on the same inputs and compare each
        output (the kernel's return value, or its ``out_idx`` outputs); at most
        ``max_mismatched_ratio`` of the elements may be outside ``atol + rtol * |ref|``."""
        torch = _cuda()
        inputs = list(input_tensors) if input_tensors is not None else self._inputs()
        got = self.kernel(*inputs)
        want = reference_program(*inputs)
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        want = list(want) if isinstance(want, (tuple, list)) else [want]
        if len(got) != len(want):
            raise AssertionError(f"{self.kernel.name}: {len(got)} outputs, the reference "
                                 f"returned {len(want)}")
        for k, (g, w) in enumerate(zip(got, want)):
            g, w = g.double(), torch.as_tensor(w, device=g.device).double()
            bad = ~torch.isclose(g, w, atol=atol, rtol=rtol, equal_nan=True)
            ratio = bad.float().mean().item() if bad.numel() else 0.0
            if ratio > max_mismatched_ratio:
                worst = (g - w).abs().max().item()
                raise AssertionError(
                    f"{self.kernel.name}: output {k}: {ratio:.2%} of the elements differ from "
                    f"the reference beyond atol={atol}, rtol={rtol} (allowed "
                    f"{max_mismatched_ratio:.2%}); max |diff| {worst:.3g}")
