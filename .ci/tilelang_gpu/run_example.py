"""Run one TileLang example (``python run_example.py example_x.py``) under tilecute on a GPU:
the example's own reference check decides.  Prints one ``RESULT OK`` / ``RESULT FAIL ...``
line (with the kernels launched and the error's last frames)."""

import os
import runpy
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tlalias  # noqa: E402,F401
import torch  # noqa: E402
import tilecute.runtime.kernel as _rk  # noqa: E402

_loaded = [0]
_load = _rk.Kernel._load


def _counting_load(self):
    if self._func is None:
        _loaded[0] += 1
    return _load(self)


_rk.Kernel._load = _counting_load
path = sys.argv[1]
sys.argv = [path]
sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
t0 = time.time()
try:
    runpy.run_path(path, run_name="__main__")
    torch.cuda.synchronize()
    print(f"RESULT OK kernels={_loaded[0]} {time.time() - t0:.0f}s")
except SystemExit as e:
    print(f"RESULT OK-exit({e.code}) kernels={_loaded[0]}")
except BaseException as e:  # noqa: BLE001 -- every failure is a row of the report
    frames = traceback.extract_tb(e.__traceback__)[-4:]
    where = " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}" for f in reversed(frames))
    msg = f"{type(e).__name__}: {str(e)[:500]}".replace("\n", " | ")
    print(f"RESULT FAIL kernels={_loaded[0]} {msg} @ {where}")
