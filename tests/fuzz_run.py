"""Run the tile fuzzer (tests/fuzz_tiles.py) over many seeds.

    python tests/fuzz_run.py --first 0 --count 300 --jobs 12  # on a GPU: build, run, compare
    python tests/fuzz_run.py --first 0 --count 50 --build-only # on the CPU: build sm_90a cubins
    python tests/fuzz_run.py --seeds 17,42 --show              # print the programs' source

Prints one line per program that is not right (``SEED NAME STATUS DETAIL``; STATUS is
``wrong`` -- a silent wrong answer --, ``crash`` -- an exception that is no refusal of
tilecute's, or a launch that failed --, ``hang`` -- a launch past ``--timeout`` --, or
``refused`` with ``--show-refused``), then a JSON
summary (counts by status and by form, the failing seeds).  Exit status 1 when any program
is wrong, crashed or hung.  ``--dump DIR`` writes each failing program's source to DIR/NAME.py.

``--timeout S`` runs each program in a child process (one at a time; the child is reused
while it answers): a launch that does not finish within S seconds -- a hang -- is reported
as ``SEED NAME hang ...`` (a failure), the child is killed and the next seed runs in a fresh
one; so is a child that dies (``crash``) or a launch that fails (a poisoned CUDA context).
The build before the launch has its own limit (``--build-timeout``, 600 s).

    python tests/fuzz_run.py --form new --first 0 --count 300 --jobs 12 --timeout 30
      # the forms of NEW_FORMS (attention loops, small-grid GEMMs, thread-written GEMM
      # operands, accumulator rows / columns, ordered pipelines, macros, scalar code,
      # packed / dequantized GEMM operands, accumulator chains, back-to-back GEMMs,
      # implicit-GEMM convolutions, block-sparse loops)
    python tests/fuzz_run.py --form dequant --first 0 --count 200 --jobs 12 --timeout 30
      # one form of them alone (also acc_chain, gemm2, conv, ...)"""

import argparse
import collections
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import fuzz_tiles as F  # noqa: E402

BAD = ("wrong", "crash", "hang")  # the statuses that fail a run


def _build_one(args):
    seed, form = args
    return F.build_program(F.generate(seed, form))


def prebuild(seeds, form, jobs, timeout=None):
    """Build the programs' cubins in ``jobs`` fresh processes (spawned: no CUDA state is
    forked), filling tilecute's cache for the runs.  With ``timeout``, a wait of more than
    that many seconds for the next build ends the prebuild (a build that hangs is then met
    again, under the child's build limit, when its seed runs)."""
    import multiprocessing as mp
    with mp.get_context("spawn").Pool(jobs) as pool:
        it = pool.imap_unordered(_build_one, [(s, form) for s in seeds])  # (chunks of 1: next(timeout))
        for _ in seeds:
            try:
                it.next(timeout)
            except StopIteration:
                break
            except mp.TimeoutError:
                print(f"# prebuild: no build finished in {timeout:g} s; the rest build as they run",
                      file=sys.stderr, flush=True)
                pool.terminate()
                break


def _child_main(conn, device, build_only, run_fn):
    """The child of ``--timeout``: runs the programs the parent sends, one at a time, and
    answers ("built",) between the build and the launch, then ("done", status, detail)."""
    os.environ.setdefault("TILECUTE_ARCH", "sm_90a")
    fn = F.run_program
    if run_fn:  # "module:function" (the CPU test's fake runs)
        import importlib
        mod, name = run_fn.split(":")
        fn = getattr(importlib.import_module(mod), name)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        seed, form = msg
        prog = F.generate(seed, form)
        if build_only:
            status, detail = F.build_program(prog)
        else:
            status, detail = fn(prog, device, on_built=lambda: conn.send(("built",)))
        conn.send(("done", status, detail))


class Child:
    """A child process running programs under a timeout (see ``--timeout``)."""

    def __init__(self, device, build_only, timeout, build_timeout):
        self.device, self.build_only = device, build_only
        self.timeout, self.build_timeout = timeout, build_timeout
        self.proc = self.conn = None

    def _start(self):
        import multiprocessing as mp
        ctx = mp.get_context("spawn")
        self.conn, theirs = ctx.Pipe()
        self.proc = ctx.Process(target=_child_main, daemon=True,
                                args=(theirs, self.device, self.build_only, os.environ.get("FUZZ_RUN_FN", "")))
        self.proc.start()
        theirs.close()

    def stop(self, kill=False):
        if self.proc is None:
            return
        if not kill:
            try:
                self.conn.send(None)
                self.proc.join(10)
            except (OSError, EOFError):
                pass
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(60)
        self.conn.close()
        self.proc = self.conn = None

    def _wait(self, limit, what):
        """The child's next message, or (status, detail) of a hang / death."""
        try:
            if not self.conn.poll(limit):
                self.stop(kill=True)
                return None, ("hang", f"{what}: no answer in {limit:g} s (the child was killed)")
            return self.conn.recv(), None
        except (EOFError, OSError):
            self.proc.join(30)
            code = self.proc.exitcode
            self.stop(kill=True)
            return None, ("crash", f"{what}: the child process died (exit code {code})")

    def run(self, seed, form):
        if self.proc is None:
            self._start()
        self.conn.send((seed, form))
        msg, bad = self._wait(self.build_timeout, "build")
        if bad:
            return bad
        if msg[0] == "built":
            msg, bad = self._wait(self.timeout, "run")
            if bad:
                return bad
        status, detail = msg[1], msg[2]
        if status == "crash" and detail.startswith("run:"):
            self.stop(kill=True)  # the CUDA context may be unusable: a fresh child
        return status, detail


def _rest(argv, seeds):
    """Run ``seeds`` in a fresh process with the same options; its lines pass through, its
    JSON summary is returned."""
    import subprocess
    args = list(sys.argv[1:] if argv is None else argv)
    for flag in ("--seeds", "--first", "--count"):
        while flag in args:
            k = args.index(flag)
            del args[k:k + 2]
    args = [a for a in args if not a.startswith(("--seeds=", "--first=", "--count="))]
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), *args, "--seeds", ",".join(map(str, seeds))],
                          stdout=subprocess.PIPE, text=True)
    lines = proc.stdout.rstrip("\n").split("\n")
    for line in lines[:-1]:
        print(line, flush=True)
    try:
        return json.loads(lines[-1])
    except (ValueError, IndexError):
        return {"counts": {"crash": len(seeds)}, "by_form": {}, "failing": [
            {"seed": s, "name": "?", "status": "crash", "detail": "the runner's child process died"} for s in seeds]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--seeds", default="", help="comma-separated seeds (instead of --first/--count)")
    ap.add_argument("--form", default=None, choices=F.FORMS + F.NEW_FORMS + F.EXTRA_FORMS + ["new"],
                    help="one form, or \"new\": the seed picks one of the forms of NEW_FORMS")
    ap.add_argument("--build-only", action="store_true", help="build the cubins only (no GPU)")
    ap.add_argument("--arch", default=os.environ.get("TILECUTE_ARCH", "sm_90a"))
    ap.add_argument("--show", action="store_true", help="print each program's source")
    ap.add_argument("--show-refused", action="store_true")
    ap.add_argument("--dump", default="")
    ap.add_argument("--stop", action="store_true", help="stop at the first wrong / crashed program")
    ap.add_argument("--trace", action="store_true", help="print each program's name (stderr) before it runs")
    ap.add_argument("--timeout", type=float, default=0,
                    help="run each program in a child process; a launch longer than this many seconds "
                         "is a hang (a failure naming the seed) and the child is replaced")
    ap.add_argument("--build-timeout", type=float, default=600)
    ap.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    ap.add_argument("--jobs", type=int, default=0,
                    help="build the cubins first in this many processes (they land in tilecute's cache; "
                         "the runs then find them there)")
    opts = ap.parse_args(argv)
    os.environ.setdefault("TILECUTE_ARCH", opts.arch)
    os.environ.setdefault("CUTE_DSL_ARCH", opts.arch)
    seeds = [int(s) for s in opts.seeds.split(",") if s] or list(range(opts.first, opts.first + opts.count))
    counts = collections.Counter()
    by_form = collections.defaultdict(collections.Counter)
    failing = []
    start = time.time()
    if opts.jobs > 1:
        prebuild(seeds, opts.form, opts.jobs, opts.build_timeout if opts.timeout else None)
    child = Child(opts.device, opts.build_only, opts.timeout, opts.build_timeout) if opts.timeout else None
    for at, seed in enumerate(seeds):
        prog = F.generate(seed, opts.form)
        if opts.show:
            print(f"# ---- {prog.name} {prog.args}\n{prog.source}")
        if opts.trace:
            print(f"running {seed} {prog.name}", file=sys.stderr, flush=True)
        if child is not None:
            status, detail = child.run(seed, opts.form)
        elif opts.build_only:
            status, detail = F.build_program(prog)
        else:
            status, detail = F.run_program(prog, opts.device)
        counts[status] += 1
        by_form[prog.form][status] += 1
        if child is None and status == "crash" and detail.startswith("run:") and at + 1 < len(seeds):
            # a launch that failed may leave the CUDA context unusable: the rest of the
            # seeds run in a fresh process, whose summary is merged into this one
            print(f"{seed} {prog.name} {status} {detail}", flush=True)
            failing.append({"seed": seed, "name": prog.name, "status": status, "detail": detail[:500]})
            rest = _rest(argv, seeds[at + 1:])
            for k, v in rest["counts"].items():
                counts[k] += v
            for f, c in rest["by_form"].items():
                for k, v in c.items():
                    by_form[f][k] += v
            failing += rest["failing"]
            break
        if status in BAD or (status == "refused" and opts.show_refused):
            print(f"{seed} {prog.name} {status} {detail}", flush=True)
        if status in BAD:
            failing.append({"seed": seed, "name": prog.name, "status": status, "detail": detail[:500]})
            if opts.dump:
                os.makedirs(opts.dump, exist_ok=True)
                with open(os.path.join(opts.dump, prog.name + ".py"), "w") as fh:
                    fh.write(f"# {prog.name} args={prog.args!r}\n# {status}: {detail}\n{prog.source}")
            if opts.stop:
                break
    if child is not None:
        child.stop()
    summary = {"programs": sum(counts.values()), "seconds": round(time.time() - start, 1),
               "counts": dict(counts), "by_form": {k: dict(v) for k, v in sorted(by_form.items())},
               "failing": failing, "mode": "build" if opts.build_only else "run", "arch": opts.arch}
    print(json.dumps(summary))
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
