"""An integer sum in which a term comes back (``i + (i + tx)``) is printed as each term
times its count (``i * 2 + tx``): CuTe DSL 4.8's LLVM lowering compiled
``T.truncmod(i + (i + tx), 9)`` over a loop index as if the sum stepped by 1 per
iteration (fuzzer scalar seed 5572 on an H200: ``(tx + k) % 9`` for ``(tx + 2k) % 9``;
``T.truncdiv`` alike), where ``i * 2 + tx`` divides right -- the nested form of the
``i + i`` case the code generator already prints as ``i * 2`` (seed 4424).  A
``T.if_then_else`` whose branches are the same term counts as that term."""

import pytest

import tilecute
import tilecute.language as T

FORMS = {
    "nested": lambda i, tx: T.truncmod(i + (i + tx), 9),
    "select": lambda i, tx: T.truncmod(T.if_then_else(i <= i, i, i) + (i + tx), 9),
    "div": lambda i, tx: T.truncdiv(i + (tx + i), 9),
    "three": lambda i, tx: T.truncmod((i + tx) + (i + i), 16),
}
WANT = {
    "nested": lambda i, tx: (2 * i + tx) % 9,
    "select": lambda i, tx: (2 * i + tx) % 9,
    "div": lambda i, tx: (2 * i + tx) // 9,
    "three": lambda i, tx: (3 * i + tx) % 16,
}


def _program(form):
    f = FORMS[form]

    @T.prim_func
    def sums(O: T.Tensor((64, 8), "int32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            for i in T.serial(8):
                O[tx, i] = f(i, tx)
    return sums


@pytest.mark.parametrize("form, printed", [
    ("nested", "tcmath.truncmod(i * 2 + tx, 9)"),
    ("select", "tcmath.truncmod(i * 2 + tx, 9)"),
    ("div", "tcmath.truncdiv(i * 2 + tx, 9)"),
    ("three", "tcmath.truncmod(i * 3 + tx, 16)"),
])
def test_a_repeated_term_is_printed_with_its_count(form, printed):
    kernel = tilecute.compile(_program(form))
    assert printed in kernel.get_kernel_source()
    kernel.ensure_cubin()


@pytest.mark.gpu
@pytest.mark.parametrize("form", sorted(FORMS))
def test_repeated_terms_on_gpu(form):
    import torch

    o = torch.zeros(64, 8, dtype=torch.int32, device="cuda")
    tilecute.compile(_program(form))(o)
    want = [[WANT[form](i, tx) for i in range(8)] for tx in range(64)]
    assert o.cpu().tolist() == want


def _let_program(inner):
    @T.prim_func
    def let_sums(O: T.Tensor((64, 8), "int32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            for i in T.serial(8):
                j = i + tx
                k = j + 0 if inner else j  # (k = j + 0: a sum of j, whose terms count)
                O[tx, i] = T.truncmod(i + k, 9) + j
    return let_sums


@pytest.mark.parametrize("inner", [False, True])
def test_a_term_repeated_through_a_let_is_counted(inner):
    """``j = i + tx`` then ``i + j``: the MLIR holds one SSA value as for ``i + (i + tx)``,
    so the sum is printed from the Let's terms; ``j`` itself is still bound and read."""
    src = tilecute.compile(_let_program(inner)).get_kernel_source()
    assert ("tcmath.truncmod(i * 2 + tx + 0, 9)" if inner else "tcmath.truncmod(i * 2 + tx, 9)") in src
    assert "j = i + tx" in src
    tilecute.compile(_let_program(inner)).ensure_cubin()


def test_a_let_without_a_repeated_term_prints_as_written():
    @T.prim_func
    def let_plain(O: T.Tensor((64, 8), "int32")):
        with T.Kernel(1, threads=64) as bx:
            tx = T.get_thread_binding()
            for i in T.serial(8):
                j = i + tx
                O[tx, i] = T.truncmod(j + 3, 9)
    src = tilecute.compile(let_plain).get_kernel_source()
    assert "tcmath.truncmod(j + 3, 9)" in src


@pytest.mark.gpu
@pytest.mark.parametrize("inner", [False, True])
def test_let_repeated_terms_on_gpu(inner):
    import torch

    o = torch.zeros(64, 8, dtype=torch.int32, device="cuda")
    tilecute.compile(_let_program(inner))(o)
    want = [[(2 * i + tx) % 9 + i + tx for i in range(8)] for tx in range(64)]
    assert o.cpu().tolist() == want
