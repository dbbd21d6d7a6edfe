"""Compile-only mode for TileLang's programs on a machine with no GPU (import it, or load it
as a pytest plugin, ``-p compile_only``, after ``tlalias``): tensors asked for on ``cuda`` are
made on the CPU; a tilecute kernel's first call builds its cubin (the arch from TILECUTE_ARCH)
and records its name in ``built``, and no call launches anything (outputs keep whatever their
allocation held); ``do_bench`` times nothing; the device properties are an H100's (and torch
says one is there), and so are the CUDA driver's attributes ``tilecute.carver.arch.driver``
reads; torch's CUDA generators and seeding are the CPU's, and ``torch.profiler`` traces
the CPU only; autotuned factories compile the call's own (default) config instead of tuning
(a tuned parameter left at a ``None`` default takes the first config's; a scalar input with no
``set_autotune_inputs`` is the tuner's ValueError); ``torch.compile`` is the identity; ``torch.allclose`` / ``torch.testing.assert_close`` and TileLang's
``torch_assert_close`` pass, since no kernel ran.  The launcher never runs either, so what it
checks at each call (a grid extent of 0: TileLang's issue 1993; a host-evaluable
``T.assume``; shapes, strides, dtypes) raises nothing here: a test expecting such a raise
reports "DID NOT RAISE" (tests/test_empty_grid.py and tests/test_host_assumes.py reach those
checks on the CPU with fake CUDA tensors).  The
reference stand-ins of ``shims/`` are on the path where flash_attn / fla are absent; without
triton, an inert stand-in (``install_stubs``: its kernels and calls do nothing) that keeps
``triton.cdiv`` and ``triton.next_power_of_2``."""

import functools
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
import tlalias  # noqa: E402,F401
import torch  # noqa: E402

import tilecute  # noqa: E402
import tilecute.profiler  # noqa: E402
import tilecute.runtime.kernel as _rk  # noqa: E402
from tilecute.autotuner import AutoTuner, get_autotune_inputs  # noqa: E402

if not os.environ.get("TILECUTE_ARCH"):
    raise SystemExit("compile-only mode: set TILECUTE_ARCH (and CUTE_DSL_ARCH), e.g. sm_90a")
SHIMS = os.path.join(HERE, "shims")
if any(importlib.util.find_spec(name) is None for name in ("flash_attn", "fla")):
    sys.path.append(SHIMS)

# -- packages the CPU cannot run: inert stand-ins ---------------------------------------------------

_stubbed = set()


class _Inert:
    def __init__(self, name="stand-in"):
        self._name = name

    def __call__(self, *a, **k):
        return _Inert(self._name + "()")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert(f"{self._name}.{name}")

    def __getitem__(self, key):
        return _Inert(self._name + "[]")

    def __iter__(self):
        """``a, b, c = reference(...)``: as many stand-ins as the caller's unpacking takes."""
        import dis

        frame = sys._getframe(1)
        for ins in dis.get_instructions(frame.f_code):
            if ins.offset == frame.f_lasti and ins.opname == "UNPACK_SEQUENCE":
                return iter([_Inert(f"{self._name}[{i}]") for i in range(ins.arg)])
        return iter(())


def install_stubs(packages: list[str]) -> None:
    """Replace ``packages`` (and their submodules) by inert stand-ins: every name a callable
    returning a stand-in, so a reference the CPU cannot run (FLA's or a file's own triton
    kernels) is skipped and the TileLang kernels after it still compile (the run's own check
    may then stop it).  A package already replaced stays as it is."""
    import importlib.abc
    import importlib.util
    import types

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in packages:
                return importlib.util.spec_from_loader(name, self, is_package=True)

        def create_module(self, spec):
            module = types.ModuleType(spec.name)
            module.__path__ = []
            module.__getattr__ = lambda attr: _Inert(f"{spec.name}").__getattr__(attr)  # no __file__:
            # inspect.getmodule (torch.profiler) skips it
            for attr, value in vars(kept.get(spec.name, types.SimpleNamespace())).items():
                setattr(module, attr, value)  # compile_only's triton.cdiv / next_power_of_2
            return module

        def exec_module(self, module):
            pass

    packages = [name for name in packages if name not in _stubbed]
    if not packages:
        return
    _stubbed.update(packages)
    kept = {name: sys.modules.pop(name) for name in packages if name in sys.modules}
    sys.meta_path.insert(0, Finder())


if importlib.util.find_spec("triton") is None:
    # triton's kernels (references, benchmarks' baselines) are inert; its two size helpers
    # (deepseek_nsa's bwd sizes blocks with them) are kept
    import types

    sys.modules["triton"] = types.SimpleNamespace(
        __name__="triton", cdiv=lambda a, b: -(-a // b), next_power_of_2=lambda n: 1 << max(0, (int(n) - 1).bit_length()))
    install_stubs(["triton"])

# -- tensors on the CPU ---------------------------------------------------------------------


def _cpu(d):
    if isinstance(d, (str, torch.device)) and str(d).startswith("cuda"):
        return torch.device("cpu")
    return d


def _on_cpu(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        return fn(*args, **kwargs)

    return wrapper


for _name in ("randn", "rand", "randint", "randperm", "zeros", "ones", "empty", "full", "arange",
              "tensor", "as_tensor", "linspace", "eye", "empty_strided", "zeros_like", "ones_like",
              "empty_like", "full_like", "rand_like", "randn_like", "randint_like", "normal",
              "tril_indices", "triu_indices"):
    setattr(torch, _name, _on_cpu(getattr(torch, _name)))
_to = torch.Tensor.to


def _tensor_to(self, *args, **kwargs):
    args = tuple(_cpu(a) for a in args)
    if "device" in kwargs:
        kwargs["device"] = _cpu(kwargs["device"])
    return _to(self, *args, **kwargs)


torch.Tensor.to = _tensor_to
_Generator = torch.Generator


class _AnyGenerator(type(_Generator)):  # torch's own generators (torch.default_generator) stay torch.Generators
    def __instancecheck__(cls, obj):
        return isinstance(obj, _Generator)


class _CpuGenerator(_Generator, metaclass=_AnyGenerator):  # torch.Generator(device="cuda") seeds a CPU one
    def __new__(cls, device="cpu"):
        return _Generator.__new__(cls, device=_cpu(device))

    def __init__(self, device="cpu"):
        pass


torch.Generator = _CpuGenerator
torch.Tensor.cuda = lambda self, *a, **k: self
_set_default_device = torch.set_default_device
torch.set_default_device = lambda d: _set_default_device(_cpu(d))
torch.compile = lambda fn=None, **k: fn if fn is not None else (lambda f: f)


class _Event:
    def __init__(self, *a, **k):
        pass

    def record(self, *a, **k):
        pass

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return 1.0


class _Stream:  # torch.cuda.Stream / torch.cuda.stream(s): nothing launches on any stream
    cuda_stream = 0

    def __init__(self, *a, **k):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def wait_stream(self, *a, **k):
        pass

    def wait_event(self, *a, **k):
        pass

    def record_event(self, *a, **k):
        return _Event()

    def synchronize(self):
        pass

    def query(self):
        return True


torch.cuda.synchronize = torch.cuda.init = lambda *a, **k: None
torch.cuda.Stream = _Stream
torch.cuda.stream = lambda s=None: _Stream()
torch.cuda.current_stream = torch.cuda.default_stream = lambda *a, **k: _Stream()
# an H100's (split heuristics read the SM count)
_H100 = type("DeviceProperties", (), dict(name="NVIDIA H100 80GB HBM3", major=9, minor=0, multi_processor_count=132,
                                          total_memory=80 * 2**30, L2_cache_size=50 * 2**20))()
torch.cuda.get_device_properties = lambda *a, **k: _H100
torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
# the CUDA driver's attributes of that H100 (tilecute.carver.arch.driver reads them through
# libcuda, absent here: TileLang's carver CUDA("cuda") target asks for them); others still raise
import tilecute.carver.arch.driver as _driver  # noqa: E402

_H100_ATTRIBUTES = {_driver.MAX_SHARED_MEMORY_PER_BLOCK: 48 * 1024, _driver.MAX_REGISTERS_PER_BLOCK: 65536,
                    _driver.MULTIPROCESSOR_COUNT: 132, _driver.L2_CACHE_SIZE: 50 * 2**20,
                    _driver.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: 228 * 1024,
                    _driver.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: 227 * 1024}
_device_attribute = _driver.get_device_attribute
_driver.get_device_attribute = lambda attr, device_id=0: (
    _H100_ATTRIBUTES[attr] if attr in _H100_ATTRIBUTES else _device_attribute(attr, device_id))
torch.cuda.current_device = lambda: 0
torch.cuda.set_device = lambda *a, **k: None
torch.cuda.device = lambda *a, **k: _Stream()  # `with torch.cuda.device(d):` selects nothing
torch.cuda.is_available = lambda: True  # requires_cuda marks: the programs target that H100
torch.cuda.device_count = lambda: 1
torch.cuda.Event = _Event
torch.cuda.profiler.start = torch.cuda.profiler.stop = lambda *a, **k: None
_profile = torch.profiler.profile


def _cpu_profile(*args, activities=None, **kwargs):  # CUDA activity: nothing launched to trace
    cpu = [a for a in activities or () if a != torch.profiler.ProfilerActivity.CUDA]
    return _profile(*args, activities=cpu or [torch.profiler.ProfilerActivity.CPU], **kwargs)


torch.profiler.profile = _cpu_profile
torch.cuda.empty_cache = lambda *a, **k: None
# free / total bytes of that H100, untouched (TileLang's tests size their inputs by it)
torch.cuda.mem_get_info = lambda *a, **k: (_H100.total_memory, _H100.total_memory)
# CUDA's generator: seeding is a no-op, its state the CPU's (torch.random.fork_rng(devices=[0]))
torch.cuda.manual_seed = torch.cuda.manual_seed_all = torch.cuda.set_rng_state = lambda *a, **k: None
torch.cuda.get_rng_state = lambda *a, **k: torch.get_rng_state()
torch.allclose = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
# TileLang's own check (tilelang.testing / utils.tensor.torch_assert_close, the profiler's
# assert_allclose) compares outputs no kernel wrote, as torch's would
import tilecute.runtime.profiling as _profiling  # noqa: E402
import tilecute.testing as _tl_testing  # noqa: E402
import tilecute.utils as _tl_utils  # noqa: E402
import tilecute.utils.tensor as _tl_tensor  # noqa: E402

for _m in (_profiling, _tl_testing, _tl_utils, _tl_tensor):
    _m.torch_assert_close = lambda *a, **k: True

# -- kernels: build the cubin, launch nothing ---------------------------------------------------

built = []


def _build_only(self):
    if self._func is None:
        self.ensure_cubin()
        built.append(self.name)
        print(f"COMPILE built {self.name}", file=sys.stderr, flush=True)
        self._func = lambda *args: None
    return self._func


_rk.Kernel._load = _build_only


def _no_bench(*args, **kwargs):
    return 1.0


tilecute.profiler.do_bench = _no_bench
_profiling.do_bench = _no_bench  # a Profiler's do_bench (its warm-up would run the reference on the CPU)


def _untuned(self, *args, **kwargs):
    """The call's own config, untuned; a tuned parameter the call leaves at a ``None``
    default or without one (``block_M=None``: TileLang's tuner always binds one) takes the
    first config's value, as no timing picks one here."""
    import inspect

    configs = self.config_list(args, kwargs)
    if self.eager is not None:  # an eager kernel's tuned parameters: given, or the tuner's
        call = kwargs if self._given_tunables(args, kwargs, configs) else {**configs[0], **kwargs}
        kernel = self._direct(args, call)
        if getattr(kernel, "config", None) is None:
            kernel.config = {k: call[k] for k in configs[0] if k in call}
        for name in ("latency", "ref_latency"):
            if getattr(kernel, name, None) is None:
                setattr(kernel, name, 1.0)
        return kernel
    sig = inspect.signature(self.factory)
    bound = sig.bind_partial(*args, **kwargs)
    fill = {k: v for k, v in configs[0].items() if k in sig.parameters and k not in bound.arguments
            and sig.parameters[k].default in (None, inspect.Parameter.empty)}
    kernel = self._direct(args, {**kwargs, **fill})
    if (self.supply_prog is None and (self.inputs or get_autotune_inputs()) is None
            and not self._given_tunables(args, kwargs, configs)):
        self._check_scalar_inputs(kernel)  # the tuner's check before timing (none untuned)
    if getattr(kernel, "config", None) is None:  # a tuned kernel's, which AutoTuner.run reads
        bound = sig.bind_partial(*args, **{**kwargs, **fill})
        bound.apply_defaults()
        kernel.config = {k: bound.arguments[k] for k in configs[0] if k in bound.arguments}
    for name in ("latency", "ref_latency"):  # what a tuned kernel carries (do_bench's 1 ms here)
        if getattr(kernel, name, None) is None:
            setattr(kernel, name, 1.0)
    return kernel


AutoTuner.compile = _untuned
