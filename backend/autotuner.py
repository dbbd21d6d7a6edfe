"""``tilecute.autotune``: TileLang's ``@autotune`` stacked on ``@tilecute.jit``.

    @tilecute.autotune(configs=[{"block_M": 128, "num_stages": 3}, ...], warmup=25, rep=100)
    @tilecute.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, block_N=128, block_K=64, num_stages=2, threads=256):
        ...                                   # returns a @T.prim_func
    kernel = matmul(4096, 4096, 4096)         # tuned once per argument set; the fastest
    matmul.result                             # every config with its time or its failure

- **Compiling** every config runs on an executor (``executor=``, any
  ``concurrent.futures.Executor``; by default a thread pool sized to the cores: the two
  expensive steps, the C++ launcher build and the cubin (``runtime/cubin_worker``), run
  in child processes, so threads compile in parallel).  A process pool works too when
  the factory is importable (a module-level function).  A config that fails to build, or
  takes longer than ``timeout`` seconds, is recorded and skipped.
- **Profiling** runs on the GPU, one config at a time: inputs made once
  (``supply_type``), checked against ``ref_prog`` (``atol``/``rtol``) unless
  ``skip_check``, timed with ``tilecute.profiler.do_bench(warmup, rep)``.  A wrong config
  is reported and never chosen.
- **Results persist** under ``<cache root>/autotune/<key>.json``, keyed by everything that
  changes the answer: each config's canonical IR, the arguments, ``out_idx``, the
  options, the arch and the GPU's name, and the tool versions.  A later process with the
  same key compiles the stored winner (a cache hit) and profiles nothing.
  ``tilecute tune ls | show KEY | clear`` manage them.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from .utils import TensorSupplyType


@dataclass
class ConfigResult:
    config: dict
    time_ms: Optional[float] = None
    error: Optional[str] = None
    kernel: Any = field(default=None, repr=False)


@dataclass
class TuneResult:
    """Every config with its time (ms) or why it was skipped; ``best`` the winner's."""

    key: str
    configs: list
    best: Optional[dict]
    from_store: bool = False

    def table(self) -> str:
        rows = [f"{json.dumps(r.config, sort_keys=True)}: "
                + (f"{r.time_ms:.4f} ms" if r.time_ms is not None else f"skipped ({r.error})")
                for r in self.configs]
        return "\n".join(rows)


def store_dir() -> Path:
    from .cache import cache_root

    return Path(cache_root()) / "autotune"


def _compile_config(factory, args: tuple, kwargs: dict, config: dict, out_idx, target, options):
    """Build one config's kernel and its cubin; returns the cache entry's folder.  Runs on
    the executor (a module-level function: a process pool can pickle it)."""
    from .api import compile as compile_func

    kernel = compile_func(factory(*args, **{**kwargs, **config}), out_idx=out_idx,
                          target=target, options=options)
    kernel.ensure_cubin()
    return str(kernel.path)


class AutoTuner:
    def __init__(self, jitted, configs, warmup, rep, timeout, ref_prog, skip_check, atol, rtol,
                 supply_type, executor, cache_results, max_mismatched_ratio, shapes=None):
        factory = getattr(jitted, "__wrapped__", None)
        spec = getattr(jitted, "__tilecute_jit__", None)
        if factory is None or spec is None:
            raise TypeError("tilecute.autotune stacks on @tilecute.jit(...) over a kernel "
                            "factory (a function returning a @T.prim_func): put "
                            "@tilecute.autotune above @tilecute.jit")
        self.jitted, self.factory = jitted, factory
        self.out_idx, self.target, self.options = spec
        self.configs, self.warmup, self.rep, self.timeout = configs, warmup, rep, timeout
        self.ref_prog, self.skip_check, self.atol, self.rtol = ref_prog, skip_check, atol, rtol
        self.supply_type, self.executor, self.cache_results = supply_type, executor, cache_results
        self.max_mismatched_ratio = max_mismatched_ratio
        self.shapes = dict(shapes or {})  # sizes of symbolic dims for the generated inputs
        self.__name__ = getattr(factory, "__name__", "tuned")
        self.__doc__ = factory.__doc__
        self.result: Optional[TuneResult] = None
        self._tuned: dict = {}

    # ---- configs and keys -----------------------------------------------------------
    def config_list(self, args, kwargs) -> list[dict]:
        configs = self.configs(*args, **kwargs) if callable(self.configs) else self.configs
        configs = [dict(c) for c in (configs or [])]
        if not configs:
            raise ValueError(f"{self.__name__}: autotune needs at least one config")
        return configs

    def key(self, args, kwargs, configs) -> str:
        """sha256 of what changes the answer (see the module's docstring)."""
        from .api import _arch
        from .cache import tool_versions
        from .ir.serialize import canonical_json

        irs = []
        for c in configs:
            try:
                irs.append(hashlib.sha256(canonical_json(
                    self.factory(*args, **{**kwargs, **c})).encode()).hexdigest())
            except Exception as e:  # a config the factory refuses is part of the key too
                irs.append(f"error:{type(e).__name__}:{e}")
        arch = _arch(self.target, self.__name__)
        doc = {"function": f"{self.factory.__module__}.{self.factory.__qualname__}",
               "args": repr(args), "kwargs": repr(sorted(kwargs.items())),
               "configs": [json.dumps(c, sort_keys=True, default=repr) for c in configs],
               "ir": irs, "out_idx": repr(self.out_idx), "options": sorted(self.options.items()),
               "arch": arch, "device": _device_name(), "versions": tool_versions()}
        return hashlib.sha256(json.dumps(doc, sort_keys=True, default=repr).encode()).hexdigest()

    # ---- compiling --------------------------------------------------------------------
    def compile_all(self, *args, **kwargs) -> list[ConfigResult]:
        """Build every config (in parallel on the executor); no profiling."""
        from .runtime.kernel import load

        configs = self.config_list(args, kwargs)
        executor = self.executor or cf.ThreadPoolExecutor(max_workers=os.cpu_count() or 2)
        own = self.executor is None
        results = [ConfigResult(c) for c in configs]
        try:
            futures = {executor.submit(_compile_config, self.factory, args, kwargs, c,
                                       self.out_idx, self.target, self.options): r
                       for c, r in zip(configs, results)}
            deadline = None if self.timeout is None else time.monotonic() + self.timeout
            done = 0
            for fut, r in futures.items():
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    r.kernel = load(fut.result(timeout=left), self.out_idx)
                except cf.TimeoutError:
                    r.error = f"compile took longer than timeout={self.timeout} s"
                    fut.cancel()
                except Exception as e:
                    r.error = f"compile failed: {type(e).__name__}: {str(e).splitlines()[0][:300]}"
                done += 1
                _progress(f"{self.__name__}: compiled {done}/{len(configs)}")
        finally:
            if own:
                executor.shutdown(wait=False, cancel_futures=True)
        return results

    # ---- profiling ----------------------------------------------------------------------
    def profile(self, results: list[ConfigResult]) -> None:
        from .profiler import Profiler, _cuda, do_bench

        _cuda()  # a clear error without a GPU

        ok = [r for r in results if r.kernel is not None]
        if not ok:
            return
        inputs = Profiler(ok[0].kernel, self.supply_type, self.shapes)._inputs()
        want = None
        if self.ref_prog is not None and not self.skip_check:
            want = self.ref_prog(*[x.clone() for x in inputs])
            want = list(want) if isinstance(want, (tuple, list)) else [want]
        best = None
        for i, r in enumerate(ok):
            try:
                got = r.kernel(*inputs)
                if want is not None:
                    got = list(got) if isinstance(got, (tuple, list)) else [got]
                    _check(got, want, self.atol, self.rtol, self.max_mismatched_ratio)
                r.time_ms = do_bench(lambda k=r.kernel: k(*inputs), self.warmup, self.rep)
                best = r.time_ms if best is None else min(best, r.time_ms)
            except Exception as e:
                r.error = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
            _progress(f"{self.__name__}: timed {i + 1}/{len(ok)}, best {best:.4f} ms"
                      if best is not None else f"{self.__name__}: timed {i + 1}/{len(ok)}")

    # ---- the call -------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        memo = (args, tuple(sorted(kwargs.items())))
        try:
            if memo in self._tuned:
                return self._tuned[memo]
        except TypeError:
            memo = None
        configs = self.config_list(args, kwargs)
        key = self.key(args, kwargs, configs)
        stored = _load(key) if self.cache_results else None
        if stored is not None and stored.get("best") is not None:
            best = stored["best"]
            kernel = self.jitted(*args, **{**kwargs, **best})
            self.result = TuneResult(key, [ConfigResult(c["config"], c.get("time_ms"), c.get("error"))
                                           for c in stored["configs"]], best, from_store=True)
        else:
            results = self.compile_all(*args, **kwargs)
            self.profile(results)
            timed = [r for r in results if r.time_ms is not None]
            if not timed:
                reasons = "; ".join(f"{json.dumps(r.config, sort_keys=True)}: {r.error}"
                                    for r in results)
                raise RuntimeError(f"{self.__name__}: no config compiled and checked: {reasons}")
            winner = min(timed, key=lambda r: r.time_ms)
            kernel = winner.kernel
            self.result = TuneResult(key, results, winner.config)
            if self.cache_results:
                _store(key, self.__name__, args, kwargs, results, winner.config)
        if memo is not None:
            self._tuned[memo] = kernel
        return kernel


def autotune(configs=None, warmup: float = 25, rep: float = 100, timeout: Optional[float] = None,
             ref_prog: Optional[Callable] = None, skip_check: bool = False, atol: float = 1e-2,
             rtol: float = 1e-2, supply_type: TensorSupplyType = TensorSupplyType.Auto,
             executor: Optional[cf.Executor] = None, cache_results: bool = True,
             max_mismatched_ratio: float = 0.01, shapes: Optional[dict] = None, **unknown):
    """Decorate a ``@tilecute.jit`` kernel factory: calling it tunes over ``configs``
    (dicts of the factory's keyword arguments, or a function of the call's arguments
    returning them) and returns the fastest kernel (see the module docstring).  ``shapes``
    gives the sizes of symbolic dims for the generated inputs (kernels whose shapes the
    factory's arguments do not fix)."""
    if unknown:
        raise TypeError(f"tilecute.autotune: unsupported argument(s) {', '.join(unknown)}")

    def wrap(jitted):
        return AutoTuner(jitted, configs, warmup, rep, timeout, ref_prog, skip_check, atol,
                         rtol, supply_type, executor, cache_results, max_mismatched_ratio, shapes)
    return wrap


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
    except ImportError:
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


def _store(key, function, args, kwargs, results, best) -> None:
    from filelock import FileLock

    d = store_dir()
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    doc = {"key": key, "function": function, "args": repr(args), "kwargs": repr(kwargs),
           "best": best, "device": _device_name(), "created": time.time(),
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
