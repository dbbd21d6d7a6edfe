"""Compile, without running, one TileLang example's kernels on a machine with no GPU:
``CUTE_DSL_ARCH=sm_90a TILECUTE_ARCH=sm_90a python compile_example.py example_x.py [its args]``.

The example runs on the CPU with its own arguments, as ``run_example.py`` would run it on a GPU,
except that: tensors asked for on ``cuda`` are made on the CPU; a tilecute kernel's first call
builds its cubin (the arch from the environment) and records it, and no call launches anything
(outputs keep whatever their allocation held); ``do_bench`` times nothing; the device properties are an H100's; autotuned factories
compile the call's own (default) config instead of tuning; ``torch.compile`` is the identity;
and the reference checks pass (``torch.allclose`` / ``torch.testing.assert_close``), since no
kernel ran.  A check the example writes itself may still stop it after its kernels compiled.
The shims of run_example.py are on the path as there; without triton, a stand-in holding
only ``triton.cdiv`` and ``triton.next_power_of_2`` (all deepseek_nsa's bwd uses of it).

Prints one line: ``COMPILE OK kernels=N [names]``, ``COMPILE REFUSED kernels=N <error>``
(a tilecute error naming a form it does not take), ``COMPILE CRASH kernels=N <error> @ frames``
(an error raised inside tilecute or CuTe DSL that is not a refusal) or ``COMPILE STOPPED
kernels=N <error>`` (the example itself stopped, outside tilecute, after N cubins)."""

import functools
import importlib.util
import os
import runpy
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tlalias  # noqa: E402,F401
import torch  # noqa: E402

import tilecute  # noqa: E402
import tilecute.profiler  # noqa: E402
import tilecute.runtime.kernel as _rk  # noqa: E402
from tilecute.autotuner import AutoTuner  # noqa: E402

if not os.environ.get("TILECUTE_ARCH"):
    sys.exit("compile_example.py: set TILECUTE_ARCH (and CUTE_DSL_ARCH), e.g. sm_90a")
SHIMS = os.path.join(HERE, "shims")
if any(importlib.util.find_spec(name) is None for name in ("flash_attn", "fla")):
    sys.path.append(SHIMS)
if importlib.util.find_spec("triton") is None:  # deepseek_nsa's bwd sizes blocks with triton's helpers
    import types

    sys.modules["triton"] = types.SimpleNamespace(
        __name__="triton", cdiv=lambda a, b: -(-a // b), next_power_of_2=lambda n: 1 << max(0, (int(n) - 1).bit_length()))

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


torch.cuda.synchronize = lambda *a, **k: None
# an H100's (split heuristics read the SM count)
_H100 = type("DeviceProperties", (), dict(name="NVIDIA H100 80GB HBM3", major=9, minor=0, multi_processor_count=132,
                                          total_memory=80 * 2**30, L2_cache_size=50 * 2**20))()
torch.cuda.get_device_properties = lambda *a, **k: _H100
torch.cuda.get_device_capability = lambda *a, **k: (9, 0)
torch.cuda.current_device = lambda: 0
torch.cuda.Event = _Event
torch.cuda.profiler.start = torch.cuda.profiler.stop = lambda *a, **k: None
torch.cuda.empty_cache = lambda *a, **k: None
torch.allclose = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None

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
AutoTuner.compile = lambda self, *args, **kwargs: self._direct(args, kwargs)

path = sys.argv[1]
sys.argv = [path, *sys.argv[2:]]  # the example's own arguments (smaller sizes: its reference runs on the CPU)
sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
t0 = time.time()
try:
    runpy.run_path(path, run_name="__main__")
    status = "COMPILE OK"
    msg = ""
except SystemExit as e:
    status, msg = ("COMPILE OK", "") if not e.code else ("COMPILE STOPPED", f"exit({e.code})")
except BaseException as e:  # noqa: BLE001 -- every failure is a row of the report
    tb = traceback.extract_tb(e.__traceback__)
    inside = any(os.sep + "backend" + os.sep in f.filename or "cutlass" in f.filename for f in tb[-3:])
    if inside and isinstance(e, (ValueError, NotImplementedError, TypeError)):
        status = "COMPILE REFUSED"  # tilecute's errors are ValueErrors naming the form
    elif inside:
        status = "COMPILE CRASH"
    else:
        status = "COMPILE STOPPED"
    where = " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}" for f in reversed(tb[-4:]))
    msg = f"{type(e).__name__}: {str(e)[:600]}".replace("\n", " | ") + f" @ {where}"
print(f"{status} kernels={len(built)} [{','.join(built)}] {time.time() - t0:.0f}s {msg}".rstrip())
