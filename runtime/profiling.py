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
    """How :meth:`tilecute.profiler.Profiler` makes the input tensors, with TileLang's
    meanings (``tilelang.utils.tensor.get_tensor_supply``), see :func:`make_tensor`."""

    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


def map_torch_type(dtype):
    """The torch dtype of a tilecute dtype (a name, an alias such as ``"half"``, or
    ``T.float16``): ``"float16"`` -> ``torch.float16``; a torch dtype is returned as is."""
    import torch

    from .dtypes import ALIASES, DTYPES, torch_name

    if isinstance(dtype, torch.dtype):
        return dtype
    name = str(dtype)
    name = ALIASES.get(name, name)
    if name not in DTYPES:
        raise ValueError(f"map_torch_type: unknown dtype {dtype!r}; the dtypes are "
                         f"{', '.join(DTYPES)}")
    return getattr(torch, torch_name(name))


def is_float8_dtype(dtype) -> bool:
    """Whether ``dtype`` (a torch dtype) is one of torch's 8-bit float types."""
    import torch

    return dtype in {getattr(torch, n) for n in ("float8_e5m2", "float8_e5m2fnuz",
                                                 "float8_e4m3fn", "float8_e4m3fnuz")
                     if hasattr(torch, n)}


def make_tensor(shape, dtype, supply: TensorSupplyType, device="cuda"):
    """A tensor of ``shape`` and ``dtype`` filled as ``supply`` says (TileLang's meanings):

    - ``Integer``: random integers in [-2, 2] as the dtype; [0, 2] for unsigned types,
      {0, 1} for bool; float8 types take int8 values in [-128, 127] converted;
    - ``Auto``: uniform in [-1, 1) for float16, bfloat16 and float32, else as ``Integer``;
    - ``Uniform``: uniform in [-1, 1), ``Normal``: normal of mean -1 and standard deviation
      1 (TileLang's ``normal_(-1.0, 1.0)``), ``Randn``: standard normal, each made in
      float32 and converted (int8 tensors are all ones for Uniform and Normal);
    - ``Zero``, ``One``;
    - float8_e8m0fnu (MX scale factors: positive powers of two, no sign, no zero): every
      supply but ``Zero`` and ``One`` gives 2^k, k random in [-2, 2] (converting the others'
      values would make NaNs of the negatives and the smallest power of two of 0).
    """
    import torch

    t = map_torch_type(dtype)
    shape = [int(d) for d in shape]
    if t == getattr(torch, "float8_e8m0fnu", None) and \
            supply not in (TensorSupplyType.Zero, TensorSupplyType.One):
        exponents = torch.randint(-2, 3, shape, device=device).to(torch.float32)
        return torch.exp2(exponents).to(t)

    def integers():
        if t == torch.bool:
            return torch.randint(0, 2, shape, device=device).to(t)
        if is_float8_dtype(t):
            return torch.randint(-128, 128, shape, device=device, dtype=torch.int8).to(t)
        if not t.is_floating_point and not t.is_signed:
            return torch.randint(0, 3, shape, device=device).to(t)
        return torch.randint(-2, 3, shape, device=device).to(t)

    if supply == TensorSupplyType.Auto:
        if t in (torch.float16, torch.bfloat16, torch.float32):
            return torch.empty(shape, device=device, dtype=t).uniform_(-1.0, 1.0)
        return integers()
    if supply == TensorSupplyType.Integer:
        return integers()
    if supply == TensorSupplyType.Zero:
        return torch.zeros(shape, dtype=t, device=device)
    if supply == TensorSupplyType.One:
        return torch.ones(shape, dtype=t, device=device)
    if t == torch.int8 and supply in (TensorSupplyType.Uniform, TensorSupplyType.Normal):
        return torch.ones(shape, dtype=t, device=device)
    if supply == TensorSupplyType.Uniform:
        return torch.empty(shape, device=device, dtype=torch.float32).uniform_(-1.0, 1.0).to(t)
    if supply == TensorSupplyType.Normal:
        return torch.empty(shape, device=device, dtype=torch.float32).normal_(-1.0, 1.0).to(t)
    if supply == TensorSupplyType.Randn:
        return torch.randn(shape, device=device).to(t)
    raise TypeError(f"make_tensor: supply must be a TensorSupplyType, got {supply!r}")


def torch_assert_close(tensor_a, tensor_b, rtol: float = 1e-2, atol: float = 1e-3,
                       max_mismatched_ratio: float = 0.001, verbose: bool = False,
                       equal_nan: bool = True, check_device: bool = True,
                       check_dtype: bool = True, check_layout: bool = True,
                       check_stride: bool = False, base_name: str = "LHS",
                       ref_name: str = "RHS") -> bool:
    """TileLang's ``torch_assert_close``: the tensors agree in shape (and, as the
    ``check_*`` flags say, device, dtype, layout, strides), and at most
    ``int(numel * max_mismatched_ratio)`` elements are outside ``atol + rtol * |b|``
    (compared on one device in the promoted dtype).  Returns True; raises
    ``AssertionError`` with the first mismatch and the largest differences."""
    import torch

    def differ(what, x, y):
        raise AssertionError(f"{base_name} and {ref_name} differ in {what}: {x} != {y}")

    if tensor_a.shape != tensor_b.shape:
        differ("shape", tuple(tensor_a.shape), tuple(tensor_b.shape))
    if check_layout and tensor_a.layout != tensor_b.layout:
        differ("layout", tensor_a.layout, tensor_b.layout)
    if check_stride and tensor_a.layout == tensor_b.layout == torch.strided and \
            tensor_a.stride() != tensor_b.stride():
        differ("strides", tensor_a.stride(), tensor_b.stride())
    if check_device and tensor_a.device != tensor_b.device:
        differ("device", tensor_a.device, tensor_b.device)
    if check_dtype and tensor_a.dtype != tensor_b.dtype:
        differ("dtype", tensor_a.dtype, tensor_b.dtype)
    a, b = tensor_a, tensor_b
    if a.device != b.device:
        a, b = a.cpu(), b.cpu()
    if a.layout != torch.strided:
        a = a.to_dense()
    if b.layout != torch.strided:
        b = b.to_dense()
    if a.dtype != b.dtype:
        wide = {torch.uint16: torch.int64, torch.uint32: torch.int64, torch.uint64: torch.int64}
        common = torch.promote_types(wide.get(a.dtype, a.dtype), wide.get(b.dtype, b.dtype))
        a, b = a.to(common), b.to(common)
    bad = ~torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    n_bad, total = int(bad.sum().item()), a.numel()
    allowed = int(total * max_mismatched_ratio)
    if verbose:
        print(f"{n_bad} of {total} elements mismatched (allowed: {allowed})")
    if n_bad <= allowed:
        return True
    flat = int(torch.argmax(bad.reshape(-1).int()).item())
    index, rest = [], flat
    for extent in reversed(a.shape):
        index.append(rest % extent)
        rest //= extent
    x, y = a.reshape(-1)[flat].item(), b.reshape(-1)[flat].item()
    diff = (a.double() - b.double()).abs()
    raise AssertionError(
        f"{n_bad} of {total} elements differ beyond rtol={rtol}, atol={atol} (allowed "
        f"{allowed}, {max_mismatched_ratio:.2%}); first at index {index[::-1]}: "
        f"{base_name}={x:.6g}, {ref_name}={y:.6g}; greatest absolute difference "
        f"{diff.max().item():.6g}, greatest relative difference "
        f"{(diff / (b.double().abs() + 1e-12)).max().item():.6g}")


def _cuda():
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("tilecute.profiler: timing needs a CUDA GPU; none is available")
    return torch


_FLUSH = "tilecute::l2_flush"  # the profiler range that marks the L2 flushes (cupti backend)


def do_bench(fn: Callable, warmup: float = 25, rep: float = 100, _n_warmup: int = 0,
             _n_repeat: int = 0, quantiles=None, fast_flush: bool = True,
             backend: str = "event", return_mode: str = "mean", device=None,
             cache_size: int = 256, early_stop_baseline: Optional[float] = None):
    """Milliseconds per call of ``fn()`` (TileLang's ``tilelang.profiler.do_bench``):
    ``warmup`` and ``rep`` are milliseconds of warm-up and of measurement (the numbers of
    calls are estimated from five timed calls; ``_n_warmup``/``_n_repeat`` fix them), the
    L2 cache flushed before each call by zeroing ``cache_size`` MiB (int32 words, or bytes
    when not ``fast_flush``).

    ``backend``: ``"event"`` times each call with CUDA events; ``"cupti"`` sums the device
    time of the kernels the calls launch (torch's profiler, which reads CUPTI), without
    the flushes and without launch gaps; ``"cudagraph"`` captures ``_n_repeat`` calls in
    one CUDA graph and times its replays (launch overhead out).  ``return_mode``: "mean",
    "median", "min" or "max" of the per-call times; with ``quantiles`` the list of those
    quantiles instead (one value: that value).  The ``cupti`` backend gives the mean.
    ``device``: the CUDA device to time on (default: the current one).
    ``early_stop_baseline``: when the estimate already exceeds it (ms), return the
    estimate without the full measurement (what an autotuner uses to drop slow configs)."""
    torch = _cuda()
    if return_mode not in ("mean", "median", "min", "max"):
        raise ValueError(f"do_bench: return_mode must be mean, median, min or max, got "
                         f"{return_mode!r}")
    if backend not in ("event", "cupti", "cudagraph"):
        raise ValueError(f"do_bench: backend must be event, cupti or cudagraph, got {backend!r}")
    if device is not None:
        index = device if isinstance(device, int) else torch.device(device).index
        if not isinstance(device, int) and torch.device(device).type != "cuda":
            raise ValueError(f"do_bench: device must be a CUDA device, got {device!r}")
        with torch.cuda.device(torch.cuda.current_device() if index is None else index):
            return do_bench(fn, warmup, rep, _n_warmup, _n_repeat, quantiles, fast_flush,
                            backend, return_mode, None, cache_size, early_stop_baseline)
    fn()
    torch.cuda.synchronize()
    n_bytes = int(cache_size) * 1024 * 1024
    cache = (torch.empty(n_bytes // 4, dtype=torch.int32, device="cuda") if fast_flush
             else torch.empty(n_bytes, dtype=torch.int8, device="cuda"))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        cache.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-3)
    if early_stop_baseline is not None and estimate > early_stop_baseline:
        return [estimate] * len(quantiles) if quantiles is not None else estimate
    n_warmup = _n_warmup or max(1, int(warmup / estimate))
    n_repeat = _n_repeat or max(1, int(rep / estimate))
    for _ in range(n_warmup):
        fn()
    if backend == "cupti":
        return _kernel_time(torch, fn, cache, n_repeat)
    if backend == "cudagraph":
        times = _graph_times(torch, fn, cache, n_repeat)
    else:
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


def _kernel_time(torch, fn, cache, n_repeat: int) -> float:
    """Mean device milliseconds of the kernels one ``fn()`` launches (torch's profiler
    over CUPTI), the L2 flushes (marked by a profiler range) left out."""
    from torch.profiler import ProfilerActivity, profile, record_function

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(n_repeat):
            with record_function(_FLUSH):
                cache.zero_()
            fn()
        torch.cuda.synchronize()
    total = flush = 0.0
    for ev in prof.events():
        if getattr(getattr(ev, "device_type", None), "name", "") != "CUDA":
            continue
        if ev.is_user_annotation:
            if ev.key == _FLUSH:
                flush += ev.self_device_time_total
        else:
            total += ev.self_device_time_total
    return (total - flush) / n_repeat * 1e-3  # microseconds -> milliseconds


def _graph_times(torch, fn, cache, n_repeat: int, replays: int = 10) -> list:
    """Milliseconds per call from ``replays`` replays of a CUDA graph of ``n_repeat``
    calls (the L2 flushed before each replay, not inside the graph)."""
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(n_repeat):
                fn()
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(replays)]
        for s, e in zip(starts, ends):
            cache.zero_()
            s.record()
            graph.replay()
            e.record()
        torch.cuda.synchronize()
    return [s.elapsed_time(e) / n_repeat for s, e in zip(starts, ends)]


class Profiler:
    """``kernel.get_profiler(tensor_supply_type)`` (TileLang's ``tilelang.profiler.Profiler``):
    makes the kernel's inputs (every parameter not in ``out_idx``) as the supply type
    says, with symbolic dims from ``shapes`` (a dict symbol -> size) where the kernel's
    shapes are not static.  ``func`` (and calling the profiler) is the kernel itself;
    ``params`` its parameters (the launch ABI's), ``result_idx`` its ``out_idx``."""

    def __init__(self, kernel, supply: TensorSupplyType = TensorSupplyType.Auto,
                 shapes: Optional[dict] = None):
        if not isinstance(supply, TensorSupplyType):
            raise TypeError(f"get_profiler: tensor_supply_type must be a TensorSupplyType, "
                            f"got {supply!r}")
        self.kernel, self.supply, self.shapes = kernel, supply, dict(shapes or {})
        self.adapter = kernel

    @property
    def supply_type(self) -> TensorSupplyType:
        return self.supply

    @property
    def params(self) -> list:
        """The kernel's ``params`` (TileLang's ``Profiler.params``: its KernelParams)."""
        return list(self.kernel.params)

    @property
    def result_idx(self) -> list:
        """``out_idx`` as given (TileLang's ``result_idx``: the outputs' return order)."""
        return list(getattr(self.kernel, "out_order", self.kernel.out_idx))

    @property
    def func(self):
        """What the profiler runs: the kernel (TileLang's adapter), or the one given to
        :meth:`with_default_adapter`."""
        return self.adapter

    def with_default_adapter(self, adapter) -> "Profiler":
        self.adapter = adapter
        return self

    def __call__(self, *args, **kwargs):
        return self.func(*args, **kwargs)

    def _get_params(self, with_output: bool = False) -> list:
        return [a for i, a in enumerate(self.kernel.args)
                if with_output or i not in self.kernel.out_idx]

    def _get_inputs(self, with_output: bool = False,
                    dynamic_symbolic_constraints: Optional[dict] = None) -> list:
        """A tensor for each parameter not in ``out_idx`` (each one with ``with_output``);
        ``dynamic_symbolic_constraints`` sizes symbolic dims (as ``shapes``)."""
        from .abi import TensorArg, dim_symbols, dim_text, eval_dim

        sizes = {**self.shapes, **dict(dynamic_symbolic_constraints or {})}
        out = []
        for arg in self._get_params(with_output):
            if not isinstance(arg, TensorArg):
                raise ValueError(f"{self.kernel.name}: the profiler makes tensors only; "
                                 f"pass inputs for scalar parameter '{arg.name}' with "
                                 "do_bench(input_tensors=...)")
            shape = []
            for d in arg.shape:
                missing = [n for n in dim_symbols(d) if n not in sizes]
                if missing:
                    raise ValueError(f"{self.kernel.name}: parameter '{arg.name}' has symbolic "
                                     f"dim '{dim_text(d)}'; give the size of '{missing[0]}': "
                                     f"get_profiler(shapes={{'{missing[0]}': ...}}) or "
                                     "do_bench(dynamic_symbolic_constraints=...)")
                shape.append(eval_dim(d, sizes))
            out.append(make_tensor(shape, arg.dtype, self.supply))
        return out

    _inputs = _get_inputs

    def run_once(self, func: Optional[Callable] = None):
        """``func`` (default: the kernel) called once on generated inputs."""
        return (func or self.func)(*self._get_inputs())

    def do_bench(self, func: Optional[Callable] = None, warmup: float = 25, rep: float = 100,
                 n_warmup: int = 0, n_repeat: int = 0,
                 input_tensors: Optional[Sequence] = None, backend: str = "event",
                 quantiles=None, return_mode: str = "mean",
                 dynamic_symbolic_constraints: Optional[dict] = None, device=None,
                 early_stop_baseline: Optional[float] = None):
        """Milliseconds per call of the kernel (or of ``func``, e.g. a reference program
        taking the same inputs) on generated inputs, or on ``input_tensors``; the other
        arguments are :func:`do_bench`'s."""
        _cuda()
        if input_tensors is not None:
            inputs = list(input_tensors)
        else:
            inputs = self._get_inputs(dynamic_symbolic_constraints=dynamic_symbolic_constraints)
        target = func if func is not None else self.func
        return do_bench(lambda: target(*inputs), warmup, rep, n_warmup, n_repeat,
                        quantiles=quantiles, backend=backend, return_mode=return_mode,
                        device=device, early_stop_baseline=early_stop_baseline)

    def _outputs(self, inputs, reference_program):
        torch = _cuda()
        want = reference_program(*inputs)
        torch.cuda.synchronize()
        got = self.func(*inputs)
        torch.cuda.synchronize()

        def as_list(x):
            return [] if x is None else list(x) if isinstance(x, (tuple, list)) else [x]

        return as_list(got), as_list(want)

    def assert_allclose(self, reference_program: Callable, input_tensors: Optional[Sequence] = None,
                        atol: float = 1e-2, rtol: float = 1e-2,
                        max_mismatched_ratio: float = 0.01) -> None:
        """Run ``reference_program`` and the kernel on the same inputs and compare each
        output (the kernel's return value: its ``out_idx`` outputs) with
        ``torch_assert_close`` (float8 compared in float32); at most
        ``max_mismatched_ratio`` of the elements may be outside ``atol + rtol * |ref|``.
        A reference output that is None is not compared."""
        inputs = list(input_tensors) if input_tensors is not None else self._get_inputs()
        got, want = self._outputs(inputs, reference_program)
        if len(got) != len(want):
            raise AssertionError(f"{self.kernel.name}: {len(got)} outputs, the reference "
                                 f"returned {len(want)}")
        for g, w in zip(got, want):
            if g is None or w is None:
                continue
            g = g.float() if is_float8_dtype(g.dtype) else g
            w = w.float() if is_float8_dtype(w.dtype) else w
            torch_assert_close(g, w, rtol=rtol, atol=atol,
                               max_mismatched_ratio=max_mismatched_ratio,
                               base_name=self.kernel.name, ref_name="reference")

    def manual_assert_close(self, reference_program: Callable,
                            input_tensors: Optional[Sequence] = None,
                            manual_check_prog: Optional[Callable] = None) -> None:
        """Run both on the same inputs and hand the two output lists to
        ``manual_check_prog(kernel_outputs, reference_outputs)``."""
        inputs = list(input_tensors) if input_tensors is not None else self._get_inputs()
        got, want = self._outputs(inputs, reference_program)
        if len(got) != len(want):
            raise AssertionError(f"{self.kernel.name}: {len(got)} outputs, the reference "
                                 f"returned {len(want)}")
        manual_check_prog(got, want)

    def assert_consistent(self, repeat: int = 10) -> None:
        """The kernel gives the same outputs ``repeat`` more times on the same inputs (a
        race check)."""
        torch = _cuda()
        inputs = self._get_inputs()

        def as_list(x):
            return list(x) if isinstance(x, (tuple, list)) else [x]

        first = as_list(self.func(*inputs))
        for _ in range(repeat):
            for k, (a, b) in enumerate(zip(as_list(self.func(*inputs)), first)):
                if not torch.allclose(a, b):
                    raise AssertionError(f"{self.kernel.name}: output {k} is not consistent "
                                         "across runs on the same inputs")
