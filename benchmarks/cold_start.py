"""Cold start: a new process that imports a cached kernel and launches it once, vs the
same kernel through CuTe DSL's own compile path in a new process.

Each child reports its phases (interpreter start, imports, load/compile, first launch);
the parent adds the wall time from spawn to exit.  JSON lines; the last line compares the
two paths beyond `import torch`.

    python benchmarks/cold_start.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

TILECUTE_CHILD = r"""
import time, json, sys
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
import tilecute
t2 = time.perf_counter()
import tvm_ffi
t3 = time.perf_counter()
kernel = tilecute.load(sys.argv[1])
t4 = time.perf_counter()
kernel.launcher  # loads launcher.so through TVM FFI and hands it the cubin
t5 = time.perf_counter()
a = torch.randn(1 << 20, device="cuda", dtype=torch.float16); b = torch.randn_like(a); c = torch.empty_like(a)
torch.cuda.synchronize()
t6 = time.perf_counter()
kernel(a, b, c); torch.cuda.synchronize()
t7 = time.perf_counter()
kernel(a, b, c); torch.cuda.synchronize()
t8 = time.perf_counter()
assert torch.equal(c, a + b)
print(json.dumps({"import_torch_ms": (t1-t0)*1e3, "import_tilecute_ms": (t2-t1)*1e3,
                  "import_tvm_ffi_ms": (t3-t2)*1e3, "load_entry_ms": (t4-t3)*1e3,
                  "load_launcher_ms": (t5-t4)*1e3, "first_launch_ms": (t7-t6)*1e3,
                  "second_launch_ms": (t8-t7)*1e3, "cutlass_imported": "cutlass" in sys.modules}))
"""

CUTE_CHILD = r"""
import time, json, sys
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
sys.path.insert(0, sys.argv[1])
import cute_dsl_peer  # imports cutlass and defines the kernel
t2 = time.perf_counter()
f = cute_dsl_peer.build_add()
a = torch.randn(1 << 20, device="cuda", dtype=torch.float16); b = torch.randn_like(a); c = torch.empty_like(a)
torch.cuda.synchronize()
t3 = time.perf_counter()
f(a, b, c); torch.cuda.synchronize()
t4 = time.perf_counter()
assert torch.equal(c, a + b)
print(json.dumps({"import_torch_ms": (t1-t0)*1e3, "import_cutlass_ms": (t2-t1)*1e3,
                  "compile_ms": (t3-t2)*1e3, "first_launch_ms": (t4-t3)*1e3}))
"""

BASELINE_CHILD = "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()"


def run(code, *args):
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    wall = (time.perf_counter() - t) * 1e3
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-3000:])
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    row = json.loads(lines[-1]) if lines else {}
    row["process_wall_ms"] = wall
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--entry", help="a cache entry of examples/elementwise.py's vector_add "
                                    "(default: compile it now, then measure loads of it)")
    args = ap.parse_args()
    entry = args.entry
    if entry is None:
        sys.path.insert(0, str(HERE.parent / "examples"))
        import elementwise as E
        import tilecute

        kernel = tilecute.compile(E.vector_add("float16"))
        kernel.ensure_cubin()
        entry = str(kernel.path)
    results = {}
    for name, code, extra in (("import torch + CUDA init", BASELINE_CHILD, []),
                              ("tilecute cached load", TILECUTE_CHILD, [entry]),
                              ("CuTe DSL compile path", CUTE_CHILD, [str(HERE)])):
        rows = [run(code, *extra) for _ in range(args.runs)]
        med = {k: round(statistics.median(r[k] for r in rows), 1)
               for k in rows[0] if isinstance(rows[0][k], float)}
        med.update({k: rows[0][k] for k in rows[0] if isinstance(rows[0][k], bool)})
        results[name] = med
        print(json.dumps({"path": name, "runs": args.runs, **med}), flush=True)
    base = results["import torch + CUDA init"]["process_wall_ms"]
    print(json.dumps({
        "summary": "process wall time beyond `import torch` + CUDA init (median ms)",
        "tilecute": round(results["tilecute cached load"]["process_wall_ms"] - base, 1),
        "cute_dsl": round(results["CuTe DSL compile path"]["process_wall_ms"] - base, 1),
    }))


if __name__ == "__main__":
    main()
