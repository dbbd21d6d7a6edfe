"""Run one TileLang example (``python run_example.py example_x.py``) under tilecute on a GPU:
the example's own reference check decides.  Prints one ``RESULT OK`` / ``RESULT FAIL ...``
line (with the kernels launched and the error's last frames).

Reference packages: several examples check against ``flash_attn`` (FlashAttention) or ``fla``
(flash-linear-attention).  Where such a package is not installed, ``shims/`` beside this file
supplies a torch reference of exactly the functions the examples import (float32 math, written
from the functions' documented meaning; see shims/flash_attn/__init__.py, shims/fla/__init__.py).
It is put at the *end* of sys.path only when the real package is absent, so an installed package
always wins; ``TILECUTE_TL_SHIMS=0`` turns the stand-ins off.  The RESULT line ends with
``shims=...`` naming the stand-ins the example actually imported.

Printed verdicts: some examples report their check by printing instead of raising (gdn's
``... failed ✗`` and red ``WARNING: ... Error``, blocksparse's ``all_close=False`` /
``Verification FAILED``); such a line turns the result into ``RESULT FAIL-CHECK`` with the line.

``TILECUTE_TL_BENCH_ARGS=1`` (off by default): gdn's example_chunk_delta_h.py and
example_chunk_delta_bwd.py pass the benchmarked function's own arguments to ``do_bench``
(``do_bench(fn, k=K, ...)``), a TypeError under TileLang as under tilecute, raised before their
checks; with this set, such a call times ``fn(*args, **kwargs)`` instead (and says so), so that
their checks run.  A ``do_bench`` call that binds to its own signature is untouched."""

import importlib.util
import os
import re
import runpy
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tlalias  # noqa: E402,F401
from kernel_count import loaded as _loaded  # noqa: E402
import torch  # noqa: E402

SHIMS = os.path.join(HERE, "shims")
if os.environ.get("TILECUTE_TL_SHIMS", "1") != "0":
    if any(importlib.util.find_spec(name) is None for name in ("flash_attn", "fla")):
        sys.path.append(SHIMS)  # last: a real flash_attn / fla earlier on the path still wins


def _shims_used():
    names = sorted({n.split(".")[0] for n, m in list(sys.modules.items())
                    if (getattr(m, "__file__", None) or "").startswith(SHIMS + os.sep)})
    return f" shims={','.join(names)}" if names else ""


_CHECK_FAILED = re.compile(r"failed ✗|all_close=False|Verification FAILED|\x1b\[31mWARNING: .*Error")


class _Verdicts:
    """stdout passed through, lines with an example's printed check failure kept."""

    def __init__(self, out):
        self.out, self.failed, self._line = out, [], ""

    def write(self, s):
        self._line += s
        *lines, self._line = self._line.split("\n")
        self.failed += [ln for ln in lines if _CHECK_FAILED.search(ln)]
        return self.out.write(s)

    def __getattr__(self, name):
        return getattr(self.out, name)


if os.environ.get("TILECUTE_TL_BENCH_ARGS") == "1":
    import inspect

    import tilecute.profiler as _profiler

    _bench = _profiler.do_bench

    def _bench_with_fn_args(fn, *args, **kwargs):
        try:
            inspect.signature(_bench).bind(fn, *args, **kwargs)
            misused = any(hasattr(a, "shape") for a in args)
        except TypeError:
            misused = True
        if not misused:
            return _bench(fn, *args, **kwargs)
        print("run_example: do_bench given the benchmarked function's own arguments (the example's "
              "bug; a TypeError under TileLang too): timing fn(*args, **kwargs)", file=sys.stderr)
        return _bench(lambda: fn(*args, **kwargs))

    _profiler.do_bench = _bench_with_fn_args

path = sys.argv[1]
sys.argv = [path]
sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
verdicts = sys.stdout = _Verdicts(sys.stdout)
t0 = time.time()
try:
    runpy.run_path(path, run_name="__main__")
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    status = f"RESULT OK kernels={_loaded[0]} {time.time() - t0:.0f}s"
except SystemExit as e:
    status = f"RESULT OK-exit({e.code}) kernels={_loaded[0]}"
except BaseException as e:  # noqa: BLE001 -- every failure is a row of the report
    frames = traceback.extract_tb(e.__traceback__)[-4:]
    where = " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}" for f in reversed(frames))
    msg = f"{type(e).__name__}: {str(e)[:500]}".replace("\n", " | ")
    status = f"RESULT FAIL kernels={_loaded[0]} {msg} @ {where}"
sys.stdout = verdicts.out
if status.startswith("RESULT OK") and verdicts.failed:
    shown = re.sub(r"\x1b\[[0-9;]*m", "", " | ".join(verdicts.failed[:3]))[:500]
    status = f"RESULT FAIL-CHECK kernels={_loaded[0]} printed: {shown}"
print(status + _shims_used())
