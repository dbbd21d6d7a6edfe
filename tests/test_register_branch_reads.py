"""``T.if_then_else(cond, a, b)`` evaluates only the branch taken (TVM's ``if_then_else``,
a C ternary in TileLang's CUDA), and ``and`` / ``or`` only as far as C's ``&&`` / ``||`` go: a
program may guard a read of a register array (``T.alloc_local``, a fragment every thread
holds whole) or of a shared tile at an index loaded from memory with them.  CuTe's
``select_`` evaluates both operands and its ``and`` / ``or`` every operand, and an index far
outside the array faults (local memory, shared memory): such a read is taken into a
temporary under the condition that reaches it.  Reads at indices proved inside the buffer
(loop variables over its extent) stay where they are."""

import pytest

import tilecute
import tilecute.language as T


@pytest.fixture(autouse=True)
def _arch(monkeypatch):
    monkeypatch.setenv("TILECUTE_ARCH", "sm_90a")


@tilecute.jit(out_idx=[1])
def local_lut_lookup(N=1024):
    """Y[g] = 1.5 * X[g] for X[g] in [0, 4) read from a local table, else -1."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.int32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(N // 128, threads=128) as bx:
            lut = T.alloc_local((4,), T.float32)
            for q in T.serial(4):
                lut[q] = q * 1.5
            tx = T.get_thread_binding()
            v = X[bx * 128 + tx]
            Y[bx * 128 + tx] = T.if_then_else(v >= 0 and v < 4, lut[v], -1.0)

    return main


@tilecute.jit(out_idx=[2])
def fragment_table_lookup(N=1024, E=16):
    """Y[g] = Tab[X[g]] through a fragment every thread holds whole, -1 where X[g] is outside
    [0, 16); Z[g] = Tab[g % 16] + (Tab[15 - g % 16] when g is even) at provable indices."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.int32), Tab: T.Tensor((E,), T.float32), Y: T.Tensor((N, 2), T.float32)):
        with T.Kernel(N // 128, threads=128) as bx:
            t_f = T.alloc_fragment((E,), T.float32)
            T.copy(Tab, t_f)
            for i in T.Parallel(128):
                v = X[bx * 128 + i]
                Y[bx * 128 + i, 0] = T.if_then_else(v >= 0 and v < E, t_f[v], -1.0)
                Y[bx * 128 + i, 1] = t_f[i % E] + T.if_then_else(i % 2 == 0, t_f[E - 1 - i % E], 0.0)

    return main


@tilecute.jit(out_idx=[1])
def short_circuit_register_and_shared(N=1024):
    """Y[g] = 1 where X[g] is in [0, 128) and the shared tile there is positive, plus 10 where
    X[g] is in [0, 4) and the local table there is positive; 100 where X[g] is out of the
    shared tile's range or the tile there is negative (``or``)."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.int32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(N // 128, threads=128) as bx:
            s = T.alloc_shared((128,), T.float32)
            lut = T.alloc_local((4,), T.float32)
            tx = T.get_thread_binding()
            for q in T.serial(4):
                lut[q] = q - 1.5
            s[tx] = tx - 60.5
            T.sync_threads()
            v = X[bx * 128 + tx]
            Y[bx * 128 + tx] = T.if_then_else(v >= 0 and v < 128 and s[v] > 0, 1.0, 0.0)
            if v >= 0 and v < 4 and lut[v] > 0:
                Y[bx * 128 + tx] += 10.0
            if v < 0 or v >= 128 or s[v] < 0:
                Y[bx * 128 + tx] += 100.0

    return main


@tilecute.jit(out_idx=[2])
def read_reached_two_ways(N=1024):
    """Y[g] = 1 where X[g] is in [0, 128) and the shared tile there is positive if F[g] is
    set, negative if not (a bitonic step's compare-and-swap test): ``s[v]`` is reached by two
    ways, the second past ``not (up and s[v] > 0)``, a condition that reads it itself."""

    @T.prim_func
    def main(X: T.Tensor((N,), T.int32), F: T.Tensor((N,), T.int32), Y: T.Tensor((N,), T.float32)):
        with T.Kernel(N // 128, threads=128) as bx:
            s = T.alloc_shared((128,), T.float32)
            tx = T.get_thread_binding()
            s[tx] = tx - 60.5
            T.sync_threads()
            v = X[bx * 128 + tx]
            up = F[bx * 128 + tx] != 0
            if v >= 0 and v < 128 and ((up and s[v] > 0) or (not up and s[v] < 0)):
                Y[bx * 128 + tx] = 1.0
            else:
                Y[bx * 128 + tx] = 0.0

    return main


def _body(kernel):
    src = kernel.get_kernel_source()
    return src.split("\n@cute.kernel\n", 1)[1].split("\n@cute.jit", 1)[0]


def test_local_array_read_only_under_its_branch():
    src = _body(local_lut_lookup())
    assert "if v >= 0 and v < 4:\n        tc_ld1 = lut[v]" in src
    assert "cutlass.select_(v >= 0 and v < 4, tc_ld1, cutlass.Float32(-1.0))" in src
    assert local_lut_lookup().ensure_cubin()


def test_fragment_read_only_under_its_branch():
    src = _body(fragment_table_lookup())
    assert "if v >= 0 and v < 16:\n        tc_ld2 = t_f[v]" in src
    # indices proved inside the fragment are read in place, as before
    assert "cutlass.select_(i % 2 == 0, tcr.pick(t_f, 15 - i % 16, 16), cutlass.Float32(0.0))" in src
    assert "tc_ld3" not in src
    assert fragment_table_lookup().ensure_cubin()


def test_short_circuit_reads_only_where_reached():
    src = _body(short_circuit_register_and_shared())
    assert "if v >= 0 and v < 128:\n        tc_ld1 = s[v]" in src
    assert "cutlass.select_(v >= 0 and v < 128 and tc_ld1 > cutlass.Float32(0.0)" in src
    assert "if v >= 0 and v < 4:\n        tc_ld2 = lut[v]" in src
    assert "if v >= 0 and v < 4 and tc_ld2 > cutlass.Float32(0.0):" in src
    assert "if not v < 0 and not v >= 128:\n        tc_ld3 = s[v]" in src  # or: the operands before it false
    assert "if v < 0 or v >= 128 or tc_ld3 < cutlass.Float32(0.0):" in src
    assert short_circuit_register_and_shared().ensure_cubin()


def test_read_reached_two_ways_is_read_only_where_reached():
    """Each way reads s[v] under its own conditions, the second's reading the temporary the
    first filled (it read s[v] unguarded inside its own guard: out of the tile for v >= 128)."""
    src = _body(read_reached_two_ways())
    assert "if v >= 0 and v < 128 and up:\n        tc_ld1 = s[v]" in src
    assert ("if v >= 0 and v < 128 and not (up and tc_ld1 > cutlass.Float32(0.0)) and not up:\n"
            "        tc_ld1 = s[v]") in src
    assert src.count("s[v]") == 2
    assert read_reached_two_ways().ensure_cubin()


@pytest.mark.gpu
def test_branch_guarded_register_reads_on_gpu():
    import torch
    dev = "cuda"
    x = torch.randint(-6, 10, (1024,), device=dev, dtype=torch.int32)
    x[::7] = 1 << 30  # far outside the tables: must not be read
    x[3::7] = -(1 << 30)
    y = local_lut_lookup()(x)
    ok = (x >= 0) & (x < 4)
    torch.testing.assert_close(y, torch.where(ok, x.float() * 1.5, torch.full_like(y, -1.0)))
    tab = torch.randn(16, device=dev)
    y = fragment_table_lookup()(x, tab)
    ok = (x >= 0) & (x < 16)
    want0 = torch.where(ok, tab[x.clamp(0, 15).long()], torch.full_like(tab[:1].expand(1024), -1.0))
    i = torch.arange(1024, device=dev) % 128
    want1 = tab[i % 16] + torch.where(i % 2 == 0, tab[15 - i % 16], torch.zeros_like(tab[i % 16]))
    torch.testing.assert_close(y, torch.stack([want0, want1], 1))
    y = short_circuit_register_and_shared()(x)
    sv = torch.arange(128, device=dev).float() - 60.5
    lv = torch.arange(4, device=dev).float() - 1.5
    in_s = (x >= 0) & (x < 128)
    in_l = (x >= 0) & (x < 4)
    s_at = sv[x.clamp(0, 127).long()]
    l_at = lv[x.clamp(0, 3).long()]
    want = (in_s & (s_at > 0)).float() + 10 * (in_l & (l_at > 0)).float() + 100 * (~in_s | (s_at < 0)).float()
    torch.testing.assert_close(y, want)
    f = (torch.arange(1024, device=dev) % 3 == 0).to(torch.int32)
    y = read_reached_two_ways()(x, f)
    want = in_s & torch.where(f != 0, s_at > 0, s_at < 0)
    torch.testing.assert_close(y, want.float())
