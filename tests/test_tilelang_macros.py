"""TileLang's macro parameter annotations (``T.SharedBuffer``, ``T.FragmentBuffer``,
``T.LocalBuffer``) and ``T.grid``, as TileLang's attention examples write them: a macro
per step of the loop, its parameters annotated with the buffers' scopes."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.language import FrontendError


def _attention_step_program(bm=64, bn=64, d=64):
    """One query tile against one key tile, its steps as annotated macros."""

    @T.macro
    def qk(Q_s: T.SharedBuffer([bm, d], "float16"), K_s: T.SharedBuffer([bn, d], "float16"),
           S: T.FragmentBuffer([bm, bn], "float32")):
        T.gemm(Q_s, K_s, S, transpose_B=True, clear_accum=True)

    @T.macro
    def row_max(S: T.FragmentBuffer([bm, bn], "float32"), m: T.FragmentBuffer([bm], "float32")):
        T.reduce_max(S, m, dim=1)

    @T.prim_func
    def step(Q: T.Tensor((bm, d), "float16"), K: T.Tensor((bn, d), "float16"),
             M: T.Tensor((bm,), "float32"), G: T.Tensor((4, 4), "float32")):
        with T.Kernel(1, threads=128) as bx:
            Q_s = T.alloc_shared((bm, d), "float16")
            K_s = T.alloc_shared((bn, d), "float16")
            S = T.alloc_fragment((bm, bn), "float32")
            m = T.alloc_fragment((bm,), "float32")
            g = T.alloc_local((16,), "float32")
            T.copy(Q, Q_s)
            T.copy(K, K_s)
            qk(Q_s, K_s, S)
            row_max(S, m)
            T.copy(m, M)
            for i, j in T.grid(4, 4):
                g[i * 4 + j] = T.cast(i * 10 + j, "float32")
            if bx == 0:
                for i, j in T.grid(4, 4):
                    G[i, j] = g[i * 4 + j]

    return step


def test_annotated_macros_and_grid_compile(tmp_path):
    func = _attention_step_program()
    script = func.script()
    assert "for i in T.serial(4):" in script and "for j in T.serial(4):" in script
    assert "T.reduce_max(S, m" in script
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_annotations_describe_and_refuse_as_prim_func_params():
    spec = T.SharedBuffer([64, 32], "float16")
    assert spec.form == "T.SharedBuffer" and spec.shape == (64, 32) and spec.dtype == "float16"
    assert T.FragmentBuffer[(8,), "float32"].form == "T.FragmentBuffer"
    with pytest.raises(FrontendError, match=r"T.LocalBuffer.*scope"):
        T.from_script(
            "@T.prim_func\n"
            "def f(A: T.LocalBuffer((4,), 'float32')):\n"
            "    with T.Kernel(1, threads=32) as bx:\n"
            "        A[0] = 1.0\n")


def test_grid_loop_variables_must_match_its_extents():
    with pytest.raises(FrontendError, match=r"T.grid has 2 extents but 1 loop variables"):
        T.from_script(
            "@T.prim_func\n"
            "def f(A: T.Tensor((4, 4), 'float32')):\n"
            "    with T.Kernel(1, threads=32) as bx:\n"
            "        for i in T.grid(4, 4):\n"
            "            A[i, 0] = 1.0\n")


@pytest.mark.gpu
def test_annotated_macros_and_grid_on_gpu():
    import torch

    kernel = tilecute.compile(_attention_step_program())
    q = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    k = torch.randn(64, 64, device="cuda", dtype=torch.float16)
    m = torch.empty(64, device="cuda")
    g = torch.empty(4, 4, device="cuda")
    kernel(q, k, m, g)
    torch.testing.assert_close(m, (q.float() @ k.float().T).max(1).values, atol=1e-2, rtol=1e-3)
    ref = torch.tensor([[i * 10 + j for j in range(4)] for i in range(4)], dtype=torch.float32)
    assert torch.equal(g.cpu(), ref)


def test_gemm_takes_tileLang_positional_order(tmp_path):
    """TileLang's T.gemm(A, B, C, transpose_A, transpose_B, policy, clear_accum, k_pack,
    mbar): every argument by position means what it means by name (wg_wait, which
    TileLang's current T.gemm no longer has, only by keyword)."""

    def program(call):
        return T.from_script(
            "@T.prim_func\n"
            "def g(A: T.Tensor((64, 32), 'float16'), B: T.Tensor((64, 32), 'float16'),"
            " C: T.Tensor((64, 64), 'float32')):\n"
            "    with T.Kernel(1, threads=128) as bx:\n"
            "        As = T.alloc_shared((64, 32), 'float16')\n"
            "        Bs = T.alloc_shared((64, 32), 'float16')\n"
            "        c = T.alloc_fragment((64, 64), 'float32')\n"
            "        T.copy(A, As)\n"
            "        T.copy(B, Bs)\n"
            f"        {call}\n"
            "        T.copy(c, C)\n")

    pos = program("T.gemm(As, Bs, c, False, True, T.GemmWarpPolicy.FullRow, True, 1, None)")
    kw = program("T.gemm(As, Bs, c, transpose_B=True, policy=T.GemmWarpPolicy.FullRow, "
                 "clear_accum=True, k_pack=1, mbar=None, wg_wait=0)")
    assert pos.script() == kw.script()
    with pytest.raises(FrontendError, match="mbar"):
        program("T.gemm(As, Bs, c, False, True, T.GemmWarpPolicy.FullRow, True, 1, c)")
    with pytest.raises(FrontendError, match="annotations"):
        program("T.gemm(As, Bs, c, False, True, T.GemmWarpPolicy.FullRow, True, 1, None, {'x': 1})")


def test_inc_and_dec_max_nreg_are_set_max_nreg():
    text = ("@T.prim_func\n"
            "def f(A: T.Tensor((4,), 'float32')):\n"
            "    with T.Kernel(1, threads=256) as bx:\n"
            "        if T.get_thread_binding(0) < 128:\n"
            "            T.dec_max_nreg(40)\n"
            "        else:\n"
            "            T.inc_max_nreg(232)\n"
            "            A[0] = 1.0\n")
    script = T.from_script(text).script()
    assert "T.set_max_nreg(40, 0)" in script and "T.set_max_nreg(232, 1)" in script


def test_block_and_thread_bindings_and_extents(tmp_path):
    """T.get_block_binding / T.get_block_bindings / T.get_*_extent(s): the T.Kernel's block
    variables, grid and thread extents (0 / 1 for a dim the kernel does not have)."""

    @T.prim_func
    def f(A: T.Tensor((4, 256), "float32"), B: T.Tensor((4, 256), "float32")):
        with T.Kernel(4, 2, threads=128) as (bx, by):
            x = T.get_block_binding(0)
            tx = T.get_thread_binding()
            n = T.get_thread_extent()
            gx, gy, gz = T.get_block_extents()
            x2, y, z = T.get_block_bindings()
            B[x, y * n + tx] = A[x, y * n + tx] + T.cast(gx * 100 + gy * 10 + gz + z, "float32")

    script = f.script()
    assert "x = bx" in script and "n = 128" in script and "gx = 4" in script and "gz = 1" in script
    assert "y = by" in script and "z = 0" in script  # blockIdx.z of a 2-D grid
    assert tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path)).kernel_names
    with pytest.raises(FrontendError, match="T.get_block_binding: dim must be 0, 1 or 2"):
        T.from_script(
            "@T.prim_func\n"
            "def g(A: T.Tensor((4,), 'float32')):\n"
            "    with T.Kernel(4, threads=32) as bx:\n"
            "        A[T.get_block_binding(3)] = 1.0\n")


def _ref_program():
    """TileLang's pass-by-reference macro parameters: ``x: T.Ref`` (and the deprecated
    ``x: T.Var``) given a buffer element, a T.alloc_var and a region."""

    @T.macro
    def bump(x: T.Ref, v):
        x += v
        x = x * 2

    @T.macro
    def set_one(x: T.Var):
        x = 1

    @T.macro
    def zero(r: T.Ref):
        T.fill(r, 0)

    @T.prim_func
    def refs(A: T.Tensor((8,), "int32"), I: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            y = T.alloc_var(T.int32)
            y = 5
            if T.get_thread_binding() == 0:
                bump(A[I[0] + 1], 3)   # the index is read once, at the call
                bump(y, 1)
                set_one(A[0])
                A[7] = y
            zero(A[4:6])

    return refs


def test_ref_parameters_store_through_to_their_argument(tmp_path):
    refs = _ref_program()
    text = refs.script()
    # the element's index is bound once; the macro's assignments store into A
    assert "x_i0 = I[0] + 1" in text
    assert "A[x_i0] = A[x_i0] + 3" in text and "A[x_i0] = A[x_i0] * 2" in text
    assert "A[0] = 1" in text and "y[0] = y[0] * 2" in text
    assert (tmp_path / "c").mkdir() or tilecute.build_cubin(refs, "sm_90a", out_dir=str(tmp_path / "c"))


def test_ref_parameter_refuses_a_value_as_tileLang_does():
    @T.macro
    def set_one(x: T.Ref):
        x = 1

    with pytest.raises(ValueError, match="parameter 'x' is annotated T.Ref"):
        @T.prim_func
        def bad(A: T.Tensor((8,), "int32")):
            with T.Kernel(1, threads=32) as bx:
                x = 1
                set_one(x)

    @T.macro
    def index_it(x: T.Ref):
        x[0] = 1

    with pytest.raises(FrontendError, match="'x' is a T.Ref to an element of 'A'"):
        @T.prim_func
        def bad2(A: T.Tensor((8,), "int32")):
            with T.Kernel(1, threads=32) as bx:
                index_it(A[2])


@pytest.mark.gpu
def test_ref_parameters_on_gpu():
    import torch

    kernel = tilecute.compile(_ref_program())
    a = torch.full((8,), 10, dtype=torch.int32, device="cuda")
    i = torch.tensor([2], dtype=torch.int32, device="cuda")
    kernel(a, i)
    assert a.tolist() == [1, 10, 10, 26, 0, 0, 10, 12]
