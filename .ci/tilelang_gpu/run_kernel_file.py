"""Run one of TileLang's kernel files that is not an ``example_*.py`` (FLA's KDA kernels in
``examples/kda``, ``deepseek_v4/act_quant.py``...) under tilecute on a GPU, from the file's
folder:

    python run_kernel_file.py chunk_o.py                 # its __main__
    python run_kernel_file.py act_quant.py --call test_fp8_act_quant --call test_fp4_act_quant
    python run_kernel_file.py sparse_attn_fwd_sm90.py --call "test_correctness(H=64)"
    TL_CONFIG=7 python run_kernel_file.py chunk_o.py     # autotuned kernels: config 7 only

Prints one ``RESULT OK`` / ``RESULT FAIL ...`` line, as ``run_example.py``.  Two things
differ from running the file as it is:

- ``TL_CONFIG=i`` (or ``TL_CONFIG=default``): an ``@autotune`` kernel compiles its config
  ``i`` (or the factory's defaults) instead of tuning, so a config's numbers are checked,
  not only the winner's.  Unset: the file tunes as written (every config compiled, the
  fastest run).
- The KDA files' ``compare_tensors`` only prints the errors; here it also fails the run
  when the relative L2 error ``|x - y| / |y|`` passes ``TL_REL_TOL`` (default 2e-2) or the
  finite/non-finite elements differ, and prints one ``CHECK`` line per comparison.
"""

import argparse
import os
import runpy
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tlalias  # noqa: E402,F401
from kernel_count import loaded as _loaded  # noqa: E402
import torch  # noqa: E402
import tilecute.autotuner as _at  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("path")
parser.add_argument("--call", action="append", default=[],
                    help="instead of __main__: call this function of the file (a name: no "
                         "arguments), or evaluate this call (`f(H=64)`) in the file's globals")
opts, rest = parser.parse_known_args()


_config = os.environ.get("TL_CONFIG")
if _config is not None:
    _tuned_compile = _at.AutoTuner.compile

    def _one_config(self, *args, **kwargs):
        configs = self.config_list(args, kwargs)
        if self._given_tunables(args, kwargs, configs):
            return _tuned_compile(self, *args, **kwargs)
        config = {} if _config == "default" else configs[int(_config) % len(configs)]
        print(f"TL_CONFIG {self.__name__} {config}", flush=True)
        return self._direct(args, {**kwargs, **config})

    _at.AutoTuner.compile = _one_config

_checks = []
_tol = float(os.environ.get("TL_REL_TOL", "2e-2"))


def _strict_compare(original):
    def compare(name, x, y, *a, **k):
        original(name, x, y, *a, **k)
        xf, yf = x.detach().double(), y.detach().double()
        same_finite = bool(torch.equal(torch.isfinite(xf), torch.isfinite(yf)))
        xf, yf = torch.nan_to_num(xf), torch.nan_to_num(yf)
        rel = ((xf - yf).norm() / yf.norm().clamp_min(1e-30)).item()
        ok = same_finite and rel <= _tol
        _checks.append((name, ok))
        print(f"CHECK {name} rel_l2={rel:.3e} finite_match={same_finite} {'ok' if ok else 'FAIL'}",
              flush=True)
    return compare


path = opts.path
sys.argv = [path] + rest
sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
try:
    import test_utils_kda  # the KDA files' comparison helper

    test_utils_kda.compare_tensors = _strict_compare(test_utils_kda.compare_tensors)
except ImportError:
    pass

t0 = time.time()
try:
    if opts.call:
        module = runpy.run_path(path, run_name="tl_kernel_file")
        for call in opts.call:
            print(f"CALL {call}", flush=True)
            if "(" in call:
                eval(call, module)
            else:
                module[call]()
    else:
        runpy.run_path(path, run_name="__main__")
    torch.cuda.synchronize()
    bad = [n for n, ok in _checks if not ok]
    if bad:
        print(f"RESULT FAIL kernels={_loaded[0]} not close (relative L2 > {_tol}): {', '.join(bad)}")
    else:
        print(f"RESULT OK kernels={_loaded[0]} checks={len(_checks)} {time.time() - t0:.0f}s")
except SystemExit as e:
    print(f"RESULT OK-exit({e.code}) kernels={_loaded[0]}")
except BaseException as e:  # noqa: BLE001 -- every failure is a row of the report
    frames = traceback.extract_tb(e.__traceback__)[-4:]
    where = " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}" for f in reversed(frames))
    msg = f"{type(e).__name__}: {str(e)[:500]}".replace("\n", " | ")
    print(f"RESULT FAIL kernels={_loaded[0]} {msg} @ {where}")
