"""TileLang's T.loop_break, T.any_of / T.all_of, T.atomic_addx2 / x4, T.reinterpret,
T.print and T.device_assert (issue 17): what each lowers to, that it compiles to an
sm_90a cubin, what is refused, and (GPU) the results against torch."""

import re

import pytest

import tilecute
import tilecute.language as T
from tilecute.codegen.cute import emit_cute
from tilecute.language import FrontendError
from tilecute.transform.pipeline import lower


def _first_negative():
    """Per row, the index of the first negative element (64 when none): a serial loop
    left with T.loop_break."""
    @T.prim_func
    def first_negative(A: T.Tensor((128, 64), "float32"), Out: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            n = T.alloc_var(T.int32, 0)
            for k in T.serial(64):
                if A[tx, k] < 0:
                    T.loop_break()
                n = n + 1
            Out[tx] = n
    return first_negative


def test_loop_break_becomes_a_while_with_a_flag(tmp_path):
    func = _first_negative()
    text = func.script()
    assert re.search(r"while k_it\[0\] < 64 and broke\[0\] == 0:", text)
    assert "broke[0] = 1" in text
    assert "if broke[0] == 0:\n                n[0] = n[0] + 1" in text  # after the break: guarded
    assert T.from_script(text) == func
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_loop_break_in_while_and_nested_loops(tmp_path):
    @T.prim_func
    def nested(A: T.Tensor((128, 8, 8), "int32"), Out: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            total = T.alloc_var(T.int32, 0)
            for i in T.serial(8):
                for j in T.serial(8):  # the break leaves this loop only
                    if A[tx, i, j] == 0:
                        T.loop_break()
                    total = total + A[tx, i, j]
            while total > 1000:
                total = total - 7
                if total % 2 == 0:
                    T.loop_break()
            Out[tx] = total
    text = nested.script()
    assert "for i in T.serial(8):" in text and text.count("while ") == 2
    assert tilecute.build_cubin(nested, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.parametrize("loop, message", [
    ("for i in T.Parallel(4):", "inside a parallel loop"),
    ("for i in T.Pipelined(4, num_stages=2):", "inside a pipelined loop"),
])
def test_loop_break_is_refused_outside_serial_loops(loop, message):
    text = f'''import tilecute.language as T


@T.prim_func
def bad(A: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=32) as bx:
        {loop}
            T.loop_break()
'''
    with pytest.raises(FrontendError, match=message) as e:
        T.from_script(text)
    assert "<script>:8:" in str(e.value)  # the break's line


def test_any_of_and_all_of_read_a_buffer_or_a_last_dim_region(tmp_path):
    @T.prim_func
    def flags(M: T.Tensor((128, 8), "int32"), Out: T.Tensor((128, 2), "int32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            mask = T.alloc_local((2, 4), "bool")
            for i, j in T.grid(2, 4):
                mask[i, j] = M[tx, i * 4 + j] != 0
            Out[tx, 0] = T.if_then_else(T.any_of(mask), 1, 0)
            Out[tx, 1] = T.if_then_else(T.all_of(mask[1, 0:4]), 1, 0)
    text = flags.script()
    assert "mask[0, 0] or mask[0, 1] or mask[0, 2] or mask[0, 3] or mask[1, 0]" in text
    assert "mask[1, 0] and mask[1, 1] and mask[1, 2] and mask[1, 3], 1, 0)" in text
    assert tilecute.build_cubin(flags, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_any_of_refuses_a_region_across_rows():
    text = '''import tilecute.language as T


@T.prim_func
def bad(A: T.Tensor((4,), "int32")):
    with T.Kernel(1, threads=32) as bx:
        m = T.alloc_local((2, 4), "int32")
        A[0] = T.if_then_else(T.any_of(m[0:2, 0:4]), 1, 0)
'''
    with pytest.raises(FrontendError, match="along its last dim only"):
        T.from_script(text)


def _accumulate(lanes, dtype):
    @T.prim_func
    def accumulate(dQ: T.Tensor((64, 64), dtype), X: T.Tensor((64, 64), dtype)):
        with T.Kernel(4, threads=128) as bx:
            s = T.alloc_shared((64, 64), dtype)
            T.copy(X, s)
            for i, j in T.Parallel(64, 64 // lanes):
                if lanes == 2:
                    T.atomic_addx2(dQ[i, j * 2], s[i, j * 2])
                else:
                    T.atomic_addx4(dQ[i, j * 4], s[i, j * 4])
    return accumulate


@pytest.mark.parametrize("lanes, dtype", [(2, "float16"), (2, "bfloat16"), (4, "float32")])
def test_atomic_addx_is_one_atomic_add_per_element(lanes, dtype, tmp_path):
    func = _accumulate(lanes, dtype)
    text = func.script()
    for k in range(1, lanes):
        assert f"T.atomic_add(dQ[i, j * {lanes} + {k}], s[i, j * {lanes} + {k}])" in text
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_atomic_addx_refuses_integers_and_takes_return_prev_as_a_statement():
    base = '''import tilecute.language as T


@T.prim_func
def bad(A: T.Tensor((4,), "{dtype}")):
    with T.Kernel(1, threads=32) as bx:
        T.atomic_addx2(A[0], A[2]{extra})
'''
    # as a statement, return_prev=True is the same update (old values: test_atomic_addx_return_prev)
    f = T.from_script(base.format(dtype="float32", extra=", return_prev=True"))
    assert f.script().count("T.atomic_add(A") == 2
    with pytest.raises(FrontendError, match="adds float16, bfloat16 or float32"):
        T.from_script(base.format(dtype="int32", extra=""))


def _bits():
    @T.prim_func
    def bits(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "int32"),
             C: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            B[tx] = T.reinterpret(A[tx], T.int32)
            C[tx] = T.reinterpret(T.float32, B[tx] ^ -2147483648)  # TVM's order: the sign flipped
    return bits


def test_reinterpret_is_a_bit_cast(tmp_path):
    func = _bits()
    text = func.script()
    assert 'T.reinterpret(A[tx], "int32")' in text
    # both ways are bit casts: no value conversion on the way back to float32
    assert 'C[tx] = T.reinterpret(B[tx] ^ -2147483648, "float32")' in text and "T.Cast" not in text
    source = emit_cute(lower(func, "sm_90a"))
    assert "tcmath.reinterpret(A[tx], cutlass.Int32)" in source
    assert "C[tx] = tcmath.reinterpret(B[tx] ^ -2147483648, cutlass.Float32)" in source
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


def test_reinterpret_to_its_own_dtype_is_the_value():
    # TVM's reinterpret of an int32 as int32 is the value; stored into a float32 buffer it
    # is then converted, as any int32 value is (what C = T.reinterpret(T.int32, b) does)
    from tilecute.ir import nodes as N

    b = N.Var("b", "int32")
    assert T.reinterpret(T.int32, b) == b and T.reinterpret(b, "int32") == b
    assert T.reinterpret(T.float32, b) == N.Call("reinterpret", (b,), "float32")


def test_reinterpret_refuses_another_width():
    text = '''import tilecute.language as T


@T.prim_func
def bad(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "int16")):
    with T.Kernel(1, threads=32) as bx:
        B[0] = T.reinterpret(A[0], "int16")
'''
    with pytest.raises(FrontendError, match="the widths must agree"):
        T.from_script(text)


def _debug(ok=True):
    @T.prim_func
    def debug(A: T.Tensor((16, 16), "float32"), B: T.Tensor((16,), "int32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            s = T.alloc_shared((16, 16), "float32")
            f = T.alloc_fragment((16, 16), "float32")
            T.copy(A, s)
            T.copy(s, f)
            T.device_assert(tx < (128 if ok else 64), "tx out of range")
            if tx == 3:
                T.print(tx, msg="tid")
            T.print(s, msg="tile")
            T.print(f, warp_id=1)
            T.print(msg="done")
            B[tx % 16] = tx % 16
    return debug


def test_print_and_device_assert_are_tilelangs_printf_lines(tmp_path):
    func = _debug()
    assert T.from_script(func.script()) == func
    source = emit_cute(lower(func, "sm_90a"))
    assert ("cute.printf(\"msg='tid' BlockIdx=(%d, %d, %d), ThreadIdx=(%d, %d, %d): dtype=int "
            "value=%d\", *tcd.where(), cutlass.Int32(tx))") in source
    assert "buffer=s, index=%d, dtype=float value=%f" in source
    assert "msg='buffer<f, float32>'" in source and "if tc_tid == 32:" in source  # warp_id=1
    assert "cute.printf(\"msg='done' BlockIdx=(%d, %d, %d), ThreadIdx=(%d, %d, %d)\", *tcd.where())" in source
    assert "cute.printf(\"Device assert failed: tx out of range\\n  at " in source
    assert "tcd.trap()" in source
    assert tilecute.build_cubin(func, "sm_90a", out_dir=str(tmp_path)).kernel_names


@pytest.mark.gpu
def test_loop_break_on_gpu():
    import torch

    kernel = tilecute.compile(_first_negative())
    a = torch.rand(128, 64, device="cuda")
    cut = torch.randint(0, 80, (128,))
    for r, c in enumerate(cut.tolist()):
        if c < 64:
            a[r, c] = -1.0
    out = torch.empty(128, dtype=torch.int32, device="cuda")
    kernel(a, out)
    ref = torch.where(cut < 64, cut, torch.full_like(cut, 64)).to(torch.int32)
    torch.testing.assert_close(out.cpu(), ref)


@pytest.mark.gpu
@pytest.mark.parametrize("lanes, dtype", [(2, "float16"), (4, "float32")])
def test_atomic_addx_on_gpu(lanes, dtype):
    import torch

    kernel = tilecute.compile(_accumulate(lanes, dtype))
    tdt = getattr(torch, dtype)
    dq = torch.zeros(64, 64, device="cuda", dtype=tdt)
    x = torch.randn(64, 64, device="cuda", dtype=tdt)
    kernel(dq, x)  # 4 blocks each add x
    torch.testing.assert_close(dq.float(), 4 * x.float(), atol=1e-2, rtol=1e-2)


@pytest.mark.gpu
def test_reinterpret_on_gpu():
    import torch

    kernel = tilecute.compile(_bits())
    a = torch.randn(128, device="cuda")
    b = torch.empty(128, dtype=torch.int32, device="cuda")
    c = torch.empty(128, device="cuda")
    kernel(a, b, c)
    torch.testing.assert_close(b, a.view(torch.int32))
    torch.testing.assert_close(c, -a)


@pytest.mark.gpu
def test_print_on_gpu(capfd):
    import torch

    kernel = tilecute.compile(_debug())
    a = torch.arange(256, dtype=torch.float32, device="cuda").reshape(16, 16)
    b = torch.empty(16, dtype=torch.int32, device="cuda")
    kernel(a, b)
    torch.cuda.synchronize()
    out = capfd.readouterr().out
    assert "msg='tid' BlockIdx=(0, 0, 0), ThreadIdx=(3, 0, 0): dtype=int value=3" in out
    assert "buffer=s, index=17, dtype=float value=17.000000" in out
    assert "msg='buffer<f, float32>' BlockIdx=(0, 0, 0), ThreadIdx=(32, 0, 0): buffer=f, index=255" in out
    assert out.count("msg='done'") == 128
