"""Programs in TileLang's idioms that no other test was written against
(tests/unseen_programs.py): each builds to an sm_90a cubin on the CPU, and on a GPU
matches torch.  Also the fixes they led to: a reduction of a replicated fragment (the
output of an earlier reduction) is folded by each thread; ``T.atomic_add/max/min(...,
return_prev=True)`` in an expression returns the element's old value; Python's ``break``
and ``continue`` in serial loops."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.printer import print_func
from tilecute.ir.visitor import walk_nodes, walk_stmts
from tilecute.language import FrontendError
from tilecute.transform.pipeline import run_passes

import rounds
import unseen_programs as P

PROGRAMS = ["scale_add_2d", "relu_bf16_tiles", "softmax_rows", "layernorm", "rmsnorm_chunked",
            "online_max_absmax", "column_sum", "row_dot_scalars", "first_negative",
            "masked_rows_dynamic", "padded_tile_symbolic", "batched_mean_symbolic",
            "splitk_gemm", "gemm_trans_a_fullrow", "gemm_nt_swizzle_fullcol",
            "gemm_bf16_order_stage", "dequant_int8_gemm", "copy_unit_dims", "cumsum_rows",
            "fill_and_cast", "total_of_row_sums", "ticket_slots", "skip_and_stop"]


_arch = rounds.use_arch("TILECUTE_ARCH")
test_program_builds_a_cubin = rounds.builds_sm90a_cubins(PROGRAMS, rounds.kernel_of(P))


def test_tile_atomic_split_k_builds(tmp_path):
    info = tilecute.build_cubin(P.splitk_gemm(tile_atomic=True), "sm_90a", out_dir=str(tmp_path))
    assert info.kernel_names == ["tilecute_splitk_0"]


def test_jit_out_idx_factories_build():
    k = P.jit_matmul(256, 256, 256)
    assert [a.name for a in k.abi.args] == ["A", "B", "C"]
    assert k.ensure_cubin()
    stats = P.jit_row_stats(256, 128)
    assert stats.ensure_cubin()


# ---- a reduction of a replicated fragment ---------------------------------------------------
def test_reduction_of_a_reduction_is_folded_by_each_thread():
    """``T.reduce_sum(row_sums, total, dim=0)``: ``row_sums`` is the output of a reduction,
    which every thread holds whole, so the second reduction is a nest over ``total``
    folding ``row_sums`` in an unrolled loop, run whole on every thread (it used to be a
    LayoutError: 'row_sums' is replicated)."""
    func = run_passes(P.total_of_row_sums(), "sm_90a", until="infer_layouts")
    text = print_func(func)
    body = func.kernels[0].body
    reduces = [s for s in walk_stmts(body) if isinstance(s, N.Reduce)]
    assert [(r.src, r.dst) for r in reduces] == [("x", "row_sums")], text
    fold = text[text.index("T.reduce_sum(x, row_sums"):].splitlines()[1:5]
    assert [line.strip() for line in fold] == [
        "for i4 in T.Parallel(1, vector_width=1, replicated=True):",
        "total[i4] = T.float32(0.0)",
        "for k5 in T.unroll(128):",
        "total[i4] = total[i4] + row_sums[k5]"], text
    assert 'total = T.alloc_fragment((1,), "float32", layout=T.Layout("replicated"))' in text, text


def test_a_folded_max_keeps_clear_false():
    """clear=False: the fold starts from what the destination holds (no identity store)."""
    @T.prim_func
    def running(X: T.Tensor((4, 32, 16), "float32"), M: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=128) as _:
            x = T.alloc_fragment((32, 16), "float32")
            rows = T.alloc_fragment((32,), "float32")
            best = T.alloc_fragment((1,), "float32")
            T.fill(best, -T.infinity("float32"))
            for c in T.serial(4):
                T.copy(X[c, :, :], x)
                T.reduce_max(x, rows, dim=1)
                T.reduce_max(rows, best, dim=0, clear=False)
            M[0] = best[0]

    text = print_func(run_passes(running, "sm_90a", until="infer_layouts"))
    fold = [line.strip() for line in text[text.index("T.reduce_max(x, rows"):].splitlines()[1:4]]
    assert fold[0].endswith("in T.Parallel(1, vector_width=1, replicated=True):"), text
    assert fold[1].startswith("for k") and fold[1].endswith("in T.unroll(32):"), text
    assert fold[2].startswith("best[") and "T.max(best[" in fold[2] and "rows[k" in fold[2], text


# ---- T.atomic_*(..., return_prev=True) -------------------------------------------------------
def test_return_prev_is_an_atomic_call_that_prints_and_reads_back():
    func = P.ticket_slots()
    calls = [n for n in walk_nodes(func) if isinstance(n, N.Call) and n.name in N.ATOMIC_RETURNS]
    assert [(c.name, c.dtype) for c in calls] == [("atomic_add_ret", "int32"),
                                                  ("atomic_max_ret", "float32")]
    text = print_func(func)
    assert "ticket = T.atomic_add(counter[0], 1, return_prev=True)" in text, text
    assert "T.atomic_max(best[0], X[g], return_prev=True)" in text, text
    assert T.from_script(text) == func


def test_return_prev_generates_atom_calls(tmp_path):
    tilecute.build_cubin(P.ticket_slots(), "sm_90a", out_dir=str(tmp_path))
    src = (tmp_path / "kernel_cute.py").read_text()
    assert 'ticket = tca.atomic_fetch(counter, (0,), 1, "add")' in src, src
    assert 'tca.atomic_fetch(best, (0,), X[g], "max")' in src, src


def test_return_prev_on_a_shared_element(tmp_path):
    """A shared counter's old value (a block's compaction cursor, a radix top-k's bucket
    positions): ``atom.relaxed.cta.shared`` at the element's offset; the element counts as
    written, so a later read of the buffer waits at a barrier (it was refused: 'S' is a
    shared buffer)."""
    import unseen_programs2 as P2
    func = P2.compact_positive()
    tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path))
    src = (tmp_path / "kernel_cute.py").read_text()
    assert 'slot[0] = tca.atomic_fetch(n, 0, 1, "add")' in src, src
    ticket = T.from_script("""
@T.prim_func
def ticket(Out: T.Tensor((128,), "int32")):
    with T.Kernel(1, threads=128) as _:
        n = T.alloc_shared((1,), "int32")
        tx = T.get_thread_binding()
        slot = T.alloc_var("int32")
        slot = T.atomic_add(n[0], 1, return_prev=True)
        Out[tx] = slot + n[0]
""")
    body = run_passes(ticket, "sm_90a", until="insert_barriers").kernels[0].body
    kinds = [type(s).__name__ for s in body if not isinstance(s, (N.Allocate, N.Let))]
    assert kinds[-3:] == ["Store", "Barrier", "Store"], kinds  # the atomic, then the read


def test_return_prev_as_a_statement_is_the_plain_atomic():
    @T.prim_func
    def bump(counter: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=32) as _:
            T.atomic_add(counter[0], 1, return_prev=True)

    [s] = [s for s in walk_stmts(bump.kernels[0].body) if isinstance(s, N.AtomicAdd)]
    assert s.op == "add" and s.dst.buffer == "counter"


@pytest.mark.parametrize("stmt,message", [
    ("v = T.atomic_add(L[0], 1.0, return_prev=True)",
     "T.atomic_add: return_prev=True: 'L' is a local buffer"),
    ("v = T.atomic_max(H[0], 1.0, return_prev=True)", "T.atomic_max: return_prev=True: 'H' is float64"),
    ("v = T.atomic_max(C[0], 1, return_prev=True, memory_order=\"acq\")",
     "T.atomic_max: memory_order='acq' is not a memory order"),
    ("v = T.atomic_add(C[0], 1)", "T.atomic_add: returns a value only with return_prev=True"),
    ("v = T.atomic_add(C[0:4], 1, return_prev=True)", "T.atomic_add: return_prev=True takes one element"),
])
def test_return_prev_refusals_name_the_argument_and_line(stmt, message):
    text = f"""import tilecute.language as T


@T.prim_func
def k(C: T.Tensor((4,), "int32"), H: T.Tensor((4,), "float64")):
    with T.Kernel(1, threads=32) as _:
        L = T.alloc_local((4,), "float32")
        {stmt}
        C[1] = 0
"""
    with pytest.raises(FrontendError) as e:
        T.from_script(text)
    assert message in str(e.value) and "<script>:8:" in str(e.value), str(e.value)


# ---- break / continue --------------------------------------------------------------------------
def test_continue_guards_the_rest_of_the_iteration_and_break_leaves():
    text = print_func(P.skip_and_stop())
    want = """            skipped[0] = 0
            if A[r, k] < 0:
                skipped[0] = 1
            if skipped[0] == 0:
                if A[r, k] > 100:
                    broke[0] = 1
                if broke[0] == 0:
                    total[0] = total[0] + A[r, k]
            k_it[0] = k_it[0] + 1"""
    assert want in text, text
    assert "while k_it[0] < 64 and broke[0] == 0:" in text, text


def test_continue_in_a_while_loop():
    @T.prim_func
    def odd_sum(A: T.Tensor((32,), "int32"), B: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=32) as _:
            i = T.alloc_var("int32")
            s = T.alloc_var("int32")
            i = 0
            s = 0
            while i < 32:
                i += 1
                if i % 2 == 0:
                    continue
                s += A[i - 1]
            if T.get_thread_binding() == 0:
                B[0] = s

    text = print_func(odd_sum)
    want = """        while i[0] < 32:
            skipped[0] = 0
            i[0] = i[0] + 1
            if i[0] % 2 == 0:
                skipped[0] = 1
            if skipped[0] == 0:
                s[0] = s[0] + A[i[0] - 1]"""
    assert want in text, text


@pytest.mark.parametrize("loop,message", [
    ("for i in T.Pipelined(4, num_stages=2):", "`continue` inside a pipelined loop"),
    ("if True:", "`continue` outside a loop"),
])
def test_continue_outside_a_serial_loop_is_refused_at_its_line(loop, message):
    text = f"""import tilecute.language as T


@T.prim_func
def k(A: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=32) as _:
        {loop}
            continue
"""
    with pytest.raises(FrontendError) as e:
        T.from_script(text)
    assert message in str(e.value) and "<script>:8:" in str(e.value), str(e.value)


# ---- on the GPU ------------------------------------------------------------------------------
def _cuda(*shape, dtype=None):
    import torch
    t = torch.randn(*shape, device="cuda")
    return t.to(dtype) if dtype is not None else t


def _close(got, want, atol=1e-2, rtol=1e-2):
    rounds.close_on_cpu(got, want, atol, rtol)


_run = rounds.run


@pytest.mark.gpu
def test_elementwise_programs_on_gpu():
    import torch
    a, b = _cuda(1000, 500, dtype=torch.float16), _cuda(1000, 500, dtype=torch.float16)
    c = torch.empty(1000, 500, device="cuda")
    _run(P.scale_add_2d(), a, b, c)
    _close(c, a.float() * 2 + b.float())
    x = _cuda(512, 1024, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    _run(P.relu_bf16_tiles(), x, y)
    _close(y, torch.relu(x.float()))
    x = _cuda(256, 256)
    y16, z = torch.empty(256, 256, device="cuda", dtype=torch.float16), \
        torch.empty(256, 256, device="cuda", dtype=torch.bfloat16)
    _run(P.fill_and_cast(), x, y16, z)
    want_a = (torch.full_like(x, 1.5).bfloat16() + x.bfloat16())
    _close(z, want_a, atol=0, rtol=0)
    _close(y16, want_a.float().half(), atol=0, rtol=0)


@pytest.mark.gpu
def test_row_normalizations_on_gpu():
    import torch
    x = _cuda(256, 256, dtype=torch.float16)
    y = torch.empty_like(x)
    _run(P.softmax_rows(), x, y)
    _close(y, torch.softmax(x.float(), dim=1), atol=2e-3)
    x = _cuda(128, 512, dtype=torch.bfloat16)
    w, bias = _cuda(512), _cuda(512)
    y = torch.empty_like(x)
    _run(P.layernorm(), x, w, bias, y)
    _close(y, torch.nn.functional.layer_norm(x.float(), (512,), w, bias, eps=1e-5), atol=5e-2)
    x = _cuda(64, 2048, dtype=torch.float16)
    w = _cuda(2048, dtype=torch.float16)
    y = torch.empty_like(x)
    _run(P.rmsnorm_chunked(), x, w, y)
    xf = x.float()
    want = (xf * torch.rsqrt(xf.pow(2).mean(dim=1, keepdim=True) + 1e-6)).half().float() * w.float()
    _close(y, want, atol=3e-2, rtol=3e-2)


@pytest.mark.gpu
def test_reductions_on_gpu():
    import torch
    x = _cuda(128, 1024)
    mx, am = torch.empty(128, device="cuda"), torch.empty(128, 8, device="cuda")
    _run(P.online_max_absmax(), x, mx, am)
    _close(mx, x.max(dim=1).values, atol=0, rtol=0)
    _close(am, x.view(128, 8, 128).abs().amax(dim=2), atol=0, rtol=0)
    x = _cuda(256, 256)
    s = torch.zeros(256, device="cuda")
    _run(P.column_sum(), x, s)
    _close(s, x.sum(dim=0), atol=1e-3, rtol=1e-4)
    x = _cuda(128, 64)
    total = torch.empty(1, device="cuda")
    _run(P.total_of_row_sums(), x, total)
    _close(total, x.sum().reshape(1), atol=1e-3, rtol=1e-4)
    mx, sm = P.jit_row_stats(256, 128)(x := _cuda(256, 128))
    _close(mx, x.max(dim=1).values, atol=0, rtol=0)
    _close(sm, x.sum(dim=1), atol=1e-3, rtol=1e-4)


@pytest.mark.gpu
def test_scalar_programs_on_gpu():
    import torch
    a, b = _cuda(1000, 64), _cuda(1000, 64)
    out = torch.empty(1000, device="cuda")
    _run(P.row_dot_scalars(), a, b, out)
    _close(out, (a * b).sum(dim=1), atol=1e-4, rtol=1e-4)
    x = _cuda(512, 300) + 2.5
    idx = torch.empty(512, device="cuda", dtype=torch.int32)
    _run(P.first_negative(), x, idx)
    neg = x < 0
    want = torch.where(neg.any(dim=1), neg.int().argmax(dim=1), torch.full_like(idx, -1))
    assert torch.equal(idx.cpu(), want.int().cpu())


@pytest.mark.gpu
def test_symbolic_shapes_on_gpu():
    import torch
    kernel = tilecute.compile(P.masked_rows_dynamic())
    for m, n in ((3, 700), (17, 256)):
        x = _cuda(m, n, dtype=torch.float16)
        lens = torch.randint(0, n + 1, (m,), device="cuda", dtype=torch.int32)
        y = torch.full_like(x, 7)
        kernel(x, lens, y)
        keep = torch.arange(n, device="cuda")[None, :] < lens[:, None]
        _close(y, torch.where(keep, x * 2, torch.zeros_like(x)), atol=0, rtol=0)
    kernel = tilecute.compile(P.padded_tile_symbolic())
    for n in (1, 100, 256):
        x, s = _cuda(n, 64), torch.empty(n, device="cuda")
        kernel(x, s)
        _close(s, x.sum(dim=1), atol=1e-4, rtol=1e-4)
    kernel = tilecute.compile(P.batched_mean_symbolic())
    x = _cuda(3, 256, 128, dtype=torch.float16)
    out = torch.empty(3, 128, device="cuda")
    kernel(x, out)
    _close(out, x.float().mean(dim=1), atol=1e-3, rtol=1e-3)


@pytest.mark.gpu
def test_gemm_programs_on_gpu():
    import torch
    a, b = _cuda(256, 1024, dtype=torch.float16), _cuda(1024, 256, dtype=torch.float16)
    want = a.float() @ b.float()
    for tile_atomic in (False, True):
        c = torch.zeros(256, 256, device="cuda")
        _run(P.splitk_gemm(tile_atomic=tile_atomic), a, b, c)
        _close(c, want, atol=5e-2, rtol=1e-2)
    at, b = _cuda(256, 256, dtype=torch.float16), _cuda(256, 256, dtype=torch.float16)
    c = torch.empty(256, 256, device="cuda", dtype=torch.float16)
    _run(P.gemm_trans_a_fullrow(), at, b, c)
    _close(c, at.float().T @ b.float(), atol=5e-2)
    a, bt = _cuda(512, 512, dtype=torch.float16), _cuda(512, 512, dtype=torch.float16)
    c = torch.empty(512, 512, device="cuda", dtype=torch.float16)
    _run(P.gemm_nt_swizzle_fullcol(), a, bt, c)
    _close(c, a.float() @ bt.float().T, atol=1e-1)
    a, b = _cuda(256, 512, dtype=torch.bfloat16), _cuda(512, 256, dtype=torch.bfloat16)
    bias = _cuda(256)
    for order, stage in (((0, 1, 2), (0, 0, 1)), ((0, 1, 2), (0, 0, 2))):
        c = torch.empty(256, 256, device="cuda", dtype=torch.bfloat16)
        _run(P.gemm_bf16_order_stage(order=order, stage=stage), a, b, bias, c)
        _close(c, torch.relu(a.float() @ b.float() + bias), atol=2e-1, rtol=2e-2)
    a = _cuda(128, 256, dtype=torch.float16)
    bq = torch.randint(-128, 128, (256, 256), device="cuda", dtype=torch.int8)
    scale = (torch.rand(256, device="cuda") * 0.02).half()
    c = torch.empty(128, 256, device="cuda")
    _run(P.dequant_int8_gemm(), a, bq, scale, c)
    _close(c, a.float() @ (bq.half() * scale).float(), atol=5e-2, rtol=1e-2)
    a, b = _cuda(256, 256, dtype=torch.float16), _cuda(256, 256, dtype=torch.float16)
    c = P.jit_matmul(256, 256, 256)(a, b)
    _close(c, a.float() @ b.float(), atol=1e-1)


@pytest.mark.gpu
def test_return_prev_on_gpu():
    import torch
    counter = torch.zeros(1, device="cuda", dtype=torch.int32)
    slots = torch.full((512,), -1, device="cuda", dtype=torch.int32)
    best = torch.full((1,), -1e30, device="cuda")
    x, seen = _cuda(512), torch.empty(512, device="cuda")
    _run(P.ticket_slots(), counter, slots, best, x, seen)
    assert counter.item() == 512
    assert torch.equal(slots.sort().values.cpu(), torch.arange(512, dtype=torch.int32))
    assert best.item() == x.max().item()
    # exactly one thread saw the starting value; every other a maximum of earlier ones
    assert int((seen == -1e30).sum()) == 1 and bool((seen <= x.max()).all())


@pytest.mark.gpu
def test_break_and_continue_on_gpu():
    import torch
    a = torch.randint(-50, 120, (128, 64), device="cuda", dtype=torch.int32)
    b = torch.empty(128, device="cuda", dtype=torch.int32)
    _run(P.skip_and_stop(), a, b)
    want = []
    for row in a.cpu().tolist():
        t = 0
        for v in row:
            if v < 0:
                continue
            if v > 100:
                break
            t += v
        want.append(t)
    assert b.cpu().tolist() == want


@pytest.mark.gpu
def test_copies_and_scans_on_gpu():
    import torch
    x = _cuda(4, 128, 64, dtype=torch.float16)
    first, y = torch.empty(4, 64, device="cuda", dtype=torch.float16), torch.empty_like(x)
    _run(P.copy_unit_dims(), x, first, y)
    _close(first, x[:, 0, :], atol=0, rtol=0)
    _close(y, x - x[:, :1, :], atol=0, rtol=0)
    x = _cuda(64, 128)
    fwd, rev = torch.empty_like(x), torch.empty_like(x)
    _run(P.cumsum_rows(), x, fwd, rev)
    _close(fwd, x.cumsum(dim=1), atol=1e-4, rtol=1e-4)
    _close(rev, x.flip(1).cumsum(dim=1).flip(1), atol=1e-4, rtol=1e-4)
