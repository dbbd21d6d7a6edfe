"""The tile fuzzer (tests/fuzz_tiles.py): random TileLang programs from seeds, each with a torch
reference.  CPU: the generator is deterministic, and a fixed set of seeds (one or two programs of each
form, 20) each builds an sm_90a cubin or is refused by one of tilecute's named errors (never
a crash); a few generated sources are checked for what they mean.  GPU (``-m gpu``): the same
seeds run against their references.  More seeds: ``python tests/fuzz_run.py`` (see there).
The forms of NEW_FORMS (``generate(seed, "new")``): one program each, built on the CPU and
run on a GPU; the runner's ``--timeout`` reports a hang as a failure naming its seed."""

import pytest

import fuzz_tiles as F

# the first program of each form (seed % 13 picks the form), then a second of the forms with
# the most corners (copy chains, index arithmetic, reductions, casts, gemm, softmax, rank 3)
SEEDS = list(range(13)) + [13, 14, 15, 17, 19, 23, 24]


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


def test_generator_is_deterministic_and_covers_every_form():
    a, b = F.programs(0, 26), F.programs(0, 26)
    assert [p.source for p in a] == [p.source for p in b]
    assert [p.args for p in a] == [p.args for p in b]
    assert {p.form for p in a} == set(F.FORMS)
    x, y = a[5].make_inputs("cpu"), b[5].make_inputs("cpu")
    assert all((u == v).all() for u, v in zip(x, y))


def test_references_of_the_index_form_floor_negatives():
    # the reference divides as TVM's floordiv / floormod: -7 // 2 == -4, -7 % 2 == 1,
    # 7 // -2 == -4, 7 % -2 == -1, truncdiv(-7, 2) == -3, truncmod(-7, 2) == -1
    import torch
    a = torch.tensor([-7, 7, -7])
    assert F._floordiv(a, 2).tolist() == [-4, 3, -4]
    assert F._floordiv(a, -2).tolist() == [3, -4, 3]
    assert (a - F._floordiv(a, -2) * -2).tolist() == [-1, -1, -1]
    assert torch.fmod(a, 2).tolist() == [-1, 1, -1]


def _torch_name(dtype):
    return "torch." + {"float8_e4m3": "float8_e4m3fn"}.get(dtype, dtype)


@pytest.mark.parametrize("first,count,form", [(100, 52, None), (0, 40, "new")])
def test_references_match_the_programs_parameters(first, count, form):
    # each reference tensor has its parameter's shape and dtype, each input too, and the
    # comparison of a reference with itself finds nothing (no false "wrong" on the GPU)
    import torch
    from tilecute.ir import nodes as N
    for prog in F.programs(first, count, form):
        params = prog.factory.get_tir(**prog.args).params
        inputs = prog.make_inputs("cpu")
        want = prog.reference(inputs)
        ins = iter(inputs)
        for k, p in enumerate(params):
            t = want.get(k) if k in prog.out_idx else next(ins)
            if t is None:
                continue
            if not isinstance(t, torch.Tensor):  # a scalar parameter's Python int
                assert isinstance(t, int) and isinstance(p, N.Var) and p.dtype == "int32", (prog.name, p, t)
                continue
            shape = tuple(int(d.value) for d in p.shape if isinstance(d, N.Const))
            assert tuple(t.shape) == shape and str(t.dtype) == _torch_name(p.dtype), (
                prog.name, p.name, tuple(t.shape), t.dtype, shape, p.dtype)
        for k, t in want.items():
            p = params[k]
            assert tuple(t.shape) == tuple(int(d.value) for d in p.shape), (prog.name, p.name)
            assert str(t.dtype) == _torch_name(p.dtype), (prog.name, p.name, t.dtype, p.dtype)
        outs = [want[k] for k in prog.out_idx]
        after = [want.get(k, x) for k, x in zip([k for k in range(len(params)) if k not in prog.out_idx], inputs)]
        assert F.compare(prog, inputs, after, outs[0] if len(outs) == 1 else outs) == [], prog.name


class _FakeKernel:
    """Stands for a built kernel on the CPU: writes the reference (perturbed when asked) into
    the in-place arguments and returns the outputs, as a tilecute Kernel returns them."""

    def __init__(self, prog, wrong):
        self.prog, self.wrong = prog, wrong

    def ensure_cubin(self):
        return "fake"

    def __call__(self, *inputs):
        want = self.prog.reference([x.clone() if hasattr(x, "clone") else x for x in inputs])
        ins = [k for k in range(len(inputs) + len(self.prog.out_idx)) if k not in self.prog.out_idx]
        for k, x in zip(ins, inputs):
            if k in want:
                x.copy_(want[k])
        outs = [want[k].clone() for k in self.prog.out_idx]
        if self.wrong:
            last = outs[-1] if outs else inputs[ins.index(max(want))]
            last.view(-1)[-1] += 1
        return None if not outs else outs[0] if len(outs) == 1 else tuple(outs)


@pytest.mark.parametrize("wrong", [False, True])
@pytest.mark.parametrize("form", [None, "new"])
def test_runner_compares_outputs_and_in_place_arguments(wrong, form, monkeypatch):
    # one program of each form through run_program with a fake kernel on the CPU: a right
    # answer is 'ok', one element off is 'wrong' (outputs and in-place arguments alike)
    for prog in F.programs(200, 13, form):
        monkeypatch.setattr(prog, "kernel", lambda prog=prog: _FakeKernel(prog, wrong))
        status, detail = F.run_program(prog, "cpu")
        assert status == ("wrong" if wrong else "ok"), (prog.name, status, detail)


@pytest.mark.parametrize("seed", SEEDS)
def test_program_builds_or_is_refused_by_name(seed):
    prog = F.generate(seed)
    status, detail = F.build_program(prog)
    assert status in ("ok", "refused"), f"{prog.name}: {detail}\n{prog.source}"
    if status == "refused":
        assert "line" in detail or "main" in detail or prog.name in detail, detail


@pytest.mark.gpu
@pytest.mark.parametrize("seed", SEEDS)
def test_gpu_program_matches_its_reference(seed):
    prog = F.generate(seed)
    status, detail = F.run_program(prog, "cuda")
    assert status in ("ok", "refused"), f"{prog.name} {prog.args}: {status} {detail}\n{prog.source}"


def fake_run(prog, device="cuda", on_built=None):
    """Stands for run_program in the runner's child (FUZZ_RUN_FN): seed 1 hangs in its
    launch, seed 2's child dies, seed 3's launch fails; the others are right."""
    import os
    import time
    on_built()
    if prog.seed == 1:
        time.sleep(120)
    if prog.seed == 2:
        os._exit(3)
    if prog.seed == 3:
        return "crash", "run: RuntimeError: an illegal memory access"
    return "ok", ""


def test_runner_reports_a_hang_with_its_seed_and_goes_on(monkeypatch, capsys):
    # --timeout: each program in a child process; a launch past the limit is a failure naming
    # its seed ('hang'), a dead child a crash, and the seeds after each run in a fresh child
    import json
    import time

    import fuzz_run
    monkeypatch.setenv("FUZZ_RUN_FN", "test_fuzz_tiles:fake_run")
    start = time.time()
    rc = fuzz_run.main(["--seeds", "0,1,2,3", "--form", "macro", "--timeout", "3"])
    lines = capsys.readouterr().out.strip().split("\n")
    assert time.time() - start < 90
    summary = json.loads(lines[-1])
    assert rc == 1 and summary["counts"] == {"ok": 1, "hang": 1, "crash": 2}, summary
    assert [(f["seed"], f["status"]) for f in summary["failing"]] == [(1, "hang"), (2, "crash"), (3, "crash")]
    assert lines[0].startswith("1 macro_1 hang run: no answer in 3 s")
    assert "died (exit code 3)" in lines[1]


# ---- the forms of NEW_FORMS ------------------------------------------------------------------
NEW_SEEDS = list(range(len(F.NEW_FORMS)))


@pytest.mark.parametrize("seed", NEW_SEEDS)
def test_new_form_builds_or_is_refused_by_name(seed):
    prog = F.generate(seed, "new")
    assert prog.form == F.NEW_FORMS[seed % len(F.NEW_FORMS)]
    status, detail = F.build_program(prog)
    assert status in ("ok", "refused"), f"{prog.name}: {detail}\n{prog.source}"


@pytest.mark.gpu
@pytest.mark.parametrize("seed", NEW_SEEDS)
def test_gpu_new_form_matches_its_reference(seed):
    prog = F.generate(seed, "new")
    status, detail = F.run_program(prog, "cuda")
    assert status in ("ok", "refused"), f"{prog.name} {prog.args}: {status} {detail}\n{prog.source}"


# ---- the forms of EXTRA_FORMS (by name only) -------------------------------------------------
# int4_gemm 0: a pipelined 64-row tile whose B copy is element by element (ragged N) into a
# swizzled stage, which named the buffer instead of the stage (NameError in CuTe DSL)
EXTRA_CASES = [(form, seed) for form in F.EXTRA_FORMS for seed in (0, 1, 2)]


@pytest.mark.parametrize("form, seed", EXTRA_CASES)
def test_extra_form_builds_or_is_refused_by_name(form, seed):
    prog = F.generate(seed, form)
    status, detail = F.build_program(prog)
    assert status in ("ok", "refused"), f"{prog.name}: {detail}\n{prog.source}"


@pytest.mark.gpu
@pytest.mark.parametrize("form, seed", EXTRA_CASES)
def test_gpu_extra_form_matches_its_reference(form, seed):
    prog = F.generate(seed, form)
    status, detail = F.run_program(prog, "cuda")
    assert status in ("ok", "refused"), f"{prog.name} {prog.args}: {status} {detail}\n{prog.source}"


# ---- the scalar form: per-thread code over constant-unrolled loops ------------------------------
SCALAR_SEEDS = [0, 1, 2, 3]


def test_scalar_references_wrap_and_count_bits_as_int32():
    # the reference's clz / popcount read an int32's two's complement bits, and casts to
    # narrow types wrap: clz(0) == 32, clz(-1) == 0, popcount(-1) == 32, int8(200) == -56
    import torch
    xs = torch.tensor([0, 1, 5, -1, -8, 200, 70000, -70000, 2 ** 31 - 1, -2 ** 31])
    assert F._clz32(xs).tolist() == [32 - (v & 0xFFFFFFFF).bit_length() for v in xs.tolist()]
    assert F._popc32(xs).tolist() == [bin(v & 0xFFFFFFFF).count("1") for v in xs.tolist()]
    assert F._wrap(xs, "int8").tolist() == xs.to(torch.int8).tolist()
    assert F._wrap(xs, "uint8").tolist() == [v & 255 for v in xs.tolist()]
    assert F._wrap(xs, "int16").tolist() == xs.to(torch.int16).tolist()
    assert F._wrap(xs, "bool").tolist() == [int(v != 0) for v in xs.tolist()]


def test_scalar_form_unrolls_loops_of_python_indices():
    # the form's loops are constant (T.unroll / T.serial, some stepped), and the generated
    # CuTe DSL walks them with range_constexpr: their indices are Python ints there
    progs = F.programs(0, 40, "scalar")
    assert all("tx = T.get_thread_binding()" in p.source for p in progs)
    import re
    assert any(re.search(r"for [ij] in T\.unroll\(\d+, \d+, \d+\):", p.source) for p in progs)  # stepped
    assert any(re.search(r"for [ij] in T\.serial\(\d+\):", p.source) for p in progs)
    src = progs[0].kernel().get_kernel_source()
    assert "cutlass.range_constexpr(" in src


@pytest.mark.parametrize("seed", SCALAR_SEEDS)
def test_scalar_form_builds_or_is_refused_by_name(seed):
    prog = F.generate(seed, "scalar")
    status, detail = F.build_program(prog)
    assert status in ("ok", "refused"), f"{prog.name}: {detail}\n{prog.source}"


@pytest.mark.gpu
@pytest.mark.parametrize("seed", SCALAR_SEEDS)
def test_gpu_scalar_form_matches_its_reference(seed):
    prog = F.generate(seed, "scalar")
    status, detail = F.run_program(prog, "cuda")
    assert status in ("ok", "refused"), f"{prog.name} {prog.args}: {status} {detail}\n{prog.source}"


# ---- dequant, acc_chain, gemm2: packed tiles, accumulator chains, back-to-back GEMMs -------------
FAMILY_SEEDS = [0, 1, 2, 3, 5]


@pytest.mark.parametrize("bits", [4, 2])
@pytest.mark.parametrize("mode", ["u", "zp", "sel", "reint", "i8"])
def test_dequant_reference_unpacks_as_the_frontend_reads_the_expression(bits, mode):
    # the unpacking expression of the dequant form, parsed by tilecute's frontend over a
    # byte and a field position, evaluated at each op's dtype (numpy) for every byte and
    # field, is the reference's unpacking of the same bytes
    import numpy as np
    import torch
    from test_tvm_tirx_dequant import evaluate
    from tilecute.ir import nodes as N
    per, storage = 8 // bits, "int8" if mode == "i8" else "uint8"
    val, pos = N.Var("val", storage), N.Var("pos", "int32")
    expr = eval(F._unpack_expr(mode, "val", "pos", bits), {"T": T, "val": val, "pos": pos})
    raw = np.arange(256).astype(np.uint8)
    data = raw.view(np.int8) if storage == "int8" else raw
    got = evaluate(expr, {"val": np.repeat(data, per), "pos": np.tile(np.arange(per), 256)}).astype(np.int64)
    want = F._unpack_ref(torch.from_numpy(data.copy()).view(1, 256), bits, mode, 1).view(-1)
    assert got.tolist() == want.tolist()
    lo, hi = (0, (1 << bits) - 1) if mode == "u" else (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    assert min(want.tolist()) == lo and max(want.tolist()) == hi


def test_family_generators_cover_their_corners():
    # over 40 seeds each family writes each of its forms (so the GPU runs meet them all)
    deq = [p.source for p in F.programs(0, 40, "dequant")]
    for needle in ["& 0xf)", "& 0x3)", ") - 8)", "def unpack(val, pos):", "T.Cast(dtype, unpack(",
                   "T.if_then_else(((", "T.reinterpret(T.Cast(\"uint8\"",
                   "T.Cast(\"int8\", Bp[", "Sc[bx * bn + i, (k * bk + j) // group]", "T.copy(Bs, Bl)",
                   "Bl[i, j // per]", "Bs[j, i // per]", "T.gemm(Wf, As, acc, transpose_B=True",
                   "T.gemm(Wf2, As", "T.copy(Wf, Ws)", "acc = T.alloc_fragment((bm, bn), \"int32\")",
                   "T.copy(acc, accf)", "Bp: T.Tensor((K, N // per), storage)", "T.gemm(As, Ws, acc, transpose_B=True",
                   "T.gemm(As, Wf, acc", "T.copy(Sc[bx * bn, k * (bk // group)], Ss)", "* Ss[i, j // group]",
                   "Ss = T.alloc_shared((bn, bk // group), sdt)", "Ss = T.alloc_fragment((bn, bk // group), sdt)",
                   "Bs: tilecute.layout.make_swizzled_layout(Bs)", "Ws: tilecute.layout.make_swizzled_layout(Ws)"]:
        assert any(needle in s for s in deq), needle
    assert any("T.gemm(As, Ws, acc" in s and "transpose_B" not in s.split("T.gemm(As, Ws, acc")[1].split("\n")[0]
               for s in deq)
    chain = [p.source for p in F.programs(0, 40, "acc_chain")]
    for needle in ["T.reduce_sum(acc, r", "T.reduce_max(acc, r", "T.reduce_min(acc, r", "T.reduce_absmax(acc, r",
                   "dim=0)", "* v[j]", "T.copy(V[bx * bn:(bx + 1) * bn], v)", "v[j] = V[bx * bn + j]",
                   "u[i] * 3", "[j, i] = acc[i, j]", "[j, bm - 1 - i]", "[(j + 1) % bn, i]", "[i, bn - 1 - j]",
                   "[(i + 3) % bm, j]", "\"int32\")", "% 5)", "T.if_then_else(by * bm + i < m_lim",
                   "if by * bm + i >= m_lim", "m_lim: T.int32", "T.copy(co, C[", "C[by * bm + i, bx * bn + j] = acc"]:
        assert any(needle in s for s in chain), needle
    g2 = [p.source for p in F.programs(0, 40, "gemm2")]
    for needle in ["p = T.alloc_fragment((bm, bn), dtype)", "p = T.alloc_shared((bm, bn), dtype)",
                   "p[j, i] = s[i, j]", "transpose_A=True", "T.gemm(qs, ks, s, transpose_B=True",
                   "T.gemm(qs, ks, s)", "clear_accum=True", "T.clear(s)", "num_stages=3", "T.serial(T.ceildiv(Nk",
                   "T.gemm(p, vs, o, transpose_B=True", "policy=T.GemmWarpPolicy.FullCol", "for d in T.serial(D // bd):"]:
        assert any(needle in s for s in g2), needle
    assert {p.args["threads"] for p in F.programs(0, 40, "gemm2")} == {128, 256}
    assert {p.args["bm"] for p in F.programs(0, 40, "gemm2")} >= {16, 32, 64, 128}


@pytest.mark.parametrize("form", ["dequant", "acc_chain", "gemm2"])
@pytest.mark.parametrize("seed", FAMILY_SEEDS)
def test_family_builds_or_is_refused_by_name(form, seed):
    prog = F.generate(seed, form)
    status, detail = F.build_program(prog)
    assert status in ("ok", "refused"), f"{prog.name}: {detail}\n{prog.source}"
    if status == "refused":
        assert "line" in detail or "main" in detail or prog.name in detail, detail


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["dequant", "acc_chain", "gemm2"])
@pytest.mark.parametrize("seed", FAMILY_SEEDS)
def test_gpu_family_matches_its_reference(form, seed):
    prog = F.generate(seed, form)
    status, detail = F.run_program(prog, "cuda")
    assert status in ("ok", "refused"), f"{prog.name} {prog.args}: {status} {detail}\n{prog.source}"


# ---- found by the fuzzer ---------------------------------------------------------------------
import tilecute  # noqa: E402
import tilecute.language as T  # noqa: E402


@tilecute.jit(out_idx=[1])
def empty_ranges(M=64, N=1, start=2, threads=64):
    """Loops whose constant stop is below their start (T.serial(2, 1), range(N, 0)): no
    iteration, as TileLang lowers them (it drops the loop); tilecute's validator refused them
    as loops over -1 iterations (fuzz seed 345: ``T.serial(start, N, step)`` with N = 1)."""

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), O: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            for t in T.Parallel(M):
                acc = T.alloc_var("float32", init=1)
                for k in T.serial(start, N):
                    acc += A[t, k]
                for k in range(N, 0):
                    acc += A[t, k] * 2.0
                for k in T.unroll(start, N):
                    acc += A[t, k] * 3.0
                O[t] = acc
    return main


def test_loop_with_stop_below_start_has_no_iteration():
    from tilecute.ir import nodes as N
    from tilecute.ir.visitor import walk_stmts
    kernel = empty_ranges()
    assert kernel.ensure_cubin()
    loops = [s for s in walk_stmts(empty_ranges.get_tir().kernels) if isinstance(s, N.For) and s.kind != "parallel"]
    assert all(isinstance(s.extent, N.Const) and s.extent.value == 0 for s in loops)


@pytest.mark.gpu
def test_gpu_loop_with_stop_below_start_has_no_iteration():
    import torch
    a = torch.randn(64, 1, device="cuda")
    assert (empty_ranges()(a) == 1).all()


@tilecute.jit(out_idx=[4])
def gemm_line_atomics(M=64, N=64, K=32, threads=128, policy="FullCol"):
    """Atomics in T.Parallel nests over the (M,) row statistics and an (N,) column scale of
    a T.gemm accumulator: each row's (column's) atomic runs once, as TileLang guards a row's
    to the fragment's replica 0 (fuzz seed 240, gemm + relu + row sums: every thread holding a
    row -- the four lanes of a quad, each warp along N -- added it, 16 times over)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), D: T.Tensor((N,), "float32"),
             R: T.Tensor((M,), "float32"), C: T.Tensor((M, N), "float32"), E: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            a = T.alloc_shared((M, K), "float16")
            b = T.alloc_shared((K, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            rs = T.alloc_fragment((M,), "float32")
            d = T.alloc_fragment((N,), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, acc, clear_accum=True, policy=getattr(T.GemmWarpPolicy, policy))
            for j in T.Parallel(N):
                d[j] = D[j]
            for i, j in T.Parallel(M, N):
                acc[i, j] = acc[i, j] * d[j]
            T.reduce_sum(acc, rs, dim=1)
            for i in T.Parallel(M):
                T.atomic_add(R[i], rs[i])
            for j in T.Parallel(N):
                T.atomic_add(E[j], d[j])
            T.copy(acc, C)
    return main


@pytest.mark.parametrize("policy,threads", [("FullCol", 128), ("FullRow", 256), ("Square", 256)])
def test_atomics_over_row_and_column_fragments_run_once(policy, threads):
    kernel = gemm_line_atomics(threads=threads, policy=policy)
    src = kernel.get_kernel_source()
    lines = src.splitlines()
    at = next(k for k, ln in enumerate(lines) if "tca.atomic_add(R" in ln)
    assert "tcrow.row_owner(" in lines[at - 1], lines[at - 4:at + 1]
    # (the column nest is distributed, one column per thread: no guard)
    at = next(k for k, ln in enumerate(lines) if "tca.atomic_add(E" in ln)
    assert "owner" not in lines[at - 1]
    assert kernel.ensure_cubin()


def test_fuzzed_gemm_row_sums_add_once():
    prog = F.generate(240)
    assert "T.atomic_add(R[by * bm + i], rs[i])" in prog.source
    src = prog.kernel().get_kernel_source()
    lines = src.splitlines()
    at = next(k for k, ln in enumerate(lines) if "tca.atomic_add(R" in ln)
    assert "tcrow.row_owner(" in lines[at - 1]


@pytest.mark.gpu
@pytest.mark.parametrize("policy,threads", [("FullCol", 128), ("FullRow", 256), ("Square", 256)])
def test_gpu_atomics_over_row_and_column_fragments_run_once(policy, threads):
    import torch
    g = torch.Generator().manual_seed(1)
    A = torch.randint(-2, 3, (64, 32), generator=g).half().cuda()
    B = torch.randint(-2, 3, (32, 64), generator=g).half().cuda()
    D = torch.randint(-2, 3, (64,), generator=g).float().cuda()
    R, E = torch.zeros(64, device="cuda"), torch.zeros(64, device="cuda")
    C = gemm_line_atomics(threads=threads, policy=policy)(A, B, D, R, E)
    want = (A.float() @ B.float()) * D
    torch.testing.assert_close(C, want, rtol=0, atol=0)
    torch.testing.assert_close(R, want.sum(1), rtol=0, atol=0)
    torch.testing.assert_close(E, D, rtol=0, atol=0)


@tilecute.jit(out_idx=[2])
def wide_gemm(M=255, N=232, K=32, bm=256, bn=160, bk=32, stages=2, threads=512, policy="FullRow"):
    """A GEMM over a small grid (a producer warpgroup where it fits) whose warpgroups each
    take a wide slice of N: each wgmma instruction holds N / 2 float32 registers a thread
    (fuzz seed 337 of the new forms, 256 x 256 over 512 threads: ptxas stopped with
    'Insufficient registers (96)', needing 154)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((K, N), "bfloat16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            As = T.alloc_shared((bm, bk), "bfloat16")
            Bs = T.alloc_shared((bk, bn), "bfloat16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], As)
                T.copy(B[k * bk, bx * bn], Bs)
                T.gemm(As, Bs, acc, policy=getattr(T.GemmWarpPolicy, policy))
            T.copy(acc, C[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("bm,bn,threads,producer", [(256, 160, 512, False), (192, 256, 384, False),
                                                   (256, 128, 512, True), (128, 256, 256, True)])
def test_wide_wgmma_gets_no_producer_its_registers_cannot_hold(bm, bn, threads, producer):
    # the kernel is compiled at its launch's registers a thread (96 with 512 + 128 threads, 128
    # with 384 + 128), whatever setmaxnreg gives the compute warpgroups: a wgmma of N = 160
    # (80 + 26 registers) or 256 (128 + 26) there stopped ptxas; without the producer (128 /
    # 168) it compiles.  Narrower ones keep their producer.
    kernel = wide_gemm(bm=bm, bn=bn, threads=threads)
    assert kernel.ensure_cubin()
    assert ("setmaxregister" in kernel.get_kernel_source()) == producer


def test_wgmma_over_the_launch_registers_is_refused_by_name():
    from tilecute.transform.select_mma import GemmError
    with pytest.raises(GemmError, match=r"T.gemm\(As, Bs, acc\): each of the 4 warpgroup\(s\) takes 64 x 256 .*"
                                        r"128 float32 registers .* over the 128 a thread of a 512-thread block"):
        wide_gemm(bm=256, bn=256, threads=512).ensure_cubin()
    # (FullCol splits N over the warpgroups: 256 x 64 each, 32 registers)
    assert wide_gemm(bm=256, bn=256, threads=512, policy="FullCol").ensure_cubin()


def test_explicit_producer_that_registers_cannot_hold_is_refused_by_name():
    @T.prim_func
    def main(A: T.Tensor((256, 64), "float16"), B: T.Tensor((64, 160), "float16"), C: T.Tensor((256, 160), "float32")):
        with T.Kernel(1, threads=512) as bx:
            As = T.alloc_shared((256, 32), "float16")
            Bs = T.alloc_shared((32, 160), "float16")
            acc = T.alloc_fragment((256, 160), "float32")
            T.clear(acc)
            for k in T.Pipelined(2, num_stages=2, warp_specialize=True):
                T.copy(A[0, k * 32], As)
                T.copy(B[k * 32, 0], Bs)
                T.gemm(As, Bs, acc, policy=T.GemmWarpPolicy.FullRow)
            T.copy(acc, C)

    from tilecute.transform.pipeline import lower
    from tilecute.transform.warp_specialize import WarpSpecializeError
    with pytest.raises(WarpSpecializeError, match=r"T.gemm\(..., acc\): its wgmma instruction needs about 106 "
                                                  r"registers .* compiled with 96"):
        lower(main, "sm_90a")


@pytest.mark.gpu
@pytest.mark.parametrize("bm,bn,threads", [(256, 160, 512), (192, 256, 384), (256, 128, 512)])
def test_gpu_wide_wgmma(bm, bn, threads):
    import torch
    g = torch.Generator().manual_seed(2)
    A = torch.randint(-2, 3, (255, 32), generator=g).bfloat16().cuda()
    B = torch.randint(-2, 3, (32, 232), generator=g).bfloat16().cuda()
    C = wide_gemm(bm=bm, bn=bn, threads=threads)(A, B)
    torch.testing.assert_close(C, A.float() @ B.float(), rtol=0, atol=0)
