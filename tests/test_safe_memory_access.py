"""Every global access of a kernel is bounds-checked unless proved in bounds, as TileLang's
LegalizeSafeMemoryAccess does over the whole function (not only inside T.Parallel nests):
an out-of-bounds load reads 0, an out-of-bounds store or atomic is skipped, an atomic with
a result returns 0 there (codegen/bounds.py; docs/ir.md, "Bounds predication").  These
check the generated CuTe DSL: the guard where an access is not proved, none where it is
(ranges of block, thread and loop variables, symbolic loop extents, lets, enclosing ifs)."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.transform.pipeline import lower


def _kernel(func) -> str:
    src = emit_cute(lower(func, "sm_90a"))
    return src[src.index("\n@cute.kernel"):src.index("\n@cute.jit")]


def _guarded_load(src: str, cond: str, load: str) -> bool:
    """``tc_ldN = <type>(0)`` then ``if <cond>: tc_ldN = <load>`` (regexes)."""
    return re.search(rf"\n( +)(tc_ld\d+) = cutlass\.\w+\(0\)\n\1if {cond}:\n\1    \2 = {load}\n",
                     src) is not None


# ---- programs ------------------------------------------------------------------------------------
def top_level(n=1000):
    """One element per thread at the kernel's top level (no loop): Y[g] = X[g] * 2."""

    @T.prim_func
    def top(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            g = bx * 128 + T.get_thread_binding()
            Y[g] = X[g] * 2.0
    return top


def shifted(n=1024, shift=1):
    """Y[g] = X[g + shift] * 2 at the top level: past the end (or below the start)."""

    @T.prim_func
    def shift_read(X: T.Tensor((n,), T.float32), Y: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            g = bx * 128 + T.get_thread_binding()
            Y[g] = X[g + shift] * 2.0
    return shift_read


def row_loops(width=4, kind="unroll"):
    """Per thread of a row block: the sum of ``width`` elements from its column on (past the
    row's end at the last columns), in a T.unroll, T.vectorized or T.serial loop; and the
    column sum over all rows in a T.serial loop of the symbolic extent ``n`` (proved)."""
    n = T.symbolic("n")
    loop = {"unroll": T.unroll, "vectorized": T.vectorized, "serial": T.serial}[kind]

    @T.prim_func
    def rows(X: T.Tensor((n, 64), T.float32), Y: T.Tensor((n, 64), T.float32),
             S: T.Tensor((64,), T.float32)):
        with T.Kernel(n, threads=64) as b:
            t = T.get_thread_binding()
            acc = T.alloc_var(T.float32)
            acc = 0.0
            for u in loop(width):
                acc += X[b, t + u]
            Y[b, t] = acc
            if b == 0:
                col = T.alloc_var(T.float32)
                col = 0.0
                for k in T.serial(n):
                    col += X[k, t]
                S[t] = col
    return rows


def pipelined_table(proved=False):
    """A page table read in a pipelined loop, outside its tile ops: the step count is a
    scalar parameter (``steps``), unrelated to the table's width, or (``proved``) the
    width itself."""
    batch, pages, width = T.symbolic("batch"), T.symbolic("pages"), T.symbolic("width")

    if proved:
        @T.prim_func
        def paged(K: T.Tensor((pages, 16, 64), T.float16), table: T.Tensor((batch, width), T.int32),
                  O: T.Tensor((batch, 16, 64), T.float32)):
            with T.Kernel(batch, threads=128) as b:
                K_s = T.alloc_shared((16, 64), T.float16)
                acc = T.alloc_fragment((16, 64), T.float32)
                T.clear(acc)
                for k in T.Pipelined(width, num_stages=2):
                    page = table[b, k]
                    T.copy(K[page, :, :], K_s)
                    for i, j in T.Parallel(16, 64):
                        acc[i, j] += K_s[i, j]
                T.copy(acc, O[b, :, :])
        return paged

    @T.prim_func
    def paged_steps(K: T.Tensor((pages, 16, 64), T.float16), table: T.Tensor((batch, width), T.int32),
                    O: T.Tensor((batch, 16, 64), T.float32), steps: T.int32):
        with T.Kernel(batch, threads=128) as b:
            K_s = T.alloc_shared((16, 64), T.float16)
            acc = T.alloc_fragment((16, 64), T.float32)
            T.clear(acc)
            for k in T.Pipelined(steps, num_stages=2):
                page = table[b, k]
                T.copy(K[page, :, :], K_s)
                for i, j in T.Parallel(16, 64):
                    acc[i, j] += K_s[i, j]
            T.copy(acc, O[b, :, :])
    return paged_steps


def facts_and_constants():
    """Reads an enclosing ``if`` proves (``if g < n``), a constant index (not checked, as in
    TileLang), a stepped loop (``T.serial(t, K, 32)``: ``k < K``), a loop whose extent is
    read from memory (the read bounds-checked before the loop)."""
    n, m = T.symbolic("n"), T.symbolic("m")

    @T.prim_func
    def facts(X: T.Tensor((n,), T.float32), Lens: T.Tensor((m,), T.int32),
              A: T.Tensor(((n + 31) // 32, 100), T.float32), Y: T.Tensor((n,), T.float32)):
        with T.Kernel(T.ceildiv(n, 32), threads=32) as bx:
            t = T.get_thread_binding()
            g = bx * 32 + t
            if g < n:
                Y[g] = X[g] + X[0]
            part = T.alloc_var(T.float32)
            part = 0.0
            for k in T.serial(t, 100, 32):
                part += A[bx, k]
            for r in T.serial(Lens[bx]):
                part += A[bx, r]
            if bx < n:
                Y[bx] = part
    return facts


def atomic_slots(n=500):
    """Each thread takes a ticket (an atomic with its old value) and writes its id at that
    slot, then a counted slot (``T.atomic_add`` with ``return_prev``) of a table indexed by
    the ticket: neither index is known."""

    @T.prim_func
    def slots(Cnt: T.Tensor((1,), T.int32), Slots: T.Tensor((n,), T.int32),
              Hits: T.Tensor((n,), T.int32), Old: T.Tensor((n,), T.int32)):
        with T.Kernel(T.ceildiv(n, 128), threads=128) as bx:
            g = bx * 128 + T.get_thread_binding()
            ticket = T.atomic_add(Cnt[0], 1, return_prev=True)
            Slots[ticket] = g
            Old[ticket] = T.atomic_add(Hits[ticket], 1, return_prev=True)
    return slots


# ---- the guards --------------------------------------------------------------------------------
def test_top_level_access_not_proved_is_guarded():
    """8 blocks of 128 threads over 1000 elements: g reaches 1023.  The load reads 0 past
    the end, the store is skipped; over 1024 elements both are proved and unguarded."""
    src = _kernel(top_level(1000))
    assert _guarded_load(src, r"g < 1000", r"X\[g\]"), src
    assert re.search(r"\n( +)if g < 1000:\n\1    Y\[g\] = tc_ld\d+ \* cutlass\.Float32\(2\.0\)\n", src), src
    src = _kernel(top_level(1024))
    assert "Y[g] = X[g] * cutlass.Float32(2.0)" in src and "tc_ld" not in src, src


def test_top_level_read_below_the_start_is_guarded():
    src = _kernel(shifted(1024, shift=-1))
    assert _guarded_load(src, r"g \+ -1 >= 0", r"X\[g \+ -1\]"), src
    src = _kernel(shifted(1024, shift=1))
    assert _guarded_load(src, r"g \+ 1 < 1024", r"X\[g \+ 1\]"), src
    assert re.search(r"\n +Y\[g\] = tc_ld\d+ \* ", src), src  # (the store is in bounds)


@pytest.mark.parametrize("kind", ["unroll", "vectorized", "serial"])
def test_row_loop_reads_past_the_row_are_guarded(kind):
    """t + u reaches 66 of 64 columns; b < n (a block index over a grid of n) and the
    serial loop's k < n (its extent) are proved, as TileLang's analyzer proves them."""
    src = _kernel(row_loops(4, kind))
    assert _guarded_load(src, r"t \+ u < 64", r"X\[b, t \+ u\]"), src
    assert "X[k, t]" in src and not re.search(r"if [^\n]*k < n", src), src
    assert not re.search(r"if [^\n]*\bb < n", src), src
    assert "Y[b, t] = acc[0]" in src, src  # (t < 64 from the thread count)


def test_row_loop_reads_within_the_row_are_unguarded():
    src = _kernel(row_loops(1, "unroll"))
    assert "tc_ld" not in src and "acc[0] + X[b, t + 0]" in src, src  # (one step: u is 0)


def test_pipelined_table_read_not_proved_is_guarded():
    """The page-table read of each step: k < steps says nothing of k < width."""
    src = _kernel(pipelined_table(proved=False))
    assert _guarded_load(src, r"k < width", r"table\[b, k\]"), src
    src = _kernel(pipelined_table(proved=True))
    assert "page = table[b, k]" in src and "tc_ld" not in src, src


def test_if_constant_index_stepped_loop_and_loaded_extent():
    src = _kernel(facts_and_constants())
    assert "Y[g] = X[g] + X[0]" in src, src  # the if proves g < n; X[0] is not checked
    assert "part[0] + A[bx, k]" in src, src  # k < 100 (t + 32 * steps), bx < (n + 31) // 32, the grid
    # the extent's read is checked once, before the loop; r < Lens[bx] says nothing of 100
    assert re.search(r"\n( +)(tc_ld\d+) = cutlass\.Int32\(0\)\n\1if bx < m:\n\1    \2 = Lens\[bx\]\n"
                     r"\1for r in cutlass\.range\(0, \2\):\n", src), src
    assert _guarded_load(src, r"r < 100", r"A\[bx, r\]"), src
    assert re.search(r"\n( +)if bx < n:\n\1    Y\[bx\] = part\[0\]\n", src), src


def test_atomic_with_a_result_runs_only_in_bounds():
    """The ticket's atomic (Cnt[0]) is in bounds; the slot's store and the counted atomic at
    an unknown index are guarded: the atomic returns 0 where skipped (TileLang's
    ``if_then_else(in_bounds, atomic, 0)``), and its element is not read as a plain load."""
    src = _kernel(atomic_slots())
    assert re.search(r"ticket = tca\.atomic_fetch\(Cnt, \(0,\), 1, \"add\"\)", src), src
    assert re.search(r"\n( +)if ticket >= 0 and ticket < 500:\n\1    Slots\[ticket\] = g\n", src), src
    m = re.search(r"\n( +)(tc_at\d+) = cutlass\.Int32\(0\)\n\1if ticket >= 0 and ticket < 500:\n"
                  r"\1    \2 = tca\.atomic_fetch\(Hits, \(ticket,\), 1, \"add\"\)\n", src)
    assert m, src
    assert f"Old[ticket] = {m.group(2)}" in src and "= Hits[" not in src, src


def test_while_condition_read_is_checked_each_round():
    """``while p < N and A[r, p] <= Th[r]``: p is a variable, so A[r, p] is checked; the
    condition is computed before the loop and again at the end of its body."""
    import unseen_programs6 as P
    src = _kernel(P.while_first_above())
    m = re.search(r"\n( +)(tc_more\d+) = p\[0\] < 100 and (tc_ld\d+) <= Th\[r\]\n\1while \2:\n", src)
    assert m, src
    body = src[m.end():]
    assert re.search(rf"\n {{{len(m.group(1)) + 4}}}{m.group(2)} = p\[0\] < 100 and tc_ld\d+ <= Th\[r\]\n",
                     body), src
    assert _guarded_load(src, r"p\[0\] >= 0 and p\[0\] < 100", r"A\[r, p\[0\]\]"), src


def test_serial_window_program_is_guarded():
    """tests/unseen_programs6.py's window in serial loops: A[r, c + w] past the row's end."""
    import unseen_programs6 as P
    src = _kernel(P.window_sum_zero_padding(parallel=False))
    assert _guarded_load(src, r"c \+ w < 40", r"A\[r, c \+ w\]"), src


@pytest.mark.parametrize("func", [lambda: top_level(1000), lambda: row_loops(4, "vectorized"),
                                  lambda: pipelined_table(False), facts_and_constants,
                                  atomic_slots],
                         ids=["top_level", "vectorized", "pipelined", "facts", "atomics"])
def test_builds_a_cubin(func, tmp_path):
    assert tilecute.build_cubin(func(), "sm_90a", out_dir=str(tmp_path)).kernel_names


# ---- on the GPU ------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["unroll", "vectorized", "serial"])
def test_row_loops_read_zero_past_the_end_on_gpu(kind):
    import torch
    n = 5
    x = torch.randn(n + 1, 64, device="cuda")[:n]  # (reads past row n - 1 stay in the allocation)
    y = torch.empty_like(x)
    s = torch.empty(64, device="cuda")
    tilecute.compile(row_loops(4, kind))(x, y, s)
    z = torch.nn.functional.pad(x, (0, 3))
    torch.testing.assert_close(y, sum(z[:, u:u + 64] for u in range(4)))
    torch.testing.assert_close(s, x.sum(0))


@pytest.mark.gpu
def test_top_level_reads_zero_past_the_end_on_gpu():
    import torch
    x = torch.randn(1001, device="cuda")[:1000]
    y = torch.full((1000,), 7.0, device="cuda")
    tilecute.compile(shifted(1000, shift=1))(x, y)
    want = torch.cat([x[1:], torch.zeros(1, device="cuda")]) * 2
    torch.testing.assert_close(y, want)


@pytest.mark.gpu
def test_atomic_slots_on_gpu():
    import torch
    cnt = torch.zeros(1, dtype=torch.int32, device="cuda")
    slots = torch.full((500,), -1, dtype=torch.int32, device="cuda")
    hits = torch.zeros(500, dtype=torch.int32, device="cuda")
    old = torch.full((500,), -1, dtype=torch.int32, device="cuda")
    tilecute.compile(atomic_slots())(cnt, slots, hits, old)
    assert int(cnt) == 512  # every thread of the 4 blocks took a ticket (0..511)
    assert len(set(slots.tolist())) == 500 and min(slots.tolist()) >= 0  # 500 distinct ids
    assert hits.tolist() == [1] * 500 and old.tolist() == [0] * 500
