"""Compile, without running, one TileLang example's kernels on a machine with no GPU:
``CUTE_DSL_ARCH=sm_90a TILECUTE_ARCH=sm_90a python compile_example.py example_x.py [its args]``.

The example runs on the CPU with its own arguments, as ``run_example.py`` would run it on a GPU,
in compile-only mode (``compile_only.py``: kernels build their cubins at their first call and
launch nothing, tensors live on the CPU, benchmarks and tuning are inert, ``allclose`` checks
pass).  A check the example writes itself may still stop it after its kernels compiled.

Prints one line: ``COMPILE OK kernels=N [names]``, ``COMPILE REFUSED kernels=N <error>``
(a tilecute error naming a form it does not take), ``COMPILE CRASH kernels=N <error> @ frames``
(an error raised inside tilecute or CuTe DSL that is not a refusal) or ``COMPILE STOPPED
kernels=N <error>`` (the example itself stopped, outside tilecute, after N cubins)."""

import os
import runpy
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compile_only import built  # noqa: E402  (installs compile-only mode)
from tilecute.language import FrontendError  # noqa: E402

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
    if inside and isinstance(e, (ValueError, NotImplementedError, TypeError, FrontendError)):
        status = "COMPILE REFUSED"  # tilecute's errors are ValueErrors (or the frontend's FrontendError) naming the form
    elif inside:
        status = "COMPILE CRASH"
    else:
        status = "COMPILE STOPPED"
    where = " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}" for f in reversed(tb[-4:]))
    msg = f"{type(e).__name__}: {str(e)[:600]}".replace("\n", " | ") + f" @ {where}"
print(f"{status} kernels={len(built)} [{','.join(built)}] {time.time() - t0:.0f}s {msg}".rstrip())
