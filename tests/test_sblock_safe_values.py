"""``with T.sblock(name):`` inside a T.Kernel, TileLang's nested block scopes of a
``T.annotate_safe_value`` map: the block's map holds for its body and overrides, tensor by
tensor, the kernel's and any enclosing block's.  The frontend keeps the scope
(``SafeValueScope``, printed back as the block); the ``scope_safe_values`` pass turns each
into views of the tensor with values of their own.  IR round trip, the pass before/after,
refusals, sm_90a cubins, and on a GPU the values an out-of-bounds copy reads."""

import pytest

import tilecute
import tilecute.language as T
from tilecute.ir import nodes as N
from tilecute.ir.serialize import from_json, to_json
from tilecute.language import FrontendError
from tilecute.transform.pipeline import run_passes


def nested_scopes(rows: int = 60, cols: int = 60, tile: int = 64):
    """A ragged tile of A copied three times: inside an inner block (pad -7), inside the
    outer block (pad -3), and outside both (the kernel's pad, 5)."""

    @T.prim_func
    def padded(A: T.Tensor((rows, cols), T.int32), In: T.Tensor((tile, tile), T.int32),
               Mid: T.Tensor((tile, tile), T.int32), Out: T.Tensor((tile, tile), T.int32)):
        with T.Kernel(1, threads=128):
            T.annotate_safe_value({A: 5})
            s_in = T.alloc_shared((tile, tile), T.int32)
            s_mid = T.alloc_shared((tile, tile), T.int32)
            with T.sblock("outer"):
                T.reads()
                T.writes()
                T.annotate_safe_value({A: -3})
                with T.sblock("inner"):
                    T.reads(A[0:tile, 0:tile])
                    T.writes(s_in[0:tile, 0:tile])
                    T.copy(A[0:tile, 0:tile], s_in)
                    T.annotate_safe_value({A: -7})  # (the block's map, wherever it stands)
                T.copy(A[0:tile, 0:tile], s_mid)
            for i, j in T.Parallel(tile, tile):
                In[i, j] = s_in[i, j]
                Mid[i, j] = s_mid[i, j]
                Out[i, j] = A[i, j]

    return padded


def view_in_scope():
    """A view of A made before the block reads the block's value inside it."""

    @T.prim_func
    def flat(A: T.Tensor((8, 8), T.float32), B: T.Tensor((80,), T.float32)):
        with T.Kernel(1, threads=128):
            F = T.view(A, (64,))
            with T.sblock("pad"):
                T.annotate_safe_value({A: 1.5})
                for i in T.Parallel(80):
                    B[i] = F[i]

    return flat


def test_the_scope_is_kept_and_printed_back():
    f = nested_scopes()
    text = f.script()
    assert 'with T.sblock("outer"):\n            T.annotate_safe_value({A: -3})\n' in text, text
    assert "T.reads" not in text
    assert T.from_script(text) == f
    assert from_json(to_json(f)) == f
    scopes = [s for s in f.kernels[0].body if isinstance(s, N.SafeValueScope)]
    assert [(s.name, s.values) for s in scopes] == [("outer", (("A", N.Const(-3, "int32")),))]
    assert f.kernels[0].safe_values == (("A", N.Const(5, "int32")),)


def test_pass_gives_each_scope_a_view_of_its_own():
    after = run_passes(nested_scopes(), "sm_90a", until="scope_safe_values")
    k = after.kernels[0]
    assert k.safe_values == (("A", N.Const(5, "int32")), ("A_outer", N.Const(-3, "int32")),
                             ("A_inner", N.Const(-7, "int32")))
    text = after.script()
    assert 'A_outer = T.view(A, (60, 60), "int32")' in text
    assert "T.copy(A_inner[0:64, 0:64], s_in)" in text
    assert "T.copy(A_outer[0:64, 0:64], s_mid)" in text
    assert "Out[i, j] = A[i, j]" in text  # outside both blocks: the kernel's value
    assert not any(isinstance(s, N.SafeValueScope) for s in k.body)


def test_views_made_before_the_scope_are_scoped_too():
    after = run_passes(view_in_scope(), "sm_90a", until="scope_safe_values")
    text = after.script()
    assert 'F_pad = T.view(A, (64,), "float32")' in text and "B[i] = F_pad[i]" in text, text
    assert ("F_pad", N.Const(1.5, "float32")) in after.kernels[0].safe_values


def test_a_block_without_a_map_is_its_body():
    @T.prim_func
    def plain(A: T.Tensor((4,), T.float32)):
        with T.Kernel(1, threads=4):
            tx = T.get_thread_binding()
            with T.sblock("b"):
                T.reads()
                T.writes(A[0:4])
                A[tx] = 1.0

    assert "sblock" not in plain.script() and "A[tx] = T.float32(1.0)" in plain.script()


@pytest.mark.parametrize("make", [nested_scopes, view_in_scope], ids=["nested", "view"])
def test_builds_sm90a_cubins(make, tmp_path):
    info = tilecute.build_cubin(make(), "sm_90a", out_dir=str(tmp_path))
    assert info.kernel_names
    source = (tmp_path / "kernel_cute.py").read_text()
    if make is nested_scopes:
        for pad in ("-7", "-3", "5"):
            assert f"cutlass.Int32({pad})" in source, pad


# ---- refusals ---------------------------------------------------------------------------
def _parse(body: str, kernel: bool = True):
    head = "    with T.Kernel(1, threads=64):\n" if kernel else ""
    pad = "        " if kernel else "    "
    text = f'''
import tilecute.language as T

@T.prim_func
def f(A: T.Tensor((64,), T.float32), S: T.StridedTensor((64,), (2,), T.float32)):
{head}''' + "".join(pad + line + "\n" for line in body.strip("\n").splitlines())
    return T.from_script(text)


@pytest.mark.parametrize("body,kernel,match", [
    ('with T.sblock("b"):\n    A[0] = 1.0', False, r"`with T.sblock\(...\)` outside a T.Kernel"),
    ('with T.sblock("b"):\n    for i in T.serial(2):\n        T.annotate_safe_value({A: 1.0})',
     True, "stands directly in the block's body"),
    ('with T.sblock("b"):\n    T.annotate_safe_value({A: 1.0})\n    T.annotate_safe_value({A: 2.0})',
     True, "'A' already has the safe value .* in the block 'b'"),
    ('with T.sblock("b"):\n    T.annotate_safe_value({S: 1.0})\n    A[0] = S[0]', True,
     "'S' has strides"),
    ('with T.sblock("b"):\n    T.annotate_min_blocks_per_sm(2)', True,
     r"T.annotate_min_blocks_per_sm inside a `with T.sblock\(...\)`"),
    ('with T.sblock("b", no_realize=True):\n    A[0] = 1.0', True, "no_realize"),
    ('with T.sblock("b") as blk:\n    A[0] = 1.0', True, "binds no names"),
    ("T.writes(A[0:4])", True, "T.writes annotates a TVM block"),
])
def test_refusals_name_the_rule(body, kernel, match):
    with pytest.raises(FrontendError, match=match):
        _parse(body, kernel)


# ---- on the GPU -------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_each_scope_reads_its_own_pad():
    import torch

    a = torch.arange(60 * 60, dtype=torch.int32, device="cuda").reshape(60, 60)
    outs = [torch.zeros(64, 64, dtype=torch.int32, device="cuda") for _ in range(3)]
    tilecute.compile(nested_scopes())(a, *outs)
    for out, pad in zip(outs, (-7, -3, 5)):
        want = torch.full((64, 64), pad, dtype=torch.int32)
        want[:60, :60] = a.cpu()
        assert torch.equal(out.cpu(), want), pad


@pytest.mark.gpu
def test_gpu_a_view_reads_the_blocks_pad():
    import torch

    a = torch.randn(8, 8, device="cuda")
    b = torch.zeros(80, device="cuda")
    tilecute.compile(view_in_scope())(a, b)
    want = torch.full((80,), 1.5)
    want[:64] = a.flatten().cpu()
    torch.testing.assert_close(b.cpu(), want)


def test_tma_from_a_tensor_a_block_pads_is_refused():
    body = ('s = T.alloc_shared((64,), T.float32)\nwith T.sblock("b"):\n'
            '    T.annotate_safe_value({A: 1.0})\n'
            '    T.copy(A[0:64], s, prefer_instruction="tma")')
    from tilecute.ir.validate import ValidationError

    with pytest.raises(ValidationError, match='prefer_instruction="tma" from \'A\', which has a '
                                              'T.annotate_safe_value'):
        run_passes(_parse(body), "sm_90a", until="validate")
