"""TileLang's ``T.annotate_restrict_buffers(x, y)``: the buffers may alias (TileLang's CUDA
code then leaves ``__restrict__`` off those parameters).  tilecute's kernels never assume
that parameters do not alias, so the form is honored as it stands: at the top level or in
a kernel, the program's code is the same as without it, and a kernel whose two parameters
are overlapping views of one tensor reads and writes in program order."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.language.parser import FrontendError

N = 256


def _shift(annotate: str):
    """y[i] = x[i] + 1 for i in one block's 128 rows, one element a step in order:
    with y = x[1:], each step reads what the step before wrote (a running + 1)."""
    top = "T.annotate_restrict_buffers(x, y)" if annotate == "top" else "pass"
    inner = "T.annotate_restrict_buffers(x, y)" if annotate == "kernel" else "pass"
    text = f'''
import tilecute.language as T


@T.prim_func
def shift(x: T.Tensor(({N},), T.float32), y: T.Tensor(({N},), T.float32)):
    {top}
    with T.Kernel(1, threads=1) as bx:
        {inner}
        for i in T.serial({N}):
            y[i] = x[i] + 1.0
'''
    return T.from_script(text)


@pytest.mark.parametrize("where", ["top", "kernel"])
def test_the_annotation_changes_no_code(where):
    assert _shift(where).script() == _shift("none").script()


def test_an_argument_that_is_no_buffer_is_tilelangs_type_error():
    text = '''
import tilecute.language as T


@T.prim_func
def bad(x: T.Tensor((8,), T.float32)):
    with T.Kernel(1, threads=32) as bx:
        T.annotate_restrict_buffers(x, 3)
        x[0] = 1.0
'''
    with pytest.raises(TypeError, match="T.annotate_restrict_buffers expects Buffer arguments, got `3`"):
        T.from_script(text)
    with pytest.raises(FrontendError):  # (a FrontendError too: it names the line)
        T.from_script(text)


def test_buffers_given_through_a_starred_list():
    text = f'''
import tilecute.language as T


@T.prim_func
def shift(x: T.Tensor(({N},), T.float32), y: T.Tensor(({N},), T.float32)):
    with T.Kernel(1, threads=1) as bx:
        T.annotate_restrict_buffers(*[x, y])
        for i in T.serial({N}):
            y[i] = x[i] + 1.0
'''
    assert T.from_script(text).script() == _shift("none").script()
    with pytest.raises(TypeError, match="T.annotate_restrict_buffers expects Buffer arguments, got `3`"):
        T.from_script(text.replace("*[x, y]", "*[x, 3]"))


def test_it_builds():
    assert tilecute.compile(_shift("kernel")).ensure_cubin()


@pytest.mark.gpu
def test_overlapping_views_run_in_program_order():
    import torch

    base = torch.zeros(N + 1, device="cuda")
    tilecute.compile(_shift("kernel"))(base[:N], base[1:])
    assert base.tolist() == [float(i) for i in range(N + 1)]
