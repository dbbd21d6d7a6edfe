"""Trace-time Python in a prim_func, as TileLang's builder runs it: a ``for`` over a Python
iterable (a list, a tuple, ``zip``, ``enumerate``) expands its body once per item (``break`` /
``continue`` end the expansion or the item; under a runtime condition TileLang raises
NotImplementedError), comprehensions are evaluated while parsing (an allocation in one is one
buffer per item), and a Python list item is a whole buffer to a tile op.  ``range(n)`` stays
TileLang's T.serial, so a Python list indexed by its variable is a named error."""

import pytest

import tilecute.language as T
from tilecute.language import FrontendError


def _script(body: str, prelude: str = "") -> str:
    return T.from_script(prelude + '''
@T.prim_func
def f(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        tx = T.get_thread_binding()
''' + "\n".join("        " + line for line in body.strip("\n").splitlines()) + "\n").script()


def test_loop_over_python_tuple_with_continue_and_break():
    src = _script('''
acc = T.alloc_var(T.float32, init=0.0)
for k, w in enumerate(ws):
    if w < 0:
        continue
    if k == 3:
        break
    acc += w * X[tx]
Y[tx] = acc
''', "ws = (1.0, -1.0, 2.0, 3.0, 4.0)\n")
    # item 1 skipped (continue), items 3 and 4 never traced (break at k == 3); no loop left
    assert "acc[0] = acc[0] + T.float32(1.0) * X[tx]\n        acc[0] = acc[0] + T.float32(2.0) * X[tx]\n" \
        "        Y[tx] = acc[0]" in src
    assert "for " not in src and "3.0" not in src and "-1.0" not in src


def test_nested_targets_zip_and_list_of_buffers():
    src = _script('''
tiles = [T.alloc_shared((128,), T.float32) for _ in range(2)]
for i, (t, s) in enumerate(zip(tiles, (2.0, 3.0))):
    t[tx] = X[tx] * s + i
Y[tx] = tiles[0][tx] + tiles[1][tx]
''')
    assert 'tiles_0 = T.alloc_shared((128,), "float32")' in src
    assert 'tiles_1 = T.alloc_shared((128,), "float32")' in src
    assert "tiles_0[tx] = X[tx] * T.float32(2.0) + T.float32(0.0)" in src
    assert "tiles_1[tx] = X[tx] * T.float32(3.0) + T.float32(1.0)" in src
    assert "Y[tx] = tiles_0[tx] + tiles_1[tx]" in src


def test_running_python_offset_and_list_append():
    src = _script('''
tiles = []
off = 0
for w in (32, 64):
    tiles.append(T.alloc_shared((w,), T.float32))
    for j in T.Parallel(w):
        tiles[-1][j] = X[off + j]
    off += w
Y[tx] = tiles[0][tx % 32] + tiles[1][tx % 64] + off
''')
    # `off += w` on a Python int stays a Python int (it was a leaked AttributeError)
    assert "off = 0\n" in src and "off_1 = 32\n" in src and "off_2 = 96\n" in src
    assert 'tiles_0 = T.alloc_shared((32,), "float32")' in src
    assert 'tiles_1 = T.alloc_shared((64,), "float32")' in src
    assert "tiles_1[j_1] = X[off_1 + j_1]" in src


def test_comprehensions_are_python():
    src = _script('''
total = sum(w for w in widths if w > 1)
named = {k: v * 2 for k, v in zip(("a", "b"), widths)}
Y[tx] = X[tx] * total + named["b"]
''', "widths = [1, 2, 3]\n")
    # sum over a filtered generator (2 + 3) and a dict comprehension's value (2 * 2)
    assert "total = 5\n" in src and 'Y[tx] = X[tx] * T.Cast("float32", total) + T.float32(4.0)' in src


def test_dict_comprehension_of_buffers_in_a_tile_op():
    src = _script('''
bufs = {name: T.alloc_fragment((128,), T.float32) for name in ("lo", "hi")}
T.copy(X, bufs["lo"])
for i in T.Parallel(128):
    bufs["hi"][i] = bufs["lo"][i] * 2.0
T.copy(bufs["hi"], Y)
''')
    assert 'bufs_0 = T.alloc_fragment((128,), "float32")' in src and "bufs_1" in src
    # a list or dict item given to a tile op is its whole buffer
    assert "T.copy(X, bufs_0[0:128])" in src and "T.copy(bufs_1[0:128], Y)" in src
    assert "bufs_1[i] = bufs_0[i] * T.float32(2.0)" in src


@pytest.mark.parametrize("body, message", [
    # TileLang's NotImplementedError: no runtime loop for the break to leave
    ('''
for w in (1.0, 2.0):
    if X[tx] > w:
        break
    Y[tx] = w
''', "`break` of a loop over a Python iterable under a runtime condition"),
    ('''
for v in X:
    Y[tx] = v
''', "a TIR expression or buffer is not iterable"),
    ('''
for v in tx:
    Y[tx] = v
''', "a TIR expression or buffer is not iterable"),
    ('''
for v in 3:
    Y[tx] = v
''', "expected range, T.serial, T.Parallel, T.unroll, T.Pipelined, ... or a Python iterable, got int"),
    ('''
xs = [T.alloc_shared((128,), T.float32) for _ in range(2)]
for h in range(2):
    xs[h][tx] = X[tx]
''', "`xs` is a Python list, indexed here by the runtime value `h`"),
    ('''
vs = [T.alloc_var(T.float32) for _ in range(2)]
''', "T.alloc_var in a comprehension is not supported"),
    ('''
ys = [X[tx] for i in range(4) if tx > i]
''', "a comprehension's condition `tx > i` is a runtime value"),
])
def test_refusals_name_the_form(body, message):
    with pytest.raises(FrontendError, match=message.replace("(", "\\(").replace(")", "\\)")
                       .replace("[", "\\[").replace(".", "\\.").replace("`", ".")):
        _script(body)


def _macro_kernel(macro):
    import tilecute

    @tilecute.jit(out_idx=[-1])
    def k(N=128):
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                tx = T.get_thread_binding()
                Y[tx] = macro(X[tx])

        return main

    return k()


@T.macro
def _neg_if_negative(x):
    if x < 0:
        return -x
    return x


@T.macro
def _first_positive(x):
    for i in T.serial(4):
        return x + i
    return x


def test_macro_return_in_a_runtime_branch_is_named():
    with pytest.raises(FrontendError, match="returns from inside a branch on the runtime value `x < 0`"):
        _macro_kernel(_neg_if_negative).get_kernel_source()
    with pytest.raises(FrontendError, match="returns a value from inside a loop or `with`"):
        _macro_kernel(_first_positive).get_kernel_source()


def test_allocations_in_displays_and_unpacked_comprehensions():
    # `{"c": T.alloc_fragment(...)}` was "a statement form ... in an expression"
    src = T.from_script('''
shapes = [(32, 64), (64, 32)]

@T.prim_func
def f(A: T.Tensor((32, 64), "float16"), B: T.Tensor((64, 32), "float16"), C: T.Tensor((32, 32), "float32")):
    with T.Kernel(1, threads=128) as bx:
        A_s, B_s = [T.alloc_shared(s, "float16") for s in shapes]
        acc = {"c": T.alloc_fragment((32, 32), "float32")}
        pair = [T.alloc_local((2,), "float32"), T.alloc_local((2,), "float32")]
        for name, buf in acc.items():
            T.fill(buf, 0)
        for src, dst in zip((A, B), (A_s, B_s)):
            T.copy(src, dst)
        T.gemm(A_s, B_s, acc["c"])
        T.copy(acc["c"], C)
''').script()
    assert 'A_s = T.alloc_shared((32, 64), "float16")' in src and 'B_s = T.alloc_shared((64, 32), "float16")' in src
    assert 'acc_c = T.alloc_fragment((32, 32), "float32")' in src
    assert 'pair_0 = T.alloc_local((2,), "float32")' in src and "pair_1 = " in src
    assert "T.fill(acc_c, T.float32(0))" in src and "T.copy(A, A_s)" in src and "T.copy(B, B_s)" in src
    assert "T.gemm(A_s, B_s, acc_c," in src
