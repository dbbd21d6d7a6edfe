"""TVM's ``T.Broadcast(value, lanes)`` stored into a region of ``lanes`` elements (one
store per element), and ``T.Var`` (what ``T.dynamic`` makes, for TileLang's
``isinstance(M, T.Var)`` checks) (issue 17)."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.language import FrontendError

torch = pytest.importorskip("torch")


def _splat(dtype, lanes, rows=2):
    @T.prim_func
    def splat(seed: T.Tensor((rows,), dtype), out: T.Tensor((rows, lanes), dtype)):
        with T.Kernel(rows, threads=1) as r:
            regs = T.alloc_local((1, lanes), dtype)
            regs[0, 0:lanes] = T.Broadcast(seed[r] + 1, lanes)
            for j in T.serial(lanes):
                out[r, j] = regs[0, j]
    return splat


def test_broadcast_stores_every_lane(tmp_path):
    f = _splat("int8", 16)
    tilecute.build_cubin(f, "sm_90a", out_dir=str(tmp_path))
    text = f.script()
    assert all(f"regs[0, {j}] = " in text for j in range(1, 16)), text  # one store per lane


@pytest.mark.parametrize("target, message", [
    ("regs[0, 0:8]", r"cannot store a 16-lane value into 8 elements of 'regs'"),
    ("regs[0:1, 0:16] + 1", None),
])
def test_broadcast_outside_a_matching_region_is_refused(target, message):
    body = f"regs[0, 0:8] = T.Broadcast(seed[0], 16)" if message else \
        "regs[0, 0] = T.Broadcast(seed[0], 16) + 1"
    src = f'''
import tilecute.language as T

@T.prim_func
def bad(seed: T.Tensor((1,), "int8")):
    with T.Kernel(1, threads=1):
        regs = T.alloc_local((1, 16), "int8")
        {body}
'''
    with pytest.raises(FrontendError) as info:
        T.from_script(src)
    if message:
        import re
        assert re.search(message, str(info.value)), str(info.value)
    else:
        assert ":8:" in str(info.value)  # names the line


def test_var_is_what_dynamic_makes():
    m = T.dynamic("m")
    assert isinstance(m, T.Var) and not isinstance(64, T.Var)
    assert T.Var("k", "int32").name == "k"


@pytest.mark.gpu
def test_broadcast_on_the_gpu():
    for dtype, torch_dtype in (("int8", torch.int8), ("uint8", torch.uint8), ("float16", torch.float16)):
        kernel = tilecute.compile(_splat(dtype, 32))
        seed = torch.tensor([-3 if dtype == "int8" else 200, 7], device="cuda").to(torch_dtype)
        out = torch.empty(2, 32, dtype=torch_dtype, device="cuda")
        kernel(seed, out)
        torch.testing.assert_close(out, (seed + 1)[:, None].expand(2, 32), rtol=0, atol=0)


def test_tvm_attr_statement_is_refused_by_name():
    src = '''
import tilecute.language as T

@T.prim_func
def allreduce(A: T.Tensor((32,), "float32")):
    with T.Kernel(1, threads=32):
        v = T.alloc_local((1,), "float32")
        with T.attr(0, "reduce_scope", 0):
            v[0] = A[0]
'''
    # (TVM's reduce_scope attribute is honored around T.tvm_thread_allreduce, with a
    # T.comm_reducer node: tests/test_thread_allreduce.py)
    with pytest.raises(FrontendError, match=r"<script>:8: .*T.attr\(..., \"reduce_scope\", ...\): "
                                            r"the node must be T.comm_reducer"):
        T.from_script(src)
