"""``tilecute.autotune``: TileLang's ``@autotune`` stacked on ``@tilecute.jit`` (a kernel
factory, as below, or an eager kernel: then a call runs the winner on its tensors), and
TileLang's ``AutoTuner.from_kernel(...).set_compile_args(...).run()`` and
``set_autotune_inputs``.

    @tilecute.autotune(configs=[{"block_M": 128, "num_stages": 3}, ...], warmup=25, rep=100)
    @tilecute.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=2, threads=256):
        ...                                   # returns a @T.prim_func
    kernel = matmul(4096, 4096, 4096)         # tuned once per argument set; the fastest
    matmul.result                             # every config with its time or its failure

- **Compiling** every config runs on an executor (``executor=``, any
  ``concurrent.futures.Executor``; by default a thread pool sized to the cores).  Each
  task (:func:`_build_config`) forks the config's build into a child process in its own
  process group (:mod:`tilecute.buildproc`: the factory, the frontend to the launcher's
  g++), then compiles its cubin in a cubin worker (``runtime/cubin_worker``); the thread
  waits without the interpreter lock.  So the default is a process per core in effect,
  without a ``ProcessPoolExecutor``'s needs: the factory is not pickled (one defined in
  ``__main__`` under these decorators cannot be: the module's name is the tuner's), and a
  build can be killed (killing a pool's worker breaks the pool).  A user's process pool,
  Ray or Dask executor gets the task pickled (the factory must be importable), and it
  forks and kills its builds wherever it runs.  ``timeout`` (seconds; None or <= 0: no
  limit, TileLang's meaning of ``timeout > 0``) counts from the start of each config's
  build: past it the build's process group, or its cubin worker, is killed, what it left
  (build and staging folders, temporary files) is removed, no lock stays held, and the
  config is reported "compile took longer than timeout=... s (killed)".  A config that
  fails to build is recorded and skipped too.
- **Profiling** runs on the GPU, one config at a time: inputs made per config
  (``supply_type``; once with ``cache_input_tensors``; or ``set_autotune_inputs``'),
  checked against ``ref_prog`` (``atol``/``rtol``) unless ``skip_check``, timed with ``tilecute.profiler.do_bench(warmup, rep)``.  A wrong config
  is reported and never chosen.  The configs within 5% of the best are timed again in
  three rounds of rotated order and keep the median (tilecute's: a single sample each
  leaves a close pick to the GPU's clock drift).
- **Results persist** under ``<cache root>/autotune/<key>.json``, keyed by everything that
  changes the answer: each config's canonical IR, the arguments, ``out_idx``, the
  options, the arch and the GPU's name, and the tool versions.  A later process with the
  same key compiles the stored winner (a cache hit) and profiles nothing.
  ``tilecute tune ls | show KEY | clear`` manage them.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import inspect
import json
import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from ..utils import TensorSupplyType


# ---- set_autotune_inputs: real inputs for the tuning runs (TileLang's capture) -------------
_capture = threading.local()


# configs whose first time is within this fraction of the best are timed again, in
# alternating rounds (:meth:`AutoTuner.retime_finalists`)
FINALIST_MARGIN = 0.05
FINALISTS = 4
FINALIST_ROUNDS = 3


def _capture_stack() -> list:
    if not hasattr(_capture, "stack"):
        _capture.stack = []
    return _capture.stack


class AutotuneInputsCapture:
    """The context ``set_autotune_inputs`` returns: tuning started inside it checks and
    times every config on these inputs (in the kernel's argument order, scalars included)
    instead of generated ones."""

    __slots__ = ("tensors",)

    def __init__(self, tensors: list):
        self.tensors = tensors

    def __enter__(self) -> None:
        _capture_stack().append(self)

    def __exit__(self, *exc) -> None:
        _capture_stack().pop()


def set_autotune_inputs(*args) -> AutotuneInputsCapture:
    """``with set_autotune_inputs(a, b, n):`` or ``set_autotune_inputs([a, b, n])``."""
    tensors = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)
    return AutotuneInputsCapture(tensors)


def get_autotune_inputs() -> Optional[list]:
    """The inputs of the innermost ``set_autotune_inputs`` block of this thread, or None."""
    stack = _capture_stack()
    return stack[-1].tensors if stack else None


@dataclass
class ConfigResult:
    config: dict
    time_ms: Optional[float] = None
    error: Optional[str] = None
    kernel: Any = field(default=None, repr=False)
    compile_s: Optional[float] = None  # seconds its build took (or ran, until killed)
    entry_s: Optional[float] = None  # of which building its cache entry (front end to g++)
    cubin_s: Optional[float] = None  # and compiling its cubin (in a cubin worker)


@dataclass
class TuneResult:
    """Every config with its time (ms) or why it was skipped; ``best`` the winner's."""

    key: str
    configs: list
    best: Optional[dict]
    from_store: bool = False
    ref_latency: Optional[float] = None

    def table(self) -> str:
        rows = [f"{json.dumps(r.config, sort_keys=True)}: "
                + (f"{r.time_ms:.4f} ms" if r.time_ms is not None else f"skipped ({r.error})")
                for r in self.configs]
        return "\n".join(rows)


@dataclass
class AutotuneResult:
    """What TileLang's ``AutoTuner.run()`` returns: the winner's time, config, the
    reference program's time, the kernel's source, its IR and the kernel."""

    latency: Optional[float] = None
    config: Optional[dict] = None
    ref_latency: Optional[float] = None
    libcode: Optional[str] = None
    func: Any = None
    kernel: Any = None

    def save_to_disk(self, path, verbose: bool = False) -> None:
        """TileLang's ``result.save_to_disk(path)``: the config, the times and the kernel's
        entry (its folder, which loads with no compiler) under ``path``, written into a
        staging folder beside it and renamed into place (a complete result is never
        overwritten, as TileLang's)."""
        import shutil
        import uuid

        path = Path(path)
        if (path / "best_config.json").exists() and (path / "kernel" / "manifest.json").exists():
            return
        if self.kernel is None or not hasattr(self.kernel, "path"):
            raise ValueError("AutotuneResult.save_to_disk: the result has no compiled kernel")
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = path.parent / f".{path.name}.staging-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            staging.mkdir(mode=0o700)
            shutil.copytree(self.kernel.path, staging / "kernel")
            (staging / "best_config.json").write_text(json.dumps(self.config, sort_keys=True))
            (staging / "latency.json").write_text(json.dumps(
                {"latency": self.latency, "ref_latency": self.ref_latency,
                 # out_idx as given: the order the call returns the outputs in
                 "out_idx": getattr(self.kernel, "out_order", getattr(self.kernel, "out_idx", None))}))
            os.rename(staging, path)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
            if not (path / "best_config.json").exists():  # (not another process's result)
                raise
        if verbose:
            print(f"tilecute: saved the autotune result to {path}", file=sys.stderr)

    @classmethod
    def load_from_disk(cls, path, compile_args=None) -> Optional["AutotuneResult"]:
        """TileLang's ``AutotuneResult.load_from_disk(path, compile_args)``: the result
        :meth:`save_to_disk` wrote, its kernel loaded from the saved entry (``out_idx``
        from ``compile_args`` where it gives one, else the saved one); None where ``path``
        does not exist."""
        from ..runtime.kernel import load

        path = Path(path)
        if not path.exists():
            return None
        config = json.loads((path / "best_config.json").read_text())
        times = json.loads((path / "latency.json").read_text())
        out_idx = getattr(compile_args, "out_idx", None)
        kernel = load(path / "kernel", times.get("out_idx") if out_idx is None else out_idx)
        return cls(latency=times.get("latency"), config=config,
                   ref_latency=times.get("ref_latency"), libcode=kernel.get_kernel_source(),
                   kernel=kernel)


def store_dir() -> Path:
    from ..cache import cache_root

    return Path(cache_root()) / "autotune"


def _split_config(config: dict, options: dict, function: str) -> tuple[dict, dict]:
    """A config's factory parameters and its compile options: TileLang's per-config
    ``"pass_configs"`` entry is merged over the jit's options (the config's keys win)."""
    config = dict(config)
    per_config = config.pop("pass_configs", None)
    if not per_config:
        return config, options
    from ..options import check_options, from_pass_configs, merge_options

    return config, check_options(merge_options(options, from_pass_configs(per_config, function)))


@dataclass
class _Job:
    """One config's build, as the executor gets it (picklable when the factory is
    importable: a process pool or a cluster's executor)."""

    factory: Any
    eager: Any
    args: tuple
    kwargs: dict
    config: dict
    out_idx: Any
    arch: str
    options: dict
    timeout: Optional[float]
    group: Optional[str] = None  # its tuning run's, for buildproc.kill


def _build_entry(job: _Job) -> str:
    """In the build process: the config's kernel compiled into the cache (frontend,
    passes, code, the launcher's g++), its entry's folder returned."""
    if job.eager is not None:
        import copy

        eager = copy.copy(job.eager)  # the arch resolved by the tuner: no GPU query here
        eager.target, eager._lock, eager._kernels = job.arch, threading.Lock(), {}
        return str(eager.compile(*job.args, **{**job.kwargs, **job.config}).path)
    from ..api import compile as compile_func

    config, options = _split_config(job.config, job.options,
                                    getattr(job.factory, "__name__", "kernel"))
    kernel = compile_func(job.factory(*job.args, **{**job.kwargs, **config}),
                          out_idx=job.out_idx, target=job.arch, options=options)
    return str(kernel.path)


def _build_config(job: _Job) -> dict:
    """Build one config within its ``timeout`` (from now); runs on the executor (a
    module-level function: a process pool can pickle it).  The entry is built in a child
    process (:mod:`tilecute.buildproc`) that a timeout kills with its process group, then
    its cubin in a cubin worker that the rest of the timeout bounds (killed too).  Returns
    ``{"path", "seconds", "entry_s", "cubin_s"}`` or ``{"error", "seconds"}``."""
    from .. import buildproc
    from ..runtime import cubin_worker
    from ..runtime.kernel import load

    from ..cache import tool_versions

    start = time.monotonic()
    limit = job.timeout if job.timeout is not None and job.timeout > 0 else None
    try:
        tool_versions()  # computed once per process, here: the build processes inherit it
        path = buildproc.run(_build_entry, (job,), limit, job.group)
        built = time.monotonic()
        with cubin_worker.deadline(None if limit is None else limit - (built - start)):
            load(path, job.out_idx).ensure_cubin()
        end = time.monotonic()
        return {"path": path, "seconds": end - start, "entry_s": built - start, "cubin_s": end - built}
    except buildproc.BuildTimeout as e:
        error = (f"compile took longer than timeout={job.timeout} s "
                 + ("(killed)" if e.killed else "(not killed: it builds on in a thread)"))
    except cubin_worker.CubinTimeout:
        error = f"compile took longer than timeout={job.timeout} s (killed)"
    except buildproc.ChildError as e:
        error = f"compile failed: {e.type_name}: {e.message.splitlines()[0][:300] if e.message else ''}"
    except Exception as e:
        error = f"compile failed: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
    return {"error": error, "seconds": time.monotonic() - start}


def _describe(value) -> str:
    """A value as the tuning key sees it: a tensor by its shape, strides and dtype (never
    its data), containers element by element."""
    if hasattr(value, "shape") and hasattr(value, "dtype") and hasattr(value, "stride"):
        return f"tensor{tuple(value.shape)}/{tuple(value.stride())}:{value.dtype}"
    if isinstance(value, (list, tuple)):
        return type(value).__name__ + "(" + ", ".join(_describe(v) for v in value) + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in sorted(value.items(), key=repr)) + "}"
    return repr(value)


_EXECUTION_BACKENDS = (None, "auto", "tvm_ffi", "cutedsl", "cython", "nvrtc")  # (api._BACKENDS)


class AutoTuner:
    """Tunes a ``@tilecute.jit`` kernel over configs: a kernel factory (the call returns
    the fastest kernel) or an eager kernel (the call runs the fastest kernel on the call's
    tensors and returns its outputs; ``.compile(...)`` returns the kernel).  Also
    TileLang's builder form: ``AutoTuner.from_kernel(kernel=factory, configs=...)
    .set_compile_args(out_idx=...).set_profile_args(...).run(warmup, rep)``."""

    def __init__(self, jitted, configs, warmup=25, rep=100, timeout=None, ref_prog=None,
                 skip_check=False, atol=1e-2, rtol=1e-2, supply_type=TensorSupplyType.Auto,
                 executor=None, cache_results=True, max_mismatched_ratio=0.01, shapes=None,
                 early_stop=False, early_stop_factor=2.0, supply_prog=None,
                 manual_check_prog=None, cache_input_tensors=False, do_not_specialize=None,
                 backend="event"):
        if early_stop_factor < 1.0:
            raise ValueError(f"tilecute.autotune: early_stop_factor must be >= 1.0, got "
                             f"{early_stop_factor}")
        self.configs, self.warmup, self.rep, self.timeout = configs, warmup, rep, timeout
        self.ref_prog, self.skip_check, self.atol, self.rtol = ref_prog, skip_check, atol, rtol
        self.supply_type, self.executor, self.cache_results = supply_type, executor, cache_results
        self.max_mismatched_ratio = max_mismatched_ratio
        self.shapes = dict(shapes or {})  # sizes of symbolic dims for the generated inputs
        self.early_stop, self.early_stop_factor = early_stop, early_stop_factor
        self.supply_prog, self.manual_check_prog = supply_prog, manual_check_prog
        self.cache_input_tensors = cache_input_tensors
        self.do_not_specialize = tuple(do_not_specialize or ())
        self.backend = backend
        self.inputs: Optional[list] = None  # set_autotune_inputs' tensors, taken at the call
        self.result: Optional[TuneResult] = None
        self._tuned: dict = {}
        if jitted is not None:
            self._bind(jitted)

    def _bind(self, jitted) -> None:
        from ..language.eager import EagerKernel

        if isinstance(jitted, EagerKernel):
            self.eager, self.factory = jitted, jitted.fn
            self.out_idx, self.target, self.options = None, jitted.target, jitted.options
            self.release_gil = jitted.release_gil
        else:
            factory = getattr(jitted, "__wrapped__", None)
            spec = getattr(jitted, "__tilecute_jit__", None)
            if factory is None or spec is None:
                raise TypeError("tilecute.autotune stacks on @tilecute.jit(...) over a kernel "
                                "factory (a function returning a @T.prim_func) or an eager "
                                "kernel: put @tilecute.autotune above @tilecute.jit")
            self.eager, self.factory = None, factory
            self.out_idx, self.target, self.options, self.release_gil = spec
        self.jitted = jitted
        self.__name__ = getattr(self.factory, "__name__", "tuned")
        self.__doc__ = self.factory.__doc__
        for d in self.do_not_specialize:
            if d not in inspect.signature(self.factory).parameters:
                raise TypeError(f"{self.__name__}: do_not_specialize names {d!r}, which is not "
                                "a parameter")

    # ---- TileLang's builder form ----------------------------------------------------------
    @classmethod
    def from_kernel(cls, kernel: Callable, configs) -> "AutoTuner":
        """``AutoTuner.from_kernel(kernel=factory, configs=[...])``: ``factory(**config)``
        returns a ``@T.prim_func``; compile and profile settings follow."""
        from ..api import jit

        return cls(jit(kernel), configs)

    def set_compile_args(self, out_idx=None, target=None, execution_backend=None,
                         target_host=None, verbose=None, pass_configs=None) -> "AutoTuner":
        """``out_idx``, ``target`` and ``pass_configs`` as ``tilecute.jit`` takes them.
        ``execution_backend`` may be "auto", "tvm_ffi", "cutedsl", "cython" or "nvrtc"
        (tilecute's one launcher serves TileLang's CUDA backends); ``target_host`` is
        refused; ``verbose`` changes nothing."""
        from ..api import jit

        if execution_backend not in _EXECUTION_BACKENDS:
            raise ValueError(f"{self.__name__}: set_compile_args(execution_backend="
                             f"{execution_backend!r}): tilecute launches through its own TVM "
                             "FFI launcher (execution_backend 'auto', 'tvm_ffi', 'cutedsl', "
                             "'cython' or 'nvrtc')")
        if target_host is not None:
            raise ValueError(f"{self.__name__}: set_compile_args(target_host={target_host!r}) "
                             "is not supported: the host side is tilecute's C++ launcher")
        if self.eager is not None:
            raise TypeError(f"{self.__name__}: set_compile_args applies to a kernel factory; "
                            "an eager kernel's settings are its @tilecute.jit's")
        self._bind(jit(out_idx=out_idx, target=target, pass_configs=pass_configs)(self.factory))
        return self

    def set_profile_args(self, warmup=25, rep=100, timeout=30, supply_type=TensorSupplyType.Auto,
                         ref_prog=None, supply_prog=None, rtol=1e-2, atol=1e-2,
                         max_mismatched_ratio=0.01, skip_check=False, manual_check_prog=None,
                         cache_input_tensors=False, backend="event") -> "AutoTuner":
        """TileLang's profile settings (the meanings of ``tilecute.autotune``'s arguments;
        ``timeout`` bounds the compiles).  Inside ``set_autotune_inputs`` those inputs are
        taken now."""
        self.warmup, self.rep, self.timeout, self.supply_type = warmup, rep, timeout, supply_type
        self.ref_prog, self.supply_prog, self.rtol, self.atol = ref_prog, supply_prog, rtol, atol
        self.max_mismatched_ratio, self.skip_check = max_mismatched_ratio, skip_check
        self.manual_check_prog, self.cache_input_tensors = manual_check_prog, cache_input_tensors
        self.backend = backend
        self.inputs = get_autotune_inputs()
        return self

    def run(self, warmup=None, rep=None, timeout=None, use_pipeline=False,
            enable_grouped_compile=False, group_compile_size=2, benchmark_devices=None,
            benchmark_multi_gpu=False, early_stop=None, early_stop_factor=None) -> AutotuneResult:
        """Tune (the factory called with each config alone) and return the winner as an
        :class:`AutotuneResult`.  ``use_pipeline`` / ``enable_grouped_compile`` change
        only how TileLang schedules its work (tilecute compiles every config in parallel,
        then times them one by one); ``benchmark_multi_gpu`` is refused."""
        if benchmark_multi_gpu or benchmark_devices:
            raise ValueError(f"{self.__name__}: run(benchmark_multi_gpu=..., benchmark_devices"
                             "=...) is not supported: tilecute times configs on one GPU")
        self.warmup = self.warmup if warmup is None else warmup
        self.rep = self.rep if rep is None else rep
        self.timeout = self.timeout if timeout is None else timeout
        if early_stop is not None:
            self.early_stop = early_stop
        if early_stop_factor is not None:
            if early_stop_factor < 1.0:
                raise ValueError(f"early_stop_factor must be >= 1.0, got {early_stop_factor}")
            self.early_stop_factor = early_stop_factor
        kernel = self.compile()
        return AutotuneResult(getattr(kernel, "latency", None), getattr(kernel, "config", None),
                              getattr(kernel, "ref_latency", None), kernel.get_kernel_source(),
                              self._ir((), {}, kernel.config or {}), kernel)

    # ---- configs and keys -----------------------------------------------------------
    def config_list(self, args, kwargs) -> list[dict]:
        configs = self.configs(*args, **kwargs) if callable(self.configs) else self.configs
        configs = [dict(c) for c in (configs or [])]
        if not configs:
            raise ValueError(f"{self.__name__}: autotune needs at least one config")
        params = inspect.signature(self.factory).parameters
        for c in configs:
            if "pass_configs" in c and self.eager is not None:
                raise ValueError(f"{self.__name__}: config {c} has pass_configs; per-config "
                                 "pass configs are supported for @tilecute.jit factories only "
                                 "(give an eager kernel's pass_configs to @tilecute.jit)")
            unused = [k for k in c if k not in params and k != "pass_configs"]
            if unused:
                raise ValueError(f"{self.__name__}: config {c} names {', '.join(unused)}, not "
                                 f"parameters of {self.__name__}")
        return configs

    def _ir(self, args, kwargs, config):
        if self.eager is not None:
            return self.eager.get_tir(*args, **{**kwargs, **config})
        return self.factory(*args, **{**kwargs, **_split_config(config, {}, self.__name__)[0]})

    def _specialized(self, args, kwargs) -> tuple:
        """The call without its ``do_not_specialize`` arguments (what keys the tuning)."""
        if not self.do_not_specialize:
            return args, kwargs
        bound = inspect.signature(self.factory).bind_partial(*args, **kwargs)
        return (), {k: v for k, v in bound.arguments.items() if k not in self.do_not_specialize}

    def key(self, args, kwargs, configs) -> str:
        """sha256 of what changes the answer (see the module's docstring)."""
        from ..api import _arch
        from ..cache import tool_versions
        from ..ir.serialize import canonical_json

        irs = []
        for c in configs:
            try:
                irs.append(hashlib.sha256(canonical_json(self._ir(args, kwargs, c)).encode()).hexdigest())
            except Exception as e:  # a config the factory refuses is part of the key too
                irs.append(f"error:{type(e).__name__}:{e}")
        arch = _arch(self.target, self.__name__)
        args, kwargs = self._specialized(args, kwargs)
        doc = {"function": f"{self.factory.__module__}.{self.factory.__qualname__}",
               "args": _describe(tuple(args)), "kwargs": _describe(dict(kwargs)),
               "configs": [json.dumps(c, sort_keys=True, default=repr) for c in configs],
               "ir": irs, "out_idx": repr(self.out_idx), "options": sorted(self.options.items()),
               "arch": arch, "device": _device_name(), "versions": tool_versions()}
        return hashlib.sha256(json.dumps(doc, sort_keys=True, default=repr).encode()).hexdigest()

    # ---- compiling --------------------------------------------------------------------
    def compile_all(self, *args, **kwargs) -> list[ConfigResult]:
        """Build every config (in parallel on the executor), each within ``timeout``
        seconds of its own build's start; no profiling."""
        from ..api import _arch
        from ..runtime.kernel import load

        configs = self.config_list(args, kwargs)
        arch = _arch(self.target, self.__name__)  # here: a forked build must not ask the GPU
        own = self.executor is None
        workers = os.cpu_count() or 2
        executor = self.executor or cf.ThreadPoolExecutor(max_workers=workers,
                                                          thread_name_prefix="tilecute-build")
        results = [ConfigResult(c) for c in configs]
        if own:  # a warm cubin worker for each build that runs at once (the import of
            # CUTLASS overlaps the builds' front ends instead of following them)
            from ..runtime import cubin_worker

            cubin_worker.prestart(min(len(configs), workers))
        group = f"{self.__name__}-{os.urandom(8).hex()}"  # this run's builds, for buildproc.kill
        try:
            futures = {executor.submit(_build_config, _Job(
                self.factory if self.eager is None else None, self.eager, tuple(args),
                dict(kwargs), c, self.out_idx, arch, self.options, self.timeout, group)): r
                for c, r in zip(configs, results)}
            for done, fut in enumerate(cf.as_completed(futures), 1):
                r = futures[fut]
                try:
                    got = fut.result()
                    r.compile_s = got["seconds"]
                    r.entry_s, r.cubin_s = got.get("entry_s"), got.get("cubin_s")
                    if "error" in got:
                        r.error = got["error"]
                    elif self.eager is not None:  # a cache hit now: the eager kernel's own
                        r.kernel = self.eager.compile(*args, **{**kwargs, **r.config})
                    else:
                        r.kernel = load(got["path"], self.out_idx)
                except Exception as e:  # the executor's (a task it could not run or pickle)
                    r.error = f"compile failed: {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
                _progress(f"{self.__name__}: compiled {done}/{len(configs)}")
        except BaseException:  # interrupted (Ctrl-C): no build of this run goes on
            from .. import buildproc

            if own:
                executor.shutdown(wait=False, cancel_futures=True)
            buildproc.kill(group)
            raise
        finally:
            if own:
                executor.shutdown(wait=False, cancel_futures=True)
        return results

    # ---- profiling ----------------------------------------------------------------------
    def _check_scalar_inputs(self, kernel) -> None:
        """TileLang's refusal before timing: generated inputs are tensors only, so a kernel
        with a scalar input parameter needs ``set_autotune_inputs`` (or ``supply_prog``);
        without this check every config failed on its profiler's error, whose advice
        (``do_bench(input_tensors=...)``) does not reach the tuner."""
        from ..profiler import Profiler
        from ..runtime.abi import TensorArg

        for arg in Profiler(kernel, self.supply_type, self.shapes)._get_params():
            if not isinstance(arg, TensorArg):
                raise ValueError(f"Auto-tuning kernel '{kernel.name}' does not support "
                                 f"auto-generated scalar inputs. Found scalar input parameter "
                                 f"'{arg.name}'. Please provide concrete inputs with `with "
                                 "set_autotune_inputs(...)` (or supply_prog=)")

    def _make_inputs(self, kernel) -> list:
        from ..profiler import Profiler

        if self.inputs is not None:
            return list(self.inputs)
        profiler = Profiler(kernel, self.supply_type, self.shapes)
        if self.supply_prog is not None:
            return list(self.supply_prog(profiler._get_params()))
        return profiler._inputs()

    def profile(self, results: list[ConfigResult]) -> None:
        """Check (unless ``skip_check``) and time each compiled config on the GPU; with
        ``early_stop`` a config whose first estimate exceeds ``early_stop_factor`` times
        the best so far keeps that estimate, unmeasured further (TileLang's meaning)."""
        from ..profiler import Profiler, _cuda, do_bench

        ok = [r for r in results if r.kernel is not None]
        if ok and self.inputs is None and self.supply_prog is None:
            self._check_scalar_inputs(ok[0].kernel)
        _cuda()  # a clear error without a GPU
        if not ok:
            return
        shared = None
        best = None
        for i, r in enumerate(ok):
            try:
                if shared is not None:
                    inputs = shared
                else:
                    inputs = self._make_inputs(r.kernel)
                    if self.cache_input_tensors or self.inputs is not None:
                        shared = inputs
                if self.ref_prog is not None and not self.skip_check:
                    if self.manual_check_prog is not None:
                        Profiler(r.kernel, self.supply_type, self.shapes).manual_assert_close(
                            self.ref_prog, inputs, self.manual_check_prog)
                    else:
                        got = r.kernel(*inputs)
                        want = self.ref_prog(*[_clone(x) for x in inputs])
                        got = list(got) if isinstance(got, (tuple, list)) else [got]
                        want = list(want) if isinstance(want, (tuple, list)) else [want]
                        _check(got, want, self.atol, self.rtol, self.max_mismatched_ratio)
                baseline = best * self.early_stop_factor if self.early_stop and best else None
                r.time_ms = do_bench(lambda k=r.kernel: k(*inputs), self.warmup, self.rep,
                                     backend=self.backend, early_stop_baseline=baseline)
                best = r.time_ms if best is None else min(best, r.time_ms)
            except Exception as e:
                r.error = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
            _progress(f"{self.__name__}: timed {i + 1}/{len(ok)}, best {best:.4f} ms"
                      if best is not None else f"{self.__name__}: timed {i + 1}/{len(ok)}")
        if best is not None:
            inputs = shared if shared is not None else None
            self.retime_finalists(ok, best, inputs, do_bench)
        if self.ref_prog is not None and best is not None:
            inputs = shared if shared is not None else self._make_inputs(ok[0].kernel)
            self.ref_latency = do_bench(lambda: self.ref_prog(*inputs), self.warmup, self.rep,
                                        backend=self.backend)

    def retime_finalists(self, ok: list, best: float, inputs, do_bench) -> None:
        """The configs within :data:`FINALIST_MARGIN` of the best first time (at most
        :data:`FINALISTS`) timed again in :data:`FINALIST_ROUNDS` rounds, each in a rotated
        order, and given the median of their rounds: one sample per config leaves the pick
        to the GPU's clock drift between configs (measured on an H100: a GEMM's time from
        one call of ``do_bench`` to the next varies by up to 5%), the rounds give every
        finalist the same conditions."""
        close = sorted((r for r in ok if r.time_ms is not None and r.error is None
                        and r.time_ms <= best * (1 + FINALIST_MARGIN)), key=lambda r: r.time_ms)
        close = close[:FINALISTS]
        if len(close) < 2:
            return
        samples = {id(r): [] for r in close}
        args = {id(r): inputs if inputs is not None else self._make_inputs(r.kernel) for r in close}
        for rnd in range(FINALIST_ROUNDS):
            for r in close[rnd % len(close):] + close[:rnd % len(close)]:
                samples[id(r)].append(do_bench(lambda k=r.kernel, a=args[id(r)]: k(*a),
                                               self.warmup, self.rep, backend=self.backend))
        for r in close:
            r.time_ms = statistics.median(samples[id(r)])
        _progress(f"{self.__name__}: {len(close)} finalists timed again in {FINALIST_ROUNDS} "
                  f"rounds, best {min(r.time_ms for r in close):.4f} ms")

    # ---- the call -------------------------------------------------------------------------
    def _given_tunables(self, args, kwargs, configs) -> bool:
        """TileLang skips tuning when the call itself gives a tuned parameter (by keyword
        or position): it compiles what the call says."""
        params = list(inspect.signature(self.factory).parameters)
        return any(k in kwargs or (k in params and params.index(k) < len(args))
                   for k in configs[0])

    def _direct(self, args, kwargs):
        if self.eager is not None:
            return self.eager.compile(*args, **kwargs)
        return self.jitted(*args, **kwargs)

    def compile(self, *args, **kwargs):
        """The tuned kernel for this call (TileLang's ``tuned.compile(...)``): tuned once
        per argument set, or the stored winner; the kernel carries ``latency``,
        ``config`` and ``ref_latency`` of the tuning.  A call that gives a tuned parameter
        itself compiles that, untuned."""
        configs = self.config_list(args, kwargs)
        if self._given_tunables(args, kwargs, configs):
            return self._direct(args, kwargs)
        if self.inputs is None:
            self.inputs = get_autotune_inputs()
        s_args, s_kwargs = self._specialized(args, kwargs)
        memo = (_describe(tuple(s_args)), _describe(dict(s_kwargs)))
        if memo in self._tuned:
            return self._tuned[memo]
        key = self.key(args, kwargs, configs)
        stored = _load(key) if self.cache_results else None
        self.ref_latency = None
        if stored is not None and stored.get("best") is not None:
            best = stored["best"]
            params, options = _split_config(best, self.options, self.__name__)
            if options is self.options:
                kernel = self._direct(args, {**kwargs, **params})
            else:  # the winner's own pass_configs
                from ..api import compile as compile_func

                kernel = compile_func(self.factory(*args, **{**kwargs, **params}),
                                      out_idx=self.out_idx, target=self.target, options=options)
            self.result = TuneResult(key, [ConfigResult(c["config"], c.get("time_ms"), c.get("error"))
                                           for c in stored["configs"]], best, from_store=True,
                                     ref_latency=stored.get("ref_latency"))
            latency = min((c.time_ms for c in self.result.configs
                           if c.config == best and c.time_ms is not None), default=None)
        else:
            results = self.compile_all(*args, **kwargs)
            self.profile(results)
            timed = [r for r in results if r.time_ms is not None]
            if not timed:
                reasons = "; ".join(f"{json.dumps(r.config, sort_keys=True)}: {r.error}"
                                    for r in results)
                raise RuntimeError(f"{self.__name__}: no config compiled and checked: {reasons}")
            winner = min(timed, key=lambda r: r.time_ms)
            kernel, best, latency = winner.kernel, winner.config, winner.time_ms
            self.result = TuneResult(key, results, best, ref_latency=self.ref_latency)
            if self.cache_results:
                _store(key, self.__name__, args, kwargs, results, best, self.ref_latency)
        kernel.latency, kernel.config, kernel.ref_latency = latency, best, self.result.ref_latency
        if self.release_gil is not None:  # the winner may come from a load or a compile
            kernel.release_gil = self.release_gil
        self._tuned[memo] = kernel
        return kernel

    def __call__(self, *args, **kwargs):
        """A factory: the tuned kernel.  An eager kernel: the tuned kernel run on the
        call's tensors, its outputs returned (as TileLang's eager autotune).  TileLang's
        keyword ``__return_kernel=True`` returns the tuned kernel itself (what
        :meth:`compile` returns), for an eager kernel too."""
        return_kernel = kwargs.pop("__return_kernel", False)
        kernel = self.compile(*args, **kwargs)
        if self.eager is None or return_kernel:
            return kernel
        return self.eager(*args, **{**kwargs, **(getattr(kernel, "config", None) or {})})


def autotune(func=None, *, configs=None, warmup: float = 25, rep: float = 100,
             timeout: Optional[float] = 100, ref_prog: Optional[Callable] = None,
             skip_check: bool = False, atol: float = 1e-2, rtol: float = 1e-2,
             supply_type: TensorSupplyType = TensorSupplyType.Auto,
             supply_prog: Optional[Callable] = None, manual_check_prog: Optional[Callable] = None,
             cache_input_tensors: bool = False, do_not_specialize=None, early_stop: bool = False,
             early_stop_factor: float = 2.0, executor: Optional[cf.Executor] = None,
             cache_results: bool = True, max_mismatched_ratio: float = 0.01,
             shapes: Optional[dict] = None, **unknown):
    """Decorate a ``@tilecute.jit`` kernel (a factory or an eager kernel): calling it tunes
    over ``configs`` (dicts of its keyword arguments, or a function of the call's
    arguments returning them) and returns the fastest kernel, or for an eager kernel its
    outputs (see the module docstring).  TileLang's arguments: ``supply_prog(params)``
    makes the inputs; ``manual_check_prog(outputs, reference_outputs)`` checks instead of
    ``atol``/``rtol``; ``cache_input_tensors`` makes the inputs once for every config
    (else each config gets fresh ones); ``do_not_specialize`` names arguments whose values
    do not re-tune; ``early_stop`` stops timing a config whose estimate exceeds
    ``early_stop_factor`` times the best so far.  ``timeout`` defaults to TileLang's 100 s
    a config (None or <= 0: no limit).  ``shapes`` (tilecute's) sizes symbolic dims of the
    generated inputs."""
    if unknown:
        raise TypeError(f"tilecute.autotune: unsupported argument(s) {', '.join(unknown)}")
    if callable(func) or func is not None:
        raise TypeError("tilecute.autotune takes keyword arguments (configs=...): "
                        "@tilecute.autotune(configs=[...]) above @tilecute.jit")
    if early_stop_factor < 1.0:
        raise ValueError(f"tilecute.autotune: early_stop_factor must be >= 1.0, got "
                         f"{early_stop_factor}")

    def wrap(jitted):
        return AutoTuner(jitted, configs, warmup, rep, timeout, ref_prog, skip_check, atol,
                         rtol, supply_type, executor, cache_results, max_mismatched_ratio, shapes,
                         early_stop, early_stop_factor, supply_prog, manual_check_prog,
                         cache_input_tensors, do_not_specialize)
    return wrap


def _clone(x):
    return x.clone() if hasattr(x, "clone") else x


def _check(got, want, atol, rtol, max_ratio):
    import torch

    if len(got) != len(want):
        raise AssertionError(f"{len(got)} outputs, the reference returned {len(want)}")
    for k, (g, w) in enumerate(zip(got, want)):
        bad = ~torch.isclose(g.double(), torch.as_tensor(w).to(g.device).double(), atol=atol,
                             rtol=rtol, equal_nan=True)
        if bad.numel() and bad.float().mean().item() > max_ratio:
            raise AssertionError(f"wrong result: output {k} differs from ref_prog in "
                                 f"{bad.float().mean().item():.2%} of its elements")


def _device_name() -> str:
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_name()
    except (ImportError, AssertionError, RuntimeError):  # no usable CUDA in this torch
        pass
    return "none"


def _progress(line: str) -> None:
    if sys.stderr.isatty():
        sys.stderr.write("\r" + line + "\033[K")
        sys.stderr.flush()


def _load(key: str) -> Optional[dict]:
    path = store_dir() / f"{key}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _store(key, function, args, kwargs, results, best, ref_latency=None) -> None:
    from filelock import FileLock

    d = store_dir()
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    doc = {"key": key, "function": function, "args": _describe(tuple(args)),
           "kwargs": _describe(dict(kwargs)), "best": best, "ref_latency": ref_latency,
           "device": _device_name(), "created": time.time(),
           "configs": [{"config": r.config, "time_ms": r.time_ms, "error": r.error}
                       for r in results]}
    with FileLock(str(d / ".lock")):
        tmp = d / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(doc, indent=1, default=repr))
        os.replace(tmp, d / f"{key}.json")


def list_results() -> list[dict]:
    out = []
    for p in sorted(store_dir().glob("*.json")):
        try:
            out.append(json.loads(p.read_text()))
        except (OSError, ValueError):
            continue
    return out


def clear_results() -> int:
    n = 0
    for p in store_dir().glob("*.json"):
        p.unlink()
        n += 1
    return n
