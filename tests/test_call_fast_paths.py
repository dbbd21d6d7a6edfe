"""The per-call Python work before the launcher, kept small: a kernel with outputs or
``T.alloc_global`` workspaces shapes them by a plan made once (each dim a static extent or
the input dim that binds its symbol), and a ``tilecute.jit`` factory finds the kernel of a
repeated call by the call's own arguments, without binding them to the signature again.
Both must give what the general path gives, and fall back to it where they cannot."""

import pytest
import torch

import tilecute
import tilecute.language as T
import tilecute.language.eager as eager


def _rowscale():
    m, n = T.symbolic("m"), T.symbolic("n")

    @T.prim_func
    def rowscale(X: T.Tensor((m, n), T.float16), s: T.float32,
                 Y: T.Tensor((m, n), T.float16), R: T.Tensor((m, 4), T.float32)):
        part = T.alloc_global((m, n, 2), T.float32)
        with T.Kernel(m, threads=128) as b:
            for j in T.Parallel(n):
                part[b, j, 0] = X[b, j] * s
                Y[b, j] = X[b, j] * s
            for j in T.serial(4):
                R[b, j] = part[b, j, 0]

    return rowscale


def _expression_dim():
    n = T.symbolic("n")

    @T.prim_func
    def spread(X: T.Tensor((n * 2 + 1,), T.float32), Y: T.Tensor((n * 2 + 1,), T.float32)):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(n * 2 + 1):
                Y[i] = X[i]

    return spread


def _kernel(func, out_idx):
    kernel = tilecute.compile(func, out_idx=out_idx, target="sm_90a")
    return kernel.kernels[kernel.archs[0]] if hasattr(kernel, "kernels") else kernel


def _general(kernel, inputs):
    n_in = len(kernel.args) - len(kernel.out_idx)
    return kernel._allocate(list(inputs)[:n_in], kernel.out_idx + kernel.workspace_idx)


def _same(a, b):
    assert [(t.shape, t.dtype, t.device) for t in a] == [(t.shape, t.dtype, t.device) for t in b]


def test_planned_outputs_and_workspaces_match_the_general_path(cache_dir):
    kernel = _kernel(_rowscale(), [2, 3])
    x = torch.zeros(5, 48, dtype=torch.float16)
    planned = kernel._allocate_planned((x, 2.0))
    assert planned is not None
    _same(planned, _general(kernel, (x, 2.0)))
    assert [tuple(t.shape) for t in planned] == [(5, 48), (5, 4), (5, 48, 2)]
    assert [t.dtype for t in planned] == [torch.float16, torch.float32, torch.float32]
    # the plan names the input dims, so other extents give other shapes
    assert [tuple(t.shape) for t in kernel._allocate_planned((torch.zeros(3, 7, dtype=torch.float16), 1.0))] \
        == [(3, 7), (3, 4), (3, 7, 2)]


def test_planned_allocation_makes_fake_tensors_under_fake_mode(cache_dir):
    from torch._subclasses.fake_tensor import FakeTensorMode

    kernel = _kernel(_rowscale(), [2, 3])
    with FakeTensorMode() as mode:
        x = mode.from_tensor(torch.zeros(6, 32, dtype=torch.float16))
        outs = kernel._allocate_planned((x, 1.0))
    assert [tuple(t.shape) for t in outs] == [(6, 32), (6, 4), (6, 32, 2)]
    assert all(type(t).__name__ == "FakeTensor" for t in outs)


def test_no_plan_where_a_dim_is_an_expression(cache_dir):
    kernel = _kernel(_expression_dim(), [1])
    x = torch.zeros(9, dtype=torch.float32)
    assert kernel._allocate_planned((x,)) is None
    (y,) = _general(kernel, (x,))
    assert tuple(y.shape) == (9,)


@pytest.mark.parametrize("inputs", [([1.0] * 3, 2.0), (torch.zeros(4), 2.0)],
                         ids=["a list for a tensor", "fewer dims than declared"])
def test_the_plan_steps_aside_for_inputs_it_cannot_read(cache_dir, inputs):
    kernel = _kernel(_rowscale(), [2, 3])
    assert kernel._allocate_planned(inputs) is None


def test_a_repeated_factory_call_does_not_bind_its_arguments_again(cache_dir, monkeypatch):
    calls = []
    bind = eager.bind_arguments

    def counting(*a, **kw):
        calls.append(a[2])
        return bind(*a, **kw)

    monkeypatch.setattr(eager, "bind_arguments", counting)

    @tilecute.jit(out_idx=[-1], target="sm_90a")
    def scaled(n, dtype="float32", scale=2.0, tags=None):
        @T.prim_func
        def scaled_k(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype)):
            with T.Kernel(1, threads=128):
                for i in T.Parallel(n):
                    Y[i] = X[i] * scale
        return scaled_k

    first = scaled(128)
    assert scaled(128) is first and len(calls) == 1
    # another spelling of the same arguments binds once, then finds the same kernel
    assert scaled(128, "float32") is first and scaled(n=128) is first and len(calls) == 3
    assert scaled(128, "float32") is first and len(calls) == 3
    # different values are different kernels
    assert scaled(128, scale=3.0) is not first
    # an unhashable argument is bound on every call (TileLang's key freezes it)
    bound = len(calls)
    tagged = scaled(128, tags=["x"])
    assert scaled(128, tags=["x"]) is tagged and len(calls) == bound + 2
    scaled.cache_clear()
    assert scaled(128) is not first
