"""A seeded generator of small random TileLang programs, each with a torch reference: a
differential fuzzer for silent wrong answers.

``generate(seed)`` returns one :class:`Program` -- deterministic from the seed alone -- whose
``source`` is a module written as a TileLang user writes one (``@tilecute.jit(out_idx=...)``
over a factory returning a ``@T.prim_func``), over the core tile forms and their corners:

* ``copy``: ``T.copy`` global -> shared / fragment -> global in every chain, start-index and
  slice regions, read offsets (also negative: TileLang reads 0 outside the tensor on both
  sides) and write offsets (TileLang skips writes outside), ragged tails, 1-D tiles of a row
  (a unit dim), casts inside the copy;
* ``index``: ``T.Parallel`` nests over int tensors with masks, ``T.if_then_else``, ``//`` /
  ``%`` (TVM's floordiv / floormod), ``T.floordiv`` / ``T.floormod`` / ``T.truncdiv`` /
  ``T.truncmod`` of negative values by positive and negative divisors, ``T.min`` / ``T.max``;
* ``reduce``: ``T.reduce_sum / max / min / abssum / absmax`` along dim 0 / 1 (and -1), clear
  True / False, from shared or fragment into fragment or shared, keep-dim outputs, padded
  (ragged) reduced extents (the zeros TileLang reads take part);
* ``cumsum``: ``T.cumsum`` of shared and fragment tiles, dim 0 / 1, reverse;
* ``cast``: ``T.Cast`` / ``T.copy`` between float32 / float16 / bfloat16 / int8 / uint8 /
  int16 / int32 / int64;
* ``atomic``: scalar ``T.atomic_add`` to colliding places (float32 / int32), tile
  ``T.atomic_add`` of a fragment into one output tile from many blocks;
* ``gemm``: small ``T.gemm`` (transpose_A / transpose_B, float16 / bfloat16, warp policies)
  under ``T.Pipelined`` with 0..3 stages, ragged M / N / K;
* ``serial``: ``T.alloc_var`` accumulators over stepped ``T.serial`` loops;
* ``pipeline``: a ``T.Pipelined`` (1..3 stages) walk over column tiles accumulating a
  fragment, then a row reduction.

Thread counts run from 32 to 512 (some not a power of two) and extents are ragged.

``NEW_FORMS`` (``generate(seed, "new")`` picks one by the seed; ``generate(seed, form)`` any):
the forms where GPU runs found hangs and repeated atomics -- ``attn`` (flash-attention
loops: 1..3 compute warpgroups, causal / tail masks before or after the first GEMM, P in
registers or shared, Q gathered by the threads, TileLang's overlapped-GEMM schedule),
``gemm_grid`` (grids of at most 78 blocks, where a producer warpgroup is added, or a few
more; 128..512 threads, 1..4 stages, float16 / bfloat16 / float8_e4m3), ``smem_gemm`` (GEMM
operands the threads write into shared memory), ``acc_lines`` (row / column statistics of
accumulators with atomics and guarded stores), ``pipe_order`` (``T.Pipelined`` order /
stage lists, three copies a step), ``macro`` (``T.macro`` helpers), ``scalar`` (per-thread
scalar code over constant-unrolled loops, whose indices are Python ints in the generated
code: local accumulators, index math, integer and float intrinsics of them); and the forms
where recent miscompiles clustered: ``dequant`` (4-bit / 2-bit fields packed in uint8 /
int8 tiles, unpacked in ``T.Parallel`` nests as TileLang's dequantizing GEMMs write them --
shifts and masks, zero points, sign extension, ``T.Cast``, per-group scales
``Scale[n, k // group]`` -- from global, shared or fragment tiles into the fragment or
shared A / B operand of a float16 / bfloat16 ``T.gemm``, and int8 x int8 -> int32 GEMMs
rescaled after), ``acc_chain`` (an accumulator through several ``T.Parallel`` nests: row /
column statistics broadcast back, vectors from global, transposed and shifted reads through
shared, fragment copies to other dtypes, masks against run-time bounds), ``gemm2`` (two
chained GEMMs, ``S = Q K^T`` then ``O = P V`` with P the cast of S in registers or shared,
16..128 tiles, transposes, policies, ``T.Pipelined`` over the second GEMM's K), ``conv``
(2-D convolutions over NHWC images as implicit GEMMs: ``T.im2col`` or a gather written out,
kernels 1..5, strides, dilations, paddings, channel counts off the column tile, ragged
pixels and filters), ``sparse`` (block-sparse GEMMs: the ``T.Pipelined`` body one ``if``
on a mask tensor, or on a block index read first) and ``attn_bwd`` (FlashAttention's backward
for a head: a block per key tile, P and dS recomputed from the saved log-sum-exp, dQ added
by ``T.atomic_add``, causal or not).

A Program holds ``name`` (form + seed), ``factory`` (the loaded ``@tilecute.jit`` factory),
``args`` (its keyword arguments), ``make_inputs(device)`` (the arguments that are not
outputs, in order: tensors, and Python ints for scalar parameters), ``reference(inputs)`` (a dict from parameter position to the expected
tensor; a position in ``out_idx`` is a returned output, any other an argument written in place)
and ``tol`` (atol, rtol).  ``run_program`` runs one on a device and compares.

``tests/test_fuzz_tiles.py`` builds a few on the CPU (and runs them on a GPU with ``-m gpu``);
``tests/fuzz_run.py`` runs many seeds on a GPU."""

from __future__ import annotations

import dataclasses
import linecache
import random
import textwrap

import torch

FORMS = ["copy", "index", "reduce", "cumsum", "cast", "atomic", "gemm", "serial", "pipeline", "stencil", "softmax",
         "rank3", "reuse"]

THREADS = [32, 64, 128, 128, 128, 256, 256, 512, 96, 192, 384]

_TORCH = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
          "int8": torch.int8, "uint8": torch.uint8, "int16": torch.int16, "int32": torch.int32,
          "int64": torch.int64, "float64": torch.float64,
          "float8_e4m3": torch.float8_e4m3fn}


@dataclasses.dataclass
class Program:
    name: str
    seed: int
    form: str
    source: str
    args: dict
    out_idx: list
    make_inputs: object
    reference: object
    tol: tuple = (0.0, 0.0)
    _factory: object = None

    @property
    def factory(self):
        if self._factory is None:
            self._factory = load(self.name, self.source)
        return self._factory

    def kernel(self):
        return self.factory(**self.args)


def load(name, source):
    """Execute a program's source as a module whose lines the frontend can read back."""
    fname = f"<fuzz_tiles {name}>"
    linecache.cache[fname] = (len(source), None, source.splitlines(True), fname)
    glb = {"__name__": f"fuzz_{name}", "__file__": fname}
    exec(compile(source, fname, "exec"), glb)
    return glb["factory"]


def _module(body, out_idx, params):
    sig = ", ".join(f"{k}={v!r}" for k, v in params.items())
    head = ("import tilecute\nimport tilecute.language as T\n\n\n"
            f"@tilecute.jit(out_idx={out_idx!r})\ndef factory({sig}):\n")
    return head + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"


def _gen(seed, device="cpu"):
    g = torch.Generator(device="cpu")
    g.manual_seed(seed)
    return g


def _ints(g, shape, lo, hi, dtype):
    return torch.randint(lo, hi, shape, generator=g).to(_TORCH[dtype])


def _ragged(rng, tile, most=3):
    """An extent covering 1..most tiles, usually not a multiple of the tile."""
    n = rng.randint(1, most) * tile
    return max(1, n - rng.choice([0, 1, 3, tile // 2, tile - 1])) if rng.random() < 0.8 else n


# ---- copy chains ------------------------------------------------------------------------------
def gen_copy(rng, seed):
    dtype = rng.choice(["float32", "float16", "bfloat16"])
    threads = rng.choice(THREADS)
    chain = rng.choice(["s", "f", "sf", "fs", "sfs", "row"])
    if chain == "row":
        bm, bn = 1, rng.choice([32, 64, 128, 256])
    else:
        bm, bn = rng.choice([4, 8, 16, 32, 64]), rng.choice([8, 16, 32, 64, 128])
        while bm * bn > 8192:
            bm //= 2
    M, N = _ragged(rng, bm), _ragged(rng, bn)
    ro = 0 if chain == "row" else rng.choice([0, 0, 0, 1, 2, -1])
    co = rng.choice([0, 0, 0, 1, 3, 8, -2])
    wo = 0 if chain == "row" else rng.choice([0, 0, 0, 1])
    wc = rng.choice([0, 0, 0, 2])
    slices = rng.random() < 0.5
    mid = rng.choice([dtype, dtype, "float32"])  # the on-chip tiles' dtype (a cast in the copy)
    scale = chain in ("f", "sf", "fs", "sfs") and rng.random() < 0.7

    def region(buf, r, c, h, w):
        if chain == "row":
            return f"{buf}[by, {c}:{c} + {w}]" if slices else f"{buf}[by, {c}]"
        return f"{buf}[{r}:{r} + {h}, {c}:{c} + {w}]" if slices else f"{buf}[{r}, {c}]"

    src = region("A", "by * bm + ro", "bx * bn + co", "bm", "bn")
    dst = region("B", "by * bm + wo", "bx * bn + wc", "bm", "bn")
    shape = "(bn,)" if chain == "row" else "(bm, bn)"
    kinds = "s" if chain == "row" else chain
    names = [f"t{k}" for k in range(len(kinds))]
    lines = [f"{n} = {'T.alloc_shared' if kind == 's' else 'T.alloc_fragment'}({shape}, mid)"
             for n, kind in zip(names, kinds)]
    lines.append(f"T.copy({src}, {names[0]})")
    scaled = False
    for k, n in enumerate(names):
        if k:
            lines.append(f"T.copy({names[k - 1]}, {n})")
        if scale and kinds[k] == "f" and not scaled:  # an elementwise step on the first fragment
            lines.append("for i, j in T.Parallel(bm, bn):")
            lines.append(f"    {n}[i, j] = {n}[i, j] * T.cast(2, mid) + T.cast(1, mid)")
            scaled = True
    lines.append(f"T.copy({names[-1]}, {dst})")
    body = "\n".join(" " * 12 + line for line in lines)
    src_text = f'''
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
{body}

    return main
    '''
    params = dict(M=M, N=N, bm=bm, bn=bn, ro=ro, co=co, wo=wo, wc=wc, threads=threads, dtype=dtype, mid=mid)

    def make_inputs(device):
        g = _gen(seed)
        return [_ints(g, (M, N), -8, 9, dtype).to(device), torch.full((M, N), -77, dtype=_TORCH[dtype], device=device)]

    def reference(inputs):
        A = inputs[0].cpu().double()
        B = torch.full((M, N), -77.0, dtype=torch.float64)
        for by in range((M + bm - 1) // bm):
            for bx in range((N + bn - 1) // bn):
                tile = torch.zeros(bm, bn, dtype=torch.float64)
                for i in range(bm):
                    r = by * bm + ro + i
                    if not 0 <= r < M:
                        continue
                    c0 = bx * bn + co
                    lo, hi = max(c0, 0), min(c0 + bn, N)
                    if lo < hi:
                        tile[i, lo - c0:hi - c0] = A[r, lo:hi]
                if scaled:
                    tile = tile * 2 + 1
                for i in range(bm):
                    r = by * bm + wo + i
                    if not 0 <= r < M:
                        continue
                    c0 = bx * bn + wc
                    hi = min(c0 + bn, N)
                    if c0 < hi:
                        B[r, c0:hi] = tile[i, :hi - c0]
        return {1: B.to(_TORCH[dtype])}

    return _module(src_text, [], params), params, [], make_inputs, reference, (0.0, 0.0)


# ---- index arithmetic in T.Parallel -------------------------------------------------------------
def _floordiv(a, b):
    return torch.div(a, b, rounding_mode="floor")


def _int_expr(rng, depth):
    """(text, fn(env) -> int64 tensor) of a random int expression over r, c, i, j, a."""
    leaves = ["r", "c", "i", "j", "a", "a", "(r - c)", "(a - 7)"]
    if depth == 0 or rng.random() < 0.25:
        if rng.random() < 0.2:
            k = rng.randint(-9, 9)
            return f"({k})", (lambda env, k=k: torch.full_like(env["a"], k))
        leaf = rng.choice(leaves)
        return leaf, (lambda env, leaf=leaf: eval(leaf, {}, env))
    op = rng.choice(["+", "-", "*k", "//", "%", "T.floordiv", "T.floormod", "T.truncdiv", "T.truncmod",
                     "T.min", "T.max", "ite", "//", "%", ">>", "<<", "&", "|", "^", "cmp"])
    x, fx = _int_expr(rng, depth - 1)
    if op in (">>", "<<"):  # an arithmetic right shift of a negative value floors
        k = rng.randint(0, 3) if op == "<<" else rng.randint(0, 5)
        if op == ">>":
            return f"({x} >> {k})", lambda env: fx(env) >> k
        return f"({x} << {k})", lambda env: fx(env) << k
    if op in ("&", "|", "^"):
        m = rng.choice([1, 3, 6, 15, -4, -16])
        fn = {"&": torch.bitwise_and, "|": torch.bitwise_or, "^": torch.bitwise_xor}[op]
        return f"({x} {op} {m})", lambda env: fn(fx(env), m)
    if op == "cmp":
        y, fy = _int_expr(rng, depth - 1)
        return f"T.Cast(dtype, {x} < {y})", lambda env: (fx(env) < fy(env)).long()
    if op in ("+", "-", "T.min", "T.max"):
        y, fy = _int_expr(rng, depth - 1)
        if op == "+":
            return f"({x} + {y})", lambda env: fx(env) + fy(env)
        if op == "-":
            return f"({x} - {y})", lambda env: fx(env) - fy(env)
        if op == "T.min":
            return f"T.min({x}, {y})", lambda env: torch.minimum(fx(env), fy(env))
        return f"T.max({x}, {y})", lambda env: torch.maximum(fx(env), fy(env))
    if op == "*k":
        k = rng.choice([-3, -2, 2, 3, 5])
        return f"({x} * {k})", lambda env: fx(env) * k
    if op == "ite":
        y, fy = _int_expr(rng, depth - 1)
        z, fz = _int_expr(rng, 0)
        cmp = rng.choice(["<", ">=", "=="])
        cond = f"{z} {cmp} {y}"
        fc = {"<": lambda u, v: u < v, ">=": lambda u, v: u >= v, "==": lambda u, v: u == v}[cmp]
        return (f"T.if_then_else({cond}, {x}, {y})",
                lambda env: torch.where(fc(fz(env), fy(env)), fx(env), fy(env)))
    d = rng.choice([2, 3, 4, 5, 7, 8, 16, -2, -3, -4, -5, -8])
    if op in ("//", "%") and d < 0 and rng.random() < 0.5:
        d = -d
    if op == "//" or op == "T.floordiv":
        text = f"({x} // {d})" if op == "//" else f"T.floordiv({x}, {d})"
        return text, lambda env: _floordiv(fx(env), d)
    if op == "%" or op == "T.floormod":
        text = f"({x} % {d})" if op == "%" else f"T.floormod({x}, {d})"
        return text, lambda env: fx(env) - _floordiv(fx(env), d) * d
    if op == "T.truncdiv":
        return f"T.truncdiv({x}, {d})", lambda env: torch.div(fx(env), d, rounding_mode="trunc")
    return f"T.truncmod({x}, {d})", lambda env: torch.fmod(fx(env), d)


def gen_index(rng, seed):
    threads = rng.choice(THREADS)
    bm, bn = rng.choice([1, 2, 4, 8, 16, 32]), rng.choice([8, 16, 32, 64, 128])
    M, N = _ragged(rng, bm), _ragged(rng, bn)
    dtype = rng.choice(["int32", "int32", "int64"])
    for _ in range(20):
        text, fn = _int_expr(rng, rng.randint(1, 4))
        if "a" in text or rng.random() < 0.3:
            break
    mask = rng.choice(["bounds", "bounds", "ite", "frag"])
    if mask == "frag":
        body = f'''
        acc = T.alloc_fragment((bm, bn), dtype)
        for i, j in T.Parallel(bm, bn):
            r = by * bm + i
            c = bx * bn + j
            a = T.if_then_else(r < M and c < N, A[T.min(r, M - 1), T.min(c, N - 1)], 0)
            acc[i, j] = {text}
        T.copy(acc, B[by * bm, bx * bn])'''
    elif mask == "ite":
        body = f'''
        for i, j in T.Parallel(bm, bn):
            r = by * bm + i
            c = bx * bn + j
            if r < M:
                if c < N:
                    a = A[r, c]
                    B[r, c] = {text}'''
    else:
        body = f'''
        for i, j in T.Parallel(bm, bn):
            r = by * bm + i
            c = bx * bn + j
            if r < M and c < N:
                a = A[r, c]
                B[r, c] = {text}'''
    src_text = f'''
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
{textwrap.indent(textwrap.dedent(body).strip(chr(10)), " " * 12)}

    return main
    '''
    params = dict(M=M, N=N, bm=bm, bn=bn, threads=threads, dtype=dtype)

    def make_inputs(device):
        return [_ints(_gen(seed), (M, N), -40, 41, dtype).to(device)]

    def reference(inputs):
        a = inputs[0].cpu().long()
        r = torch.arange(M).view(M, 1).expand(M, N)
        c = torch.arange(N).view(1, N).expand(M, N)
        i = r % bm
        j = c % bn
        out = fn({"a": a, "r": r, "c": c, "i": i, "j": j})
        return {1: out.to(_TORCH[dtype])}

    return _module(src_text, [1], params), params, [1], make_inputs, reference, (0.0, 0.0)


# ---- reductions ---------------------------------------------------------------------------------
_RED = {
    "sum": (lambda t, d: t.sum(d), lambda a, b: a + b),
    "max": (lambda t, d: t.amax(d), torch.maximum),
    "min": (lambda t, d: t.amin(d), torch.minimum),
    "abssum": (lambda t, d: t.abs().sum(d), lambda a, b: a + b),
    "absmax": (lambda t, d: t.abs().amax(d), lambda a, b: torch.maximum(a, b)),
}


def gen_reduce(rng, seed):
    kind = rng.choice(list(_RED))
    dim = rng.choice([0, 1, 1, -1])
    axis = dim % 2
    threads = rng.choice(THREADS)
    dtype = rng.choice(["float32", "float32", "float16", "bfloat16"])
    acc = rng.choice(["float32", "float32", dtype])
    src_scope = rng.choice(["shared", "fragment", "fragment"])
    dst_scope = rng.choice(["fragment", "fragment", "fragment", "shared"])
    clear = rng.random() < 0.6
    keep = rng.random() < 0.2
    bm, bn = rng.choice([1, 2, 4, 8, 16, 32, 64]), rng.choice([8, 16, 32, 64, 128])
    while bm * bn > 8192:
        bn //= 2
    # the reduced extent of the tensor may be short of the tile's (the copy pads it with 0)
    if axis == 1:
        M, N = _ragged(rng, bm), rng.choice([bn, bn, bn, max(1, bn - rng.randint(1, bn // 2))])
        red, keepn = bn, bm
        grid, lead = "T.ceildiv(M, bm)", "bx * bm, 0"
        out_shape = "(bm, 1)" if keep else "(bm,)"
        O_shape, out_at = ("(M, 1)" if keep else "(M,)"), ("bx * bm, 0" if keep else "bx * bm")
    else:
        M, N = rng.choice([bm, bm, max(1, bm - rng.randint(0, bm // 2))]), _ragged(rng, bn)
        red, keepn = bm, bn
        grid, lead = "T.ceildiv(N, bn)", "0, bx * bn"
        out_shape = "(1, bn)" if keep else "(bn,)"
        O_shape, out_at = ("(1, N)" if keep else "(N,)"), ("0, bx * bn" if keep else "bx * bn")
    alloc = "T.alloc_shared" if src_scope == "shared" else "T.alloc_fragment"
    dalloc = "T.alloc_shared" if dst_scope == "shared" else "T.alloc_fragment"
    init = "" if clear else f"\n            T.copy(I[{out_at}], dst)"
    src_text = f'''
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), I: T.Tensor({O_shape}, acc), O: T.Tensor({O_shape}, acc)):
        with T.Kernel({grid}, threads=threads) as bx:
            src = {alloc}((bm, bn), dtype)
            dst = {dalloc}({out_shape}, acc)
            T.copy(A[{lead}], src){init}
            T.reduce_{kind}(src, dst, dim={dim}, clear={clear})
            T.copy(dst, O[{out_at}])

    return main
    '''
    params = dict(M=M, N=N, bm=bm, bn=bn, threads=threads, dtype=dtype, acc=acc)
    oshape = ((M, 1) if keep else (M,)) if axis == 1 else ((1, N) if keep else (N,))

    def make_inputs(device):
        g = _gen(seed)
        a = (torch.randn((M, N), generator=g) * 4).to(_TORCH[dtype])
        i = (torch.randn(oshape, generator=g) * 4).to(_TORCH[acc])
        return [a.to(device), i.to(device)]

    def reference(inputs):
        a = inputs[0].cpu().double()
        init = inputs[1].cpu().double().reshape(-1)
        # each block's tile, padded with the zeros the copy reads past the tensor
        if axis == 1:
            pad = torch.zeros(M, bn, dtype=torch.float64)
            pad[:, :N] = a
            r = _RED[kind][0](pad, 1)
        else:
            pad = torch.zeros(bm, N, dtype=torch.float64)
            pad[:M] = a
            r = _RED[kind][0](pad, 0)
        if not clear:
            r = _RED[kind][1](init, r)
        return {2: r.reshape(oshape).to(_TORCH[acc])}

    n = red
    if acc in ("float16", "bfloat16"):  # summed at the output's precision (as TileLang does)
        eps = 2.0 ** (-8 if acc == "bfloat16" else -11)
        tol = (2 * eps * 4 * n, 2 * eps)
    else:
        tol = (1e-4 * n, 1e-5)
    return _module(src_text, [2], params), params, [2], make_inputs, reference, tol


# ---- cumsum -------------------------------------------------------------------------------------
def gen_cumsum(rng, seed):
    threads = rng.choice([32, 64, 128, 128, 256, 512])
    two_d = rng.random() < 0.7
    scope = rng.choice(["shared", "shared", "fragment"])
    reverse = rng.random() < 0.5
    dtype = rng.choice(["float32", "float32", "int32"])
    if two_d:
        bm, bn = rng.choice([1, 2, 4, 8, 16, 32]), rng.choice([16, 32, 64, 128])
        dim = rng.choice([0, 1, -1])
        M, N = _ragged(rng, bm, 2), _ragged(rng, bn, 2)
        shape, lead = "(bm, bn)", "by * bm, bx * bn"
        grid = "T.ceildiv(N, bn), T.ceildiv(M, bm)"
        tens = "(M, N)"
        bind = "(bx, by)"
    else:
        bn = rng.choice([32, 64, 128, 256, 512])
        bm, M, N, dim = 1, 1, _ragged(rng, bn, 3), 0
        shape, lead, grid, tens, bind = "(bn,)", "bx * bn", "T.ceildiv(N, bn)", "(N,)", "bx"
    inplace = rng.random() < 0.4
    alloc = "T.alloc_shared" if scope == "shared" else "T.alloc_fragment"
    if inplace:
        ops = f"T.cumsum(src=s, dim={dim}, reverse={reverse})\n            T.copy(s, B[{lead}])"
        dst = ""
    else:
        dst = f"\n            d = {alloc}({shape}, dtype)"
        ops = f"T.cumsum(s, d, dim={dim}, reverse={reverse})\n            T.copy(d, B[{lead}])"
    src_text = f'''
    @T.prim_func
    def main(A: T.Tensor({tens}, dtype), B: T.Tensor({tens}, dtype)):
        with T.Kernel({grid}, threads=threads) as {bind}:
            s = {alloc}({shape}, dtype){dst}
            T.copy(A[{lead}], s)
            {ops}

    return main
    '''
    params = dict(M=M, N=N, bm=bm, bn=bn, threads=threads, dtype=dtype)
    shape_t = (M, N) if two_d else (N,)

    def make_inputs(device):
        return [_ints(_gen(seed), shape_t, -9, 10, dtype).to(device)]

    def reference(inputs):
        a = inputs[0].cpu().double()
        if not two_d:
            a = a.view(1, N)
        Mp, Np = -(-a.shape[0] // bm) * bm, -(-a.shape[1] // bn) * bn
        pad = torch.zeros(Mp, Np, dtype=torch.float64)
        pad[:a.shape[0], :a.shape[1]] = a
        t = pad.view(Mp // bm, bm, Np // bn, bn)
        ax = 1 if dim % 2 == 0 else 3
        if not two_d:
            ax = 3
        if reverse:
            t = t.flip(ax).cumsum(ax).flip(ax)
        else:
            t = t.cumsum(ax)
        out = t.reshape(Mp, Np)[:a.shape[0], :a.shape[1]]
        return {1: out.reshape(shape_t).to(_TORCH[dtype])}

    return _module(src_text, [1], params), params, [1], make_inputs, reference, (0.0, 0.0)


# ---- casts --------------------------------------------------------------------------------------
_CASTS = [("float32", "float16"), ("float32", "bfloat16"), ("float16", "float32"), ("bfloat16", "float32"),
          ("float16", "bfloat16"), ("bfloat16", "float16"), ("float32", "int32"), ("int32", "float32"),
          ("int32", "int8"), ("int8", "int32"), ("float16", "int8"), ("uint8", "float32"),
          ("float32", "uint8"), ("int32", "int16"), ("int64", "int32"), ("int32", "int64"),
          ("float32", "int64"), ("int8", "float16"), ("uint8", "int8"), ("int8", "uint8")]


def gen_cast(rng, seed):
    src, dst = rng.choice(_CASTS)
    threads = rng.choice(THREADS)
    bm, bn = rng.choice([1, 4, 8, 16, 32]), rng.choice([16, 32, 64, 128])
    M, N = _ragged(rng, bm), _ragged(rng, bn)
    how = rng.choice(["parallel", "copy_frag", "copy_shared", "scalar"])
    if how == "parallel":
        body = '''
            f = T.alloc_fragment((bm, bn), src)
            g = T.alloc_fragment((bm, bn), dst)
            T.copy(A[by * bm, bx * bn], f)
            for i, j in T.Parallel(bm, bn):
                g[i, j] = T.Cast(dst, f[i, j])
            T.copy(g, B[by * bm, bx * bn])'''
    elif how == "copy_frag":
        body = '''
            f = T.alloc_fragment((bm, bn), dst)
            T.copy(A[by * bm, bx * bn], f)
            T.copy(f, B[by * bm, bx * bn])'''
    elif how == "copy_shared":
        body = '''
            s = T.alloc_shared((bm, bn), src)
            g = T.alloc_fragment((bm, bn), dst)
            T.copy(A[by * bm, bx * bn], s)
            T.copy(s, g)
            T.copy(g, B[by * bm, bx * bn])'''
    else:
        body = '''
            for i, j in T.Parallel(bm, bn):
                if by * bm + i < M and bx * bn + j < N:
                    B[by * bm + i, bx * bn + j] = T.cast(A[by * bm + i, bx * bn + j], dst)'''
    src_text = f'''
    @T.prim_func
    def main(A: T.Tensor((M, N), src), B: T.Tensor((M, N), dst)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
{textwrap.indent(textwrap.dedent(body).strip(chr(10)), " " * 12)}

    return main
    '''
    params = dict(M=M, N=N, bm=bm, bn=bn, threads=threads, src=src, dst=dst)

    def make_inputs(device):
        g = _gen(seed)
        lo, hi = {"int8": (-128, 128), "uint8": (0, 256), "int16": (-3000, 3000), "int32": (-100000, 100000),
                  "int64": (-(1 << 40), 1 << 40)}.get(src, (0, 0))
        if src.startswith("float") or src == "bfloat16":
            x = torch.randn((M, N), generator=g) * 50
            if dst in ("int8",):
                x = x.clamp(-127, 127)
            if dst == "uint8":
                x = x.abs().clamp(0, 255)
            if dst in ("float16",):
                x = x * 10
            return [x.to(_TORCH[src]).to(device)]
        if src == "int32" and dst in ("int8", "int16"):
            lo, hi = -(1 << 30), 1 << 30
        if src == "int64" and dst == "int32":
            lo, hi = -(1 << 31), (1 << 31)
        return [torch.randint(lo, hi, (M, N), generator=g, dtype=torch.int64).to(_TORCH[src]).to(device)]

    def reference(inputs):
        a = inputs[0].cpu()
        if src.startswith("int") or src == "uint8":
            if dst.startswith("int") or dst == "uint8":  # wrap to the narrower type
                bits = {"int8": 8, "uint8": 8, "int16": 16, "int32": 32, "int64": 64}[dst]
                v = a.long()
                if bits < 64:
                    v = v & ((1 << bits) - 1)
                    if dst != "uint8":
                        v = torch.where(v >= (1 << (bits - 1)), v - (1 << bits), v)
                return {1: v.to(_TORCH[dst])}
            return {1: a.double().to(_TORCH[dst]) if src != "int64" else a.to(_TORCH[dst])}
        return {1: a.float().to(_TORCH[dst]) if dst in ("float16", "bfloat16") and src != "float32"
                else a.to(_TORCH[dst])}

    return _module(src_text, [1], params), params, [1], make_inputs, reference, (0.0, 0.0)


# ---- atomics ------------------------------------------------------------------------------------
def gen_atomic(rng, seed):
    threads = rng.choice(THREADS)
    dtype = rng.choice(["float32", "int32"])
    tile = rng.random() < 0.35
    if tile:
        bm, bn = rng.choice([4, 8, 16, 32]), rng.choice([16, 32, 64])
        S = rng.randint(2, 9)
        M, N = _ragged(rng, bm, 2), _ragged(rng, bn, 2)
        src_text = '''
        @T.prim_func
        def main(A: T.Tensor((S, M, N), dtype), O: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), S, threads=threads) as (bx, by, bz):
                f = T.alloc_fragment((bm, bn), dtype)
                T.copy(A[bz, by * bm, bx * bn], f)
                for i, j in T.Parallel(bm, bn):
                    f[i, j] = f[i, j] * 2
                T.atomic_add(O[by * bm, bx * bn], f)

        return main
        '''
        params = dict(S=S, M=M, N=N, bm=bm, bn=bn, threads=threads, dtype=dtype)

        def make_inputs(device):
            g = _gen(seed)
            return [_ints(g, (S, M, N), -20, 21, dtype).to(device), _ints(g, (M, N), -5, 6, dtype).to(device)]

        def reference(inputs):
            a, o = inputs[0].cpu().double(), inputs[1].cpu().double()
            return {1: (o + 2 * a.sum(0)).to(_TORCH[dtype])}
    else:
        L = rng.choice([100, 257, 1000, 4096, 33])
        K = rng.choice([1, 3, 7, 32, 100])
        per = rng.choice([1, 2, 4])
        stride = rng.choice([1, 5, -3])
        op = rng.choice(["add", "add", "max", "min"])
        src_text = f'''
        @T.prim_func
        def main(A: T.Tensor((L,), dtype), O: T.Tensor((K,), dtype)):
            with T.Kernel(T.ceildiv(L, threads * per), threads=threads) as bx:
                for t in T.Parallel(threads * per):
                    n = bx * threads * per + t
                    if n < L:
                        T.atomic_{op}(O[(n * stride) % K], A[n])

        return main
        '''
        params = dict(L=L, K=K, per=per, stride=stride, threads=threads, dtype=dtype)

        def make_inputs(device):
            g = _gen(seed)
            return [_ints(g, (L,), -20, 21, dtype).to(device), _ints(g, (K,), -5, 6, dtype).to(device)]

        def reference(inputs):
            a, o = inputs[0].cpu().double(), inputs[1].cpu().double().clone()
            idx = (torch.arange(L) * stride) % K
            if op == "add":
                o.index_add_(0, idx, a)
            else:
                o = o.scatter_reduce(0, idx, a, "amax" if op == "max" else "amin", include_self=True)
            return {1: o.to(_TORCH[dtype])}
    return _module(src_text, [], params), params, [], make_inputs, reference, (0.0, 0.0)


# ---- gemm ---------------------------------------------------------------------------------------
def gen_gemm(rng, seed):
    dtype = rng.choice(["float16", "bfloat16"])
    ta, tb = rng.random() < 0.3, rng.random() < 0.5
    threads = rng.choice([128, 128, 256, 64, 32])
    bm = rng.choice([16, 32, 64, 64, 128])
    bn = rng.choice([16, 32, 64, 64, 128])
    bk = rng.choice([16, 32, 64])
    while bm * bn > 128 * 64:
        bn //= 2
    stages = rng.choice([0, 1, 2, 3])
    policy = rng.choice(["Square", "FullRow", "FullCol", None])
    M, N, K = _ragged(rng, bm, 2), _ragged(rng, bn, 2), rng.choice([bk, 2 * bk, 3 * bk, 4 * bk - 8, bk + 8])
    out = rng.choice(["float32", "float32", dtype])
    a_frag = not ta and rng.random() < 0.2  # T.gemm of a fragment A (TileLang's RS form)
    epi = rng.choice(["none", "none", "relu_rowsum", "scale"])  # work on the accumulator's layout
    if epi == "scale" and out != "float32":
        epi = "none"
    a_shape, a_tile, a_at = ("(K, M)", "(bk, bm)", "k * bk, by * bm") if ta else ("(M, K)", "(bm, bk)", "by * bm, k * bk")
    b_shape, b_tile, b_at = ("(N, K)", "(bn, bk)", "bx * bn, k * bk") if tb else ("(K, N)", "(bk, bn)", "k * bk, bx * bn")
    kw = []
    if ta:
        kw.append("transpose_A=True")
    if tb:
        kw.append("transpose_B=True")
    if policy:
        kw.append(f"policy=T.GemmWarpPolicy.{policy}")
    kws = (", " + ", ".join(kw)) if kw else ""
    loop = f"T.Pipelined(T.ceildiv(K, bk), num_stages={stages})" if stages else "T.serial(T.ceildiv(K, bk))"
    a_op = "T.copy(As, Af)\n                " if a_frag else ""
    a_alloc = "\n            Af = T.alloc_fragment((bm, bk), dtype)" if a_frag else ""
    epilogue = {"none": "", "relu_rowsum": """
            for i, j in T.Parallel(bm, bn):
                Cf[i, j] = T.max(Cf[i, j], 0)
            rs = T.alloc_fragment((bm,), "float32")
            T.reduce_sum(Cf, rs, dim=1)
            for i in T.Parallel(bm):
                if by * bm + i < M:
                    T.atomic_add(R[by * bm + i], rs[i])""", "scale": """
            for i, j in T.Parallel(bm, bn):
                Cf[i, j] = Cf[i, j] * T.cast(by * bm + i + 1, "float32") - T.cast(bx * bn + j, "float32")"""}[epi]
    src_text = f'''
    @T.prim_func
    def main(A: T.Tensor({a_shape}, dtype), B: T.Tensor({b_shape}, dtype), R: T.Tensor((M,), "float32"),
             C: T.Tensor((M, N), out)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            As = T.alloc_shared({a_tile}, dtype)
            Bs = T.alloc_shared({b_tile}, dtype)
            Cf = T.alloc_fragment((bm, bn), "float32"){a_alloc}
            T.clear(Cf)
            for k in {loop}:
                T.copy(A[{a_at}], As)
                T.copy(B[{b_at}], Bs)
                {a_op}T.gemm({'Af' if a_frag else 'As'}, Bs, Cf{kws}){epilogue}
            T.copy(Cf, C[by * bm, bx * bn])

    return main
    '''
    params = dict(M=M, N=N, K=K, bm=bm, bn=bn, bk=bk, threads=threads, dtype=dtype, out=out)

    def make_inputs(device):
        g = _gen(seed)
        a = _ints(g, (K, M) if ta else (M, K), -2, 3, dtype)
        b = _ints(g, (N, K) if tb else (K, N), -2, 3, dtype)
        return [a.to(device), b.to(device), torch.zeros(M, device=device)]

    def reference(inputs):
        a, b = inputs[0].cpu().double(), inputs[1].cpu().double()
        c = (a.T if ta else a) @ (b.T if tb else b)
        if epi == "relu_rowsum":
            c = c.clamp(min=0)
            return {2: c.sum(1).float(), 3: c.to(_TORCH[out])}
        if epi == "scale":
            c = c * (torch.arange(M).view(M, 1) + 1) - torch.arange(N).view(1, N)
        return {3: c.to(_TORCH[out])}

    tol = (0.0, 0.0) if out == "float32" or (dtype == "float16" and 4 * K <= 2048) else (0.0, 1e-2)
    return _module(src_text, [3], params), params, [3], make_inputs, reference, tol


# ---- per-thread loops and vars ------------------------------------------------------------------
def gen_serial(rng, seed):
    threads = rng.choice(THREADS)
    rows = rng.choice([threads, threads // 2, threads * 2]) if threads >= 64 else threads
    M = _ragged(rng, rows)
    N = rng.choice([1, 5, 17, 64, 100])
    start, step = rng.choice([0, 0, 1, 2]), rng.choice([1, 1, 2, 3])
    dtype = rng.choice(["float32", "int32"])
    init = rng.choice(["0", "1"])
    src_text = f'''
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), O: T.Tensor((M,), dtype), C: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, rows), threads=threads) as bx:
            for t in T.Parallel(rows):
                row = bx * rows + t
                acc = T.alloc_var(dtype, init={init})
                cnt = T.alloc_var("int32")
                cnt = 0
                if row < M:
                    for k in T.serial(start, N, step):
                        acc += A[row, k] * T.cast(k % 3 - 1, dtype)
                        if A[row, k] > 0:
                            cnt += 1
                    O[row] = acc
                    C[row] = cnt

    return main
    '''
    params = dict(M=M, N=N, rows=rows, start=start, step=step, threads=threads, dtype=dtype)

    def make_inputs(device):
        return [_ints(_gen(seed), (M, N), -9, 10, dtype).to(device)]

    def reference(inputs):
        a = inputs[0].cpu().double()
        ks = torch.arange(start, N, step) if start < N else torch.arange(0)
        w = (ks % 3 - 1).double()
        o = float(init) + (a[:, ks] * w).sum(1)
        c = (a[:, ks] > 0).sum(1).int()
        return {1: o.to(_TORCH[dtype]), 2: c}

    return _module(src_text, [1, 2], params), params, [1, 2], make_inputs, reference, (0.0, 0.0)


def gen_pipeline(rng, seed):
    threads = rng.choice(THREADS)
    stages = rng.choice([1, 2, 3])
    bm, bk = rng.choice([8, 16, 32, 64]), rng.choice([32, 64, 128])
    while bm * bk > 4096:
        bk //= 2
    M, N = _ragged(rng, bm, 2), _ragged(rng, bk, 4)
    dtype = rng.choice(["float32", "float16"])
    via = rng.choice(["shared", "shared", "fragment"])
    stage = (
        "s = T.alloc_shared((bm, bk), dtype)" if via == "shared" else "s = T.alloc_fragment((bm, bk), dtype)")
    src_text = f'''
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), O: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=threads) as bx:
            {stage}
            acc = T.alloc_fragment((bm, bk), "float32")
            row = T.alloc_fragment((bm,), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(N, bk), num_stages=stages):
                T.copy(A[bx * bm, k * bk], s)
                for i, j in T.Parallel(bm, bk):
                    acc[i, j] += T.cast(s[i, j], "float32") * T.cast((k * bk + j) % 4, "float32")
            T.reduce_sum(acc, row, dim=1)
            T.copy(row, O[bx * bm])

    return main
    '''
    params = dict(M=M, N=N, bm=bm, bk=bk, stages=stages, threads=threads, dtype=dtype)

    def make_inputs(device):
        return [_ints(_gen(seed), (M, N), -9, 10, dtype).to(device)]

    def reference(inputs):
        a = inputs[0].cpu().double()
        w = (torch.arange(N) % 4).double()
        return {1: (a * w).sum(1).float()}

    return _module(src_text, [1], params), params, [1], make_inputs, reference, (0.0, 0.0)


# ---- shared sub-regions, fills and halos --------------------------------------------------------
def gen_stencil(rng, seed):
    """A tile copied into rows 1..bm of a (bm + 2, bn) shared buffer whose first and last rows
    are filled (T.fill of a slice), or the whole (bm + 2, bn) buffer copied from one row
    above the tile (a negative start in the first block), then a 3-point column stencil in
    T.Parallel."""
    threads = rng.choice(THREADS)
    dtype = rng.choice(["float32", "float16"])
    bm, bn = rng.choice([4, 8, 16, 32]), rng.choice([16, 32, 64, 128])
    M, N = _ragged(rng, bm), _ragged(rng, bn)
    halo = rng.choice(["fill", "copy"])
    edge = rng.choice([0, 1, 3])
    out_frag = rng.random() < 0.5
    # (TileLang guards no dim of extent 1 in a copy: the halo rows are read by one copy of
    # bm + 2 rows starting at a negative row, not by 1-row copies)
    if halo == "fill":
        pre = (f"T.fill(s[0, 0:bn], {edge})\n            T.fill(s[bm + 1:bm + 2, :], {edge})\n"
               "            T.copy(A[by * bm:by * bm + bm, bx * bn:bx * bn + bn], s[1:bm + 1, 0:bn])")
    else:
        pre = "T.copy(A[by * bm - 1, bx * bn], s)"
    if out_frag:
        post = ("o = T.alloc_fragment((bm, bn), dtype)\n"
                "            for i, j in T.Parallel(bm, bn):\n"
                "                o[i, j] = s[i, j] + s[i + 1, j] * T.cast(2, dtype) - s[i + 2, j]\n"
                "            T.copy(o, B[by * bm, bx * bn])")
    else:
        post = ("for i, j in T.Parallel(bm, bn):\n"
                "                if by * bm + i < M and bx * bn + j < N:\n"
                "                    B[by * bm + i, bx * bn + j] = s[i, j] + s[i + 1, j] * T.cast(2, dtype)"
                " - s[i + 2, j]")
    src_text = f"""
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            s = T.alloc_shared((bm + 2, bn), dtype)
            {pre}
            {post}

    return main
    """
    params = dict(M=M, N=N, bm=bm, bn=bn, threads=threads, dtype=dtype)

    def make_inputs(device):
        return [_ints(_gen(seed), (M, N), -8, 9, dtype).to(device)]

    def reference(inputs):
        a = inputs[0].cpu().double()
        Mp, Np = -(-M // bm) * bm, -(-N // bn) * bn
        pad = torch.zeros(Mp + 2, Np, dtype=torch.float64)
        pad[1:M + 1, :N] = a
        up, mid, down = pad[:-2], pad[1:-1], pad[2:]
        if halo == "fill":  # each tile's first / last halo row is the fill value
            up, down = up.clone(), down.clone()
            up[0::bm] = edge
            down[bm - 1::bm] = edge
        out = up + 2 * mid - down
        return {1: out[:M, :N].to(_TORCH[dtype])}

    return _module(src_text, [1], params), params, [1], make_inputs, reference, (0.0, 0.0)


# ---- a masked row softmax ----------------------------------------------------------------------
def gen_softmax(rng, seed):
    threads = rng.choice(THREADS)
    bm, bn = rng.choice([1, 2, 4, 8, 16, 32, 64]), rng.choice([16, 32, 64, 128, 256])
    while bm * bn > 8192:
        bm //= 2
    M, N = _ragged(rng, bm), rng.choice([bn, bn, bn - rng.randint(1, bn // 2)])
    causal = rng.random() < 0.5
    dtype = rng.choice(["float32", "float16", "bfloat16"])
    scale = rng.choice([1.0, 0.5, 0.125])
    mask = "(bx * bm + i) % N >= j and j < N" if causal else "j < N"
    src_text = f"""
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, bm), threads=threads) as bx:
            x = T.alloc_fragment((bm, bn), "float32")
            mx = T.alloc_fragment((bm,), "float32")
            sm = T.alloc_fragment((bm,), "float32")
            T.copy(X[bx * bm, 0], x)
            for i, j in T.Parallel(bm, bn):
                x[i, j] = T.if_then_else({mask}, x[i, j] * {scale}, -T.infinity("float32"))
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(bm, bn):
                x[i, j] = T.exp2((x[i, j] - mx[i]) * 1.4426950408889634)
            T.reduce_sum(x, sm, dim=1)
            for i, j in T.Parallel(bm, bn):
                x[i, j] = x[i, j] / sm[i]
            T.copy(x, Y[bx * bm, 0])

    return main
    """
    params = dict(M=M, N=N, bm=bm, bn=bn, threads=threads, dtype=dtype)

    def make_inputs(device):
        return [(torch.randn((M, N), generator=_gen(seed)) * 3).to(_TORCH[dtype]).to(device)]

    def reference(inputs):
        x = inputs[0].cpu().double() * scale
        if causal:
            r = torch.arange(M).view(M, 1) % N
            c = torch.arange(N).view(1, N)
            x = x.masked_fill(c > r, float("-inf"))
        return {1: torch.softmax(x, 1).to(_TORCH[dtype])}

    tol = (1e-5, 1e-4) if dtype == "float32" else (2e-3, 1e-2)
    return _module(src_text, [1], params), params, [1], make_inputs, reference, tol


# ---- rank-3 tensors, unit dims -------------------------------------------------------------------
def gen_rank3(rng, seed):
    """Tiles of a (Bt, M, N) tensor: a (bm, bn) tile at X[b, r0, c0] (the unit dim dropped) or
    a (1, bm, bn) one, written to a (M, Bt, N) or (Bt, N, M) tensor by a copy with a unit dim
    in the middle or by a T.Parallel store."""
    threads = rng.choice(THREADS)
    dtype = rng.choice(["float32", "float16", "int32"])
    bm, bn = rng.choice([1, 4, 8, 16, 32]), rng.choice([1, 8, 16, 32, 64])
    if bm == 1 and bn == 1:
        bn = 16
    Bt, M, N = rng.randint(1, 3), _ragged(rng, bm), _ragged(rng, bn)
    keep = rng.choice(["2d", "2d", "keep_unit"])
    out = rng.choice(["swap01", "transpose"])
    scope = rng.choice(["shared", "fragment"])
    alloc = "T.alloc_shared" if scope == "shared" else "T.alloc_fragment"
    if keep == "keep_unit":
        tile, read = "(1, bm, bn)", "T.copy(X[b:b + 1, by * bm:by * bm + bm, bx * bn:bx * bn + bn], t)"
        at = "t[0, i, j]"
    else:
        tile, read, at = "(bm, bn)", "T.copy(X[b, by * bm, bx * bn], t)", "t[i, j]"
    if out == "swap01":
        o_shape = "(M, Bt, N)"
        if keep == "keep_unit" or rng.random() < 0.5:
            write = ("for i, j in T.Parallel(bm, bn):\n"
                     "                if by * bm + i < M and bx * bn + j < N:\n"
                     f"                    Y[by * bm + i, b, bx * bn + j] = {at} + T.cast(b, dtype)")
        else:
            write = ("for i, j in T.Parallel(bm, bn):\n"
                     "                t[i, j] = t[i, j] + T.cast(b, dtype)\n"
                     "            T.copy(t, Y[by * bm:by * bm + bm, b, bx * bn:bx * bn + bn])")
    else:
        o_shape = "(Bt, N, M)"
        write = ("for i, j in T.Parallel(bm, bn):\n"
                 "                if by * bm + i < M and bx * bn + j < N:\n"
                 f"                    Y[b, bx * bn + j, by * bm + i] = {at} + T.cast(b, dtype)")
    src_text = f"""
    @T.prim_func
    def main(X: T.Tensor((Bt, M, N), dtype), Y: T.Tensor({o_shape}, dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), Bt, threads=threads) as (bx, by, b):
            t = {alloc}({tile}, dtype)
            {read}
            {write}

    return main
    """
    params = dict(Bt=Bt, M=M, N=N, bm=bm, bn=bn, threads=threads, dtype=dtype)

    def make_inputs(device):
        return [_ints(_gen(seed), (Bt, M, N), -50, 51, dtype).to(device)]

    def reference(inputs):
        x = inputs[0].cpu().double() + torch.arange(Bt).view(Bt, 1, 1)
        y = x.permute(1, 0, 2) if out == "swap01" else x.permute(0, 2, 1)
        return {1: y.contiguous().to(_TORCH[dtype])}

    return _module(src_text, [1], params), params, [1], make_inputs, reference, (0.0, 0.0)


# ---- a shared buffer reused across loop iterations ---------------------------------------------
def gen_reuse(rng, seed):
    """Each step of a T.serial / T.Pipelined loop overwrites a shared row (a copy, or a
    T.Parallel store) that threads then read at other positions (rotated, reversed): the
    write of step k + 1 must wait for the reads of step k."""
    threads = rng.choice(THREADS)
    n = rng.choice([32, 64, 128, 256, 512])
    steps = rng.randint(1, 6)
    rot = rng.randint(1, n - 1)
    loop = rng.choice(["T.serial(steps)", "T.Pipelined(steps, num_stages=1)", "T.Pipelined(steps, num_stages=2)",
                       "T.serial(0, steps)"])
    fill = rng.choice(["copy", "parallel"])
    load = ("T.copy(A[k, 0:n], s)" if fill == "copy" else
            "for t in T.Parallel(n):\n                    s[t] = A[k, t] * 2.0")
    src_text = f"""
    @T.prim_func
    def main(A: T.Tensor((steps, n), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            s = T.alloc_shared((n,), "float32")
            acc = T.alloc_fragment((n,), "float32")
            T.clear(acc)
            for k in {loop}:
                {load}
                for t in T.Parallel(n):
                    acc[t] += s[(t + rot) % n] * T.cast(k + 1, "float32") - s[n - 1 - t]
            T.copy(acc, B)

    return main
    """
    params = dict(steps=steps, n=n, rot=rot, threads=threads)

    def make_inputs(device):
        return [_ints(_gen(seed), (steps, n), -9, 10, "float32").to(device)]

    def reference(inputs):
        a = inputs[0].cpu().double() * (2.0 if fill == "parallel" else 1.0)
        t = torch.arange(n)
        acc = torch.zeros(n, dtype=torch.float64)
        for k in range(steps):
            acc += a[k, (t + rot) % n] * (k + 1) - a[k, n - 1 - t]
        return {1: acc.float()}

    return _module(src_text, [1], params), params, [1], make_inputs, reference, (0.0, 0.0)


# =================================================================================================
# Forms where hand-written programs found bugs on the GPU (hangs of warp-specialized / multi-
# warpgroup GEMMs, atomics run once per thread holding a row): ``generate(seed, "new")`` picks
# one of NEW_FORMS by the seed.
# =================================================================================================
_POLICIES = ["FullRow", "FullRow", "Square", "FullCol", None]


def _kw(*pairs):
    """', a=b, c=d' of the pairs whose value is not None."""
    kw = [f"{k}={v}" for k, v in pairs if v is not None]
    return (", " + ", ".join(kw)) if kw else ""


def _pol(policy):
    return f"T.GemmWarpPolicy.{policy}" if policy else None


def _round(t, dtype):
    """A float64 tensor rounded through ``dtype`` (as the kernel's casts round it)."""
    return t.to(_TORCH[dtype]).double()


# ---- attention-like loops ------------------------------------------------------------------------
def gen_attn(rng, seed):
    """A flash-attention forward: per key tile, S = Q K^T (T.gemm, transpose_B) onto a masked
    fill (causal and / or the key tail), the running row max (T.reduce_max, clear=False), the
    exp2 rescale of the row sums and of the output accumulator, P = T.copy(S, a 16-bit
    fragment or shared tile) and O += P V (a second T.gemm); 1..3 compute warpgroups, the
    warp policies of both GEMMs, 64 / 128 query rows, ragged query and key lengths."""
    dtype = rng.choice(["float16", "float16", "bfloat16"])
    threads = rng.choice([128, 128, 256, 256, 384])
    bm = rng.choice([64, 128]) if threads < 384 else 192
    bn = rng.choice([32, 64, 64, 128])
    D = rng.choice([32, 64, 64, 128])
    while (bm * D + 2 * bn * D) * 2 * 2 > 160 * 1024:
        bn //= 2
    stages = rng.choice([1, 2, 2, 3])
    causal = rng.random() < 0.5
    B, H = rng.randint(1, 2), rng.choice([1, 2, 3, 3, 40])  # (40 heads: more blocks than SMs, no producer)
    Sq = _ragged(rng, bm, 2)
    Skv = Sq if causal else _ragged(rng, bn, 4)
    pol1 = rng.choice(_POLICIES)
    # (the row statistics serve both accumulators: policies giving them different warp
    # arrangements are refused by name, as TileLang's layout inference finds a conflict)
    pol2 = pol1 if rng.random() < 0.8 else rng.choice(["FullRow", None, "Square"])
    p_shared = rng.random() < 0.3
    out = rng.choice([dtype, dtype, "float32"])
    epi = rng.choice(["direct", "direct", "shared", "guarded"])
    sm_scale = 1.0 / D ** 0.5
    scale = sm_scale * 1.4426950408889634
    # Q by a copy, or written into shared by the threads (a guarded gather: the barrier and
    # proxy fence before the first GEMM reads it, above the warpgroups' MMA turns)
    if rng.random() < 0.3:
        q_load = ("for i, d in T.Parallel(bm, D):\n"
                  "                qs[i, d] = T.if_then_else(bx * bm + i < Sq, Q[bz, by, T.min(bx * bm + i, Sq - 1), d],"
                  " T.cast(0, dtype))")
    else:
        q_load = "T.copy(Q[bz, by, bx * bm:(bx + 1) * bm, :], qs)"
    if causal:
        mask = "bx * bm + i >= k * bn + j"
        if Skv % bn:
            mask += " and k * bn + j < Skv"
        n_iter = "T.min(T.ceildiv(Skv, bn), T.ceildiv((bx + 1) * bm, bn))"
    else:
        mask = "k * bn + j < Skv" if Skv % bn or rng.random() < 0.3 else None
        n_iter = "T.ceildiv(Skv, bn)"
    # the mask as the GEMM's starting value (TileLang's examples), or applied after a GEMM that
    # clears its accumulator (the form whose GEMMs the MMA overlap pipelines)
    # TileLang's schedule of the overlapped GEMMs (order / stage / group lists: the first GEMM
    # in stage 0, the cast and P V in stage 1 before the next softmax), P in registers; its
    # first GEMM mostly clears its accumulator (tilecute refuses the mask as its starting
    # value there by name, OverlapError)
    scheduled = not p_shared and rng.random() < 0.3
    after = rng.random() < (0.85 if scheduled else 0.5)
    g1_clear = None
    if after:
        init, g1_clear = "", "True"
        post_mask = "" if not mask else (
            f"\n                for i, j in T.Parallel(bm, bn):\n"
            f"                    s[i, j] = T.if_then_else({mask}, s[i, j], -T.infinity(\"float32\"))")
    elif mask:
        post_mask = ""
        init = (f"for i, j in T.Parallel(bm, bn):\n"
                f"                    s[i, j] = T.if_then_else({mask}, 0, -T.infinity(\"float32\"))")
    else:
        init, post_mask = "T.clear(s)", ""
    cast, rescale = "T.copy(s, p)", "for i, j in T.Parallel(bm, D):\n                    o[i, j] *= sc[i]"
    if scheduled:  # (the rescale before the cast: the cast is a group of its own)
        stages = 2
        cast_and_rescale = rescale + "\n                " + cast
        g1 = 1 + (init != "") + (post_mask != "")
        ids = iter(range(100))
        groups = [[next(ids)], [next(ids) for _ in range(g1)], [next(ids) for _ in range(7)], [next(ids)],
                  [next(ids)], [next(ids)]]
        schedule = f"num_stages=2, order=[-1, 0, 3, 1, -1, 2], stage=[-1, 0, 0, 1, -1, 1], group={groups}"
    else:
        cast_and_rescale = cast + "\n                " + rescale
        schedule = "num_stages=stages"
    if p_shared:
        p_alloc, p_name = "p = T.alloc_shared((bm, bn), dtype)", "p"
    else:
        p_alloc, p_name = "p = T.alloc_fragment((bm, bn), dtype)", "p"
    if epi == "direct":
        store = "T.copy(o, O[bz, by, bx * bm:(bx + 1) * bm, :])"
    elif epi == "shared":
        store = ("os = T.alloc_shared((bm, D), out)\n"
                 "            T.copy(o, os)\n"
                 "            T.copy(os, O[bz, by, bx * bm:(bx + 1) * bm, :])")
    else:
        store = ("for i, j in T.Parallel(bm, D):\n"
                 "                if bx * bm + i < Sq:\n"
                 "                    O[bz, by, bx * bm + i, j] = o[i, j]")
    src_text = "\n".join(ln for ln in f'''
    @T.prim_func
    def main(Q: T.Tensor((B, H, Sq, D), dtype), K: T.Tensor((B, H, Skv, D), dtype),
             V: T.Tensor((B, H, Skv, D), dtype), O: T.Tensor((B, H, Sq, D), out)):
        with T.Kernel(T.ceildiv(Sq, bm), H, B, threads=threads) as (bx, by, bz):
            qs = T.alloc_shared((bm, D), dtype)
            ks = T.alloc_shared((bn, D), dtype)
            vs = T.alloc_shared((bn, D), dtype)
            s = T.alloc_fragment((bm, bn), "float32")
            {p_alloc}
            o = T.alloc_fragment((bm, D), "float32")
            mx = T.alloc_fragment((bm,), "float32")
            mp = T.alloc_fragment((bm,), "float32")
            sc = T.alloc_fragment((bm,), "float32")
            ss = T.alloc_fragment((bm,), "float32")
            l = T.alloc_fragment((bm,), "float32")
            {q_load}
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(mx, -T.infinity("float32"))
            for k in T.Pipelined({n_iter}, {schedule}):
                T.copy(K[bz, by, k * bn:(k + 1) * bn, :], ks)
                {init}
                T.gemm(qs, ks, s, transpose_B=True{_kw(("clear_accum", g1_clear), ("policy", _pol(pol1)))}){post_mask}
                T.copy(mx, mp)
                T.reduce_max(s, mx, dim=1, clear=False)
                for i in T.Parallel(bm):
                    sc[i] = T.exp2(mp[i] * scale - mx[i] * scale)
                for i, j in T.Parallel(bm, bn):
                    s[i, j] = T.exp2(s[i, j] * scale - mx[i] * scale)
                T.reduce_sum(s, ss, dim=1)
                for i in T.Parallel(bm):
                    l[i] = l[i] * sc[i] + ss[i]
                {cast_and_rescale}
                T.copy(V[bz, by, k * bn:(k + 1) * bn, :], vs)
                T.gemm({p_name}, vs, o{_kw(("policy", _pol(pol2)))})
            for i, j in T.Parallel(bm, D):
                o[i, j] /= l[i]
            {store}

    return main
    '''.split("\n") if ln.strip() or not ln)
    params = dict(B=B, H=H, Sq=Sq, Skv=Skv, D=D, bm=bm, bn=bn, stages=stages, threads=threads, dtype=dtype,
                  out=out, scale=scale)

    def make_inputs(device):
        g = _gen(seed)
        q = torch.randn((B, H, Sq, D), generator=g).to(_TORCH[dtype])
        k = torch.randn((B, H, Skv, D), generator=g).to(_TORCH[dtype])
        v = torch.randn((B, H, Skv, D), generator=g).to(_TORCH[dtype])
        return [q.to(device), k.to(device), v.to(device)]

    def reference(inputs):
        q, k, v = (x.cpu().double() for x in inputs)
        s = (q @ k.transpose(-1, -2)) * sm_scale
        if causal:
            r = torch.arange(Sq).view(Sq, 1)
            c = torch.arange(Skv).view(1, Skv)
            s = s.masked_fill(c > r, float("-inf"))
        return {3: (torch.softmax(s, -1) @ v).to(_TORCH[out])}

    tol = (2e-2, 2e-2) if dtype == "float16" else (6e-2, 4e-2)
    return _module(src_text, [3], params), params, [3], make_inputs, reference, tol


# ---- GEMMs over small grids ----------------------------------------------------------------------
def gen_gemm_grid(rng, seed):
    """A pipelined T.gemm over a grid of a few blocks (at most the H100's 78 SMs -- where a
    producer warpgroup is added -- or a few more), 128..512 threads, 1..4 stages, ragged M / N /
    K, both transposes, float16 / bfloat16 / float8_e4m3 inputs, the epilogue direct, through a
    shared tile, or a guarded T.Parallel store; sometimes T.use_swizzle."""
    dtype = rng.choice(["float16", "float16", "bfloat16", "float8_e4m3"])
    size = 1 if dtype == "float8_e4m3" else 2
    threads = rng.choice([128, 128, 256, 256, 384, 512])
    # (3 warpgroups tile 192 rows; 4 take 256, or 128 with a policy that splits N too)
    bm = rng.choice([64, 128, 128]) if threads <= 256 else 192 if threads == 384 else rng.choice([128, 256, 256])
    bn = rng.choice([64, 128, 128, 256])
    bk = rng.choice([32, 64, 64]) if size == 2 else rng.choice([64, 128])
    stages = rng.randint(1, 4)
    ta, tb = rng.random() < 0.3, rng.random() < 0.5
    if size == 1 and rng.random() < 0.75:  # (float8 wgmma reads both operands K-major; the rest is SIMT)
        ta, tb = False, True
    policy = rng.choice(_POLICIES)
    out = rng.choice(["float32", "float16", "float32"] + (["bfloat16"] if dtype == "bfloat16" else []))
    epi = rng.choice(["direct", "shared", "shared", "guarded"])
    blocks = rng.choice([1, 2, 4, 6, 8, 16, 30, 64, 78, 78, 79, 96])
    gn = rng.choice([d for d in range(1, blocks + 1) if blocks % d == 0 and d <= 8] or [1])
    gm = -(-blocks // gn)
    M = max(1, gm * bm - rng.choice([0, 0, 1, 17, bm // 2]))
    N = max(8, gn * bn - rng.choice([0, 0, 8, 24, bn // 2]))
    align = 16 // size
    K = max(align, rng.randint(1, 4) * bk - rng.choice([0, 0, align, 3 * align, bk // 2]))
    extra = out if epi == "shared" else None

    def smem(st):
        return st * (bm * bk + bk * bn) * size + (bm * bn * _TORCH[extra].itemsize if extra else 0)
    while stages > 1 and smem(stages) > 200 * 1024:
        stages -= 1
    while smem(stages) > 200 * 1024:
        bn //= 2
    swizzle = rng.choice([None, None, None, 2, 4])
    a_shape, a_tile, a_at = ("(K, M)", "(bk, bm)", "k * bk, by * bm") if ta else ("(M, K)", "(bm, bk)", "by * bm, k * bk")
    b_shape, b_tile, b_at = ("(N, K)", "(bn, bk)", "bx * bn, k * bk") if tb else ("(K, N)", "(bk, bn)", "k * bk, bx * bn")
    if epi == "direct":
        store = "T.copy(acc, C[by * bm, bx * bn])"
    elif epi == "shared":
        store = ("cs = T.alloc_shared((bm, bn), out)\n"
                 "            T.copy(acc, cs)\n"
                 "            T.copy(cs, C[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])")
    else:
        store = ("for i, j in T.Parallel(bm, bn):\n"
                 "                if by * bm + i < M and bx * bn + j < N:\n"
                 "                    C[by * bm + i, bx * bn + j] = acc[i, j]")
    src_text = f'''
    @T.prim_func
    def main(A: T.Tensor({a_shape}, dtype), B: T.Tensor({b_shape}, dtype), C: T.Tensor((M, N), out)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            As = T.alloc_shared({a_tile}, dtype)
            Bs = T.alloc_shared({b_tile}, dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
            {"T.use_swizzle(panel_size=" + str(swizzle) + ")" if swizzle else ""}
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[{a_at}], As)
                T.copy(B[{b_at}], Bs)
                T.gemm(As, Bs, acc{_kw(("transpose_A", ta or None), ("transpose_B", tb or None),
                                       ("policy", _pol(policy)))})
            {store}

    return main
    '''
    params = dict(M=M, N=N, K=K, bm=bm, bn=bn, bk=bk, stages=stages, threads=threads, dtype=dtype, out=out)

    def make_inputs(device):
        g = _gen(seed)
        a = torch.randint(-2, 3, (K, M) if ta else (M, K), generator=g).float().to(_TORCH[dtype])
        b = torch.randint(-2, 3, (N, K) if tb else (K, N), generator=g).float().to(_TORCH[dtype])
        return [a.to(device), b.to(device)]

    def reference(inputs):
        a, b = inputs[0].cpu().double(), inputs[1].cpu().double()
        return {2: ((a.T if ta else a) @ (b.T if tb else b)).to(_TORCH[out])}

    # integer sums: exact in float32 and float16 (|c| <= 4 K <= 2048); bfloat16 rounds past 256
    tol = (0.0, 0.0) if out != "bfloat16" else (0.0, 1e-2)
    return _module(src_text, [2], params), params, [2], make_inputs, reference, tol


# ---- shared tiles written by threads, read by T.gemm -----------------------------------------
def gen_smem_gemm(rng, seed):
    """T.gemm operands the threads write into shared memory (a T.Parallel store of a guarded,
    scaled global read; a T.copy from a fragment they computed), inside a T.Pipelined /
    T.serial loop (each step rewrites the tile the previous step's GEMM read) and before it
    (a weight tile built once), and an accumulator copied to a 16-bit shared tile that a
    second T.gemm reads: the barrier and proxy fence between the threads' writes and the
    MMA's reads, and between the MMA's reads and the next writes."""
    dtype = rng.choice(["float16", "bfloat16"])
    threads = rng.choice([128, 128, 256, 256, 384])
    bm = rng.choice([64, 128]) if threads < 384 else 192
    bn = rng.choice([32, 64, 128])
    bk = rng.choice([16, 32, 64])
    n2 = rng.choice([16, 32, 64])
    stages = rng.choice([0, 1, 2, 3])
    written = rng.choice(["A", "B", "both"])
    how = rng.choice(["parallel", "parallel", "frag"])
    second = rng.random() < 0.5
    policy = rng.choice(_POLICIES)
    M, N, K = _ragged(rng, bm, 2), _ragged(rng, bn, 2), rng.choice([bk, 2 * bk, 3 * bk - 8, 5 * bk + 8])
    loop = f"T.Pipelined(T.ceildiv(K, bk), num_stages={stages})" if stages else "T.serial(T.ceildiv(K, bk))"
    lines = []
    if written in ("A", "both"):
        if how == "parallel":
            lines += ["for i, j in T.Parallel(bm, bk):",
                      "    As[i, j] = T.if_then_else(by * bm + i < M and k * bk + j < K,"
                      " A[by * bm + i, k * bk + j] * T.cast(2, dtype), T.cast(0, dtype))"]
        else:
            lines += ["T.copy(A[by * bm, k * bk], af)",
                      "for i, j in T.Parallel(bm, bk):",
                      "    af[i, j] = af[i, j] * T.cast(2, dtype)",
                      "T.copy(af, As)"]
    else:
        lines += ["T.copy(A[by * bm, k * bk], As)"]
    if written in ("B", "both"):
        lines += ["for i, j in T.Parallel(bk, bn):",
                  "    Bs[i, j] = T.if_then_else(k * bk + i < K and bx * bn + j < N,"
                  " B[k * bk + i, bx * bn + j] - T.cast((i + j) % 3, dtype), T.cast(0, dtype))"]
    else:
        lines += ["T.copy(B[k * bk, bx * bn], Bs)"]
    lines += [f"T.gemm(As, Bs, acc{_kw(('policy', _pol(policy)))})"]
    body = "\n".join(" " * 16 + ln for ln in lines)
    pre = post = ""
    if second:
        pre = ("Ws = T.alloc_shared((bn, n2), dtype)\n"
               "            Ps = T.alloc_shared((bm, bn), dtype)\n"
               "            acc2 = T.alloc_fragment((bm, n2), \"float32\")\n"
               "            for i, j in T.Parallel(bn, n2):\n"
               "                Ws[i, j] = T.if_then_else(bx * bn + i < N, W[bx * bn + i, j], T.cast(0, dtype))\n"
               "            ")
        post = ("\n            T.copy(acc, Ps)\n"
                f"            T.gemm(Ps, Ws, acc2, clear_accum=True{_kw(('policy', _pol(policy)))})\n"
                "            for i, j in T.Parallel(bm, n2):\n"
                "                if by * bm + i < M:\n"
                "                    T.atomic_add(E[by * bm + i, j], acc2[i, j])")
    af = "\n            af = T.alloc_fragment((bm, bk), dtype)" if how == "frag" and written != "B" else ""
    src_text = f'''
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), W: T.Tensor((N, n2), dtype),
             E: T.Tensor((M, n2), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            As = T.alloc_shared((bm, bk), dtype)
            Bs = T.alloc_shared((bk, bn), dtype)
            acc = T.alloc_fragment((bm, bn), "float32"){af}
            {pre}T.clear(acc)
            for k in {loop}:
{body}{post}
            T.copy(acc, C[by * bm, bx * bn])

    return main
    '''
    params = dict(M=M, N=N, K=K, n2=n2, bm=bm, bn=bn, bk=bk, threads=threads, dtype=dtype)

    def make_inputs(device):
        g = _gen(seed)
        a = _ints(g, (M, K), -2, 3, dtype)
        b = _ints(g, (K, N), -2, 3, dtype)
        w = _ints(g, (N, n2), -1, 2, dtype)
        return [a.to(device), b.to(device), w.to(device), torch.zeros(M, n2, device=device)]

    def reference(inputs):
        a, b, w = (x.cpu().double() for x in inputs[:3])
        if written in ("A", "both"):
            a = a * 2
        if written in ("B", "both"):
            b = b - ((torch.arange(K).view(K, 1) % bk + torch.arange(N).view(1, N) % bn) % 3)
        c = a @ b
        e = inputs[3].cpu().double().clone()
        if second:  # each column block's acc (rounded to dtype) times its rows of W
            for x0 in range(0, N, bn):
                e += _round(c[:, x0:x0 + bn], dtype) @ w[x0:x0 + bn]
        return {3: e.float(), 4: c.float()}

    # |a b| <= 4 * 2 * K: exact in float32; the second GEMM reads acc rounded to 16 bits
    tol = (0.0, 0.0)
    return _module(src_text, [4], params), params, [4], make_inputs, reference, tol


# ---- row / column fragments of accumulators ------------------------------------------------------
def gen_acc_lines(rng, seed):
    """Row statistics (T.reduce_sum / max along dim 1) and column sums (dim 0) of a T.gemm
    accumulator used by T.Parallel nests over the rows / columns: T.atomic_add / atomic_max
    into global rows and columns shared by many blocks (each row's or column's atomic must
    run once, not once per thread holding it), guarded stores of the rows, and a
    T.if_then_else over the accumulator against its row statistic, stored with guards."""
    dtype = rng.choice(["float16", "bfloat16"])
    threads = rng.choice([128, 128, 256, 256, 384])
    bm = rng.choice([64, 128]) if threads < 384 else 192
    bn = rng.choice([32, 64, 128])
    bk = rng.choice([32, 64])
    policy = rng.choice(_POLICIES)
    M, N, K = _ragged(rng, bm, 2), _ragged(rng, bn, 3), rng.choice([bk, 2 * bk, bk + 16])
    rkind = rng.choice(["sum", "max"])
    row_op = rng.choice(["add", "max", "store"])
    col = rng.random() < 0.6
    sel = rng.choice(["gt", "ge"])
    stages = rng.choice([0, 1, 2])
    loop = f"T.Pipelined(T.ceildiv(K, bk), num_stages={stages})" if stages else "T.serial(T.ceildiv(K, bk))"
    if row_op == "store":
        row_use = ("for i in T.Parallel(bm):\n"
                   "                if by * bm + i < M:\n"
                   "                    R[by * bm + i, bx] = rs[i] * T.cast(2, \"float32\")")
    else:
        row_use = ("for i in T.Parallel(bm):\n"
                   "                if by * bm + i < M:\n"
                   f"                    T.atomic_{row_op}(Rt[by * bm + i], rs[i])")
    col_use = ("" if not col else
               "\n            T.reduce_sum(acc, cs, dim=0)\n"
               "            for j in T.Parallel(bn):\n"
               "                if bx * bn + j < N:\n"
               "                    T.atomic_add(Ct[bx * bn + j], cs[j])")
    cmp = ">" if sel == "gt" else ">="
    src_text = f'''
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), Rt: T.Tensor((M,), "float32"),
             Ct: T.Tensor((N,), "float32"), R: T.Tensor((M, T.ceildiv(N, bn)), "float32"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            As = T.alloc_shared((bm, bk), dtype)
            Bs = T.alloc_shared((bk, bn), dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
            rs = T.alloc_fragment((bm,), "float32")
            cs = T.alloc_fragment((bn,), "float32")
            T.clear(acc)
            for k in {loop}:
                T.copy(A[by * bm, k * bk], As)
                T.copy(B[k * bk, bx * bn], Bs)
                T.gemm(As, Bs, acc{_kw(("policy", _pol(policy)))})
            T.reduce_{rkind}(acc, rs, dim=1)
            {row_use}{col_use}
            for i, j in T.Parallel(bm, bn):
                if by * bm + i < M and bx * bn + j < N:
                    C[by * bm + i, bx * bn + j] = T.if_then_else(acc[i, j] * 4 {cmp} rs[i], acc[i, j], -rs[i])

    return main
    '''
    gn = -(-N // bn)
    params = dict(M=M, N=N, K=K, bm=bm, bn=bn, bk=bk, threads=threads, dtype=dtype)

    def make_inputs(device):
        g = _gen(seed)
        a = _ints(g, (M, K), -2, 3, dtype)
        b = _ints(g, (K, N), -2, 3, dtype)
        rt = _ints(g, (M,), -4, 5, "float32")
        ct = _ints(g, (N,), -4, 5, "float32")
        return [a.to(device), b.to(device), rt.to(device), ct.to(device), torch.zeros(M, gn, device=device)]

    def reference(inputs):
        a, b = inputs[0].cpu().double(), inputs[1].cpu().double()
        rt, ct, r = (x.cpu().double().clone() for x in inputs[2:5])
        c = a @ b
        pad = torch.zeros(M, gn * bn, dtype=torch.float64)  # each block's tile: zeros past N
        pad[:, :N] = c
        tiles = pad.view(M, gn, bn)
        rs = tiles.sum(2) if rkind == "sum" else tiles.amax(2)  # (M, gn)
        if row_op == "store":
            r = rs * 2
        elif row_op == "add":
            rt = rt + rs.sum(1)
        else:
            rt = torch.maximum(rt, rs.amax(1))
        if col:
            ct = ct + c.sum(0)
        rsx = rs.repeat_interleave(bn, 1)[:, :N]
        keep = (c * 4 > rsx) if sel == "gt" else (c * 4 >= rsx)
        out = torch.where(keep, c, -rsx)
        return {2: rt.float(), 3: ct.float(), 4: r.float(), 5: out.float()}

    return _module(src_text, [5], params), params, [5], make_inputs, reference, (0.0, 0.0)


# ---- T.Pipelined with order / stage lists, several copies per step ------------------------------
# (order, stage) of a step of copy A, copy B, copy D (a bias row), gemm, add-bias: the copies
# first or last, the compute statements in either order
_ORDERS = [
    ([0, 1, 2, 3, 4], [0, 0, 0, 1, 1]),
    ([2, 3, 4, 0, 1], [0, 0, 0, 1, 1]),
    ([0, 1, 2, 4, 3], [0, 0, 0, 1, 1]),
    ([3, 4, 2, 0, 1], [0, 0, 0, 2, 2]),
    ([0, 1, 2, 3, 4], [0, 0, 0, 2, 2]),
    ([0, 1, 2, 3, 4], [0, 0, 0, 0, 0]),
]


def gen_pipe_order(rng, seed):
    """A T.Pipelined loop given order= and stage= lists (or num_stages), three copies per step
    -- tiles of A and B for a T.gemm and a row of D into a shared vector added to the
    accumulator after it -- or, without a GEMM, two tiles multiplied elementwise into a
    fragment; ragged tails."""
    gemm = rng.random() < 0.65
    threads = rng.choice([128, 128, 256])
    dtype = rng.choice(["float16", "bfloat16"])
    order, stage = rng.choice(_ORDERS)
    given = rng.choice(["order", "order", "num_stages"])
    if not gemm:  # copy A, copy B, multiply-add: (order, stage) of three statements
        order, stage = rng.choice([([0, 1, 2], [0, 0, 1]), ([1, 2, 0], [0, 0, 1]), ([0, 1, 2], [0, 0, 2]),
                                   ([0, 1, 2], [0, 0, 0])])
    pipe = (f"order={order}, stage={stage}" if given == "order" else f"num_stages={max(stage) + 1}")
    if gemm:
        bm, bn, bk = rng.choice([64, 128]), rng.choice([32, 64, 128]), rng.choice([32, 64])
        policy = rng.choice(_POLICIES)
        M, N, K = _ragged(rng, bm, 2), _ragged(rng, bn, 2), rng.choice([bk, 2 * bk, 3 * bk + 8, 4 * bk])
        src_text = f'''
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), D: T.Tensor((T.ceildiv(K, bk), N), "float32"),
                 C: T.Tensor((M, N), "float32")):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
                As = T.alloc_shared((bm, bk), dtype)
                Bs = T.alloc_shared((bk, bn), dtype)
                ds = T.alloc_shared((bn,), "float32")
                acc = T.alloc_fragment((bm, bn), "float32")
                T.clear(acc)
                for k in T.Pipelined(T.ceildiv(K, bk), {pipe}):
                    T.copy(A[by * bm, k * bk], As)
                    T.copy(B[k * bk, bx * bn], Bs)
                    T.copy(D[k, bx * bn:(bx + 1) * bn], ds)
                    T.gemm(As, Bs, acc{_kw(("policy", _pol(policy)))})
                    for i, j in T.Parallel(bm, bn):
                        acc[i, j] += ds[j]
                T.copy(acc, C[by * bm, bx * bn])

        return main
        '''
        params = dict(M=M, N=N, K=K, bm=bm, bn=bn, bk=bk, threads=threads, dtype=dtype)
        nk = -(-K // bk)

        def make_inputs(device):
            g = _gen(seed)
            return [_ints(g, (M, K), -2, 3, dtype).to(device), _ints(g, (K, N), -2, 3, dtype).to(device),
                    _ints(g, (nk, N), -3, 4, "float32").to(device)]

        def reference(inputs):
            a, b, d = (x.cpu().double() for x in inputs)
            return {3: (a @ b + d.sum(0)).float()}

        return _module(src_text, [3], params), params, [3], make_inputs, reference, (0.0, 0.0)
    bm, bk = rng.choice([8, 16, 32, 64]), rng.choice([32, 64, 128])
    while bm * bk > 4096:
        bk //= 2
    M, N = _ragged(rng, bm, 2), _ragged(rng, bk, 4)
    src_text = f'''
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), O: T.Tensor((M, bk), "float32")):
        with T.Kernel(T.ceildiv(M, bm), threads=threads) as bx:
            As = T.alloc_shared((bm, bk), dtype)
            Bs = T.alloc_shared((bm, bk), dtype)
            acc = T.alloc_fragment((bm, bk), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(N, bk), {pipe}):
                T.copy(A[bx * bm, k * bk], As)
                T.copy(B[bx * bm, k * bk], Bs)
                for i, j in T.Parallel(bm, bk):
                    acc[i, j] += T.cast(As[i, j], "float32") * T.cast(Bs[i, j], "float32")
            T.copy(acc, O[bx * bm, 0])

    return main
    '''
    params = dict(M=M, N=N, bm=bm, bk=bk, threads=threads, dtype=dtype)

    def make_inputs(device):
        g = _gen(seed)
        return [_ints(g, (M, N), -5, 6, dtype).to(device), _ints(g, (M, N), -5, 6, dtype).to(device)]

    def reference(inputs):
        a, b = (x.cpu().double() for x in inputs)
        nk = -(-N // bk)
        p = torch.zeros(M, nk * bk, dtype=torch.float64)
        p[:, :N] = a * b
        return {2: p.view(M, nk, bk).sum(1).float()}

    return _module(src_text, [2], params), params, [2], make_inputs, reference, (0.0, 0.0)


# ---- T.macro helpers -------------------------------------------------------------------------
def gen_macro(rng, seed):
    """A GEMM written through T.macro helpers defined in the factory (they read its
    parameters): a tile load used for both operands, a macro calling a macro (an
    elementwise transform with a keyword default), the MMA step, and a guarded epilogue;
    sometimes a macro returning a value (a tile's row offset)."""
    dtype = rng.choice(["float16", "bfloat16"])
    threads = rng.choice([128, 256])
    bm, bn, bk = rng.choice([64, 128]), rng.choice([32, 64, 128]), rng.choice([32, 64])
    M, N, K = _ragged(rng, bm, 2), _ragged(rng, bn, 2), rng.choice([bk, 2 * bk, 2 * bk + 16])
    stages = rng.choice([0, 1, 2, 3])
    relu = rng.random() < 0.5
    factor = rng.choice([1, 2, -1])
    ret = rng.random() < 0.5
    loop = f"T.Pipelined(T.ceildiv(K, bk), num_stages={stages})" if stages else "T.serial(T.ceildiv(K, bk))"
    row0 = "row0 = row_of(by)" if ret else "row0 = by * bm"
    src_text = f'''
    @T.macro
    def load(src, dst, r, c):
        T.copy(src[r, c], dst)

    @T.macro
    def scale_tile(t, m, n, f=2.0):
        for i, j in T.Parallel(m, n):
            t[i, j] = t[i, j] * f

    @T.macro
    def activate(t, m, n, f):
        scale_tile(t, m, n, f=f)
        {"for i, j in T.Parallel(m, n):" if relu else ""}
            {"t[i, j] = T.max(t[i, j], 0)" if relu else ""}

    @T.macro
    def mma(a, b, c):
        T.gemm(a, b, c)

    @T.macro
    def store(t, dst, r, c):
        for i, j in T.Parallel(bm, bn):
            if r + i < M and c + j < N:
                dst[r + i, c + j] = t[i, j]

    @T.macro
    def row_of(b):
        return b * bm

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            As = T.alloc_shared((bm, bk), dtype)
            Bs = T.alloc_shared((bk, bn), dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
            {row0}
            T.clear(acc)
            for k in {loop}:
                load(A, As, row0, k * bk)
                load(B, Bs, k * bk, bx * bn)
                mma(As, Bs, acc)
            activate(acc, bm, bn, {float(factor)})
            store(acc, C, row0, bx * bn)

    return main
    '''
    src_text = "\n".join(ln for ln in src_text.split("\n") if ln.strip() or not ln)
    params = dict(M=M, N=N, K=K, bm=bm, bn=bn, bk=bk, threads=threads, dtype=dtype)

    def make_inputs(device):
        g = _gen(seed)
        return [_ints(g, (M, K), -2, 3, dtype).to(device), _ints(g, (K, N), -2, 3, dtype).to(device)]

    def reference(inputs):
        a, b = (x.cpu().double() for x in inputs)
        c = (a @ b) * factor
        if relu:
            c = c.clamp(min=0)
        return {2: c.float()}

    return _module(src_text, [2], params), params, [2], make_inputs, reference, (0.0, 0.0)


# ---- per-thread scalar code -------------------------------------------------------------------
_I32 = 0xFFFFFFFF


def _bits32(x):
    return x & _I32


def _clz32(x):
    u = _bits32(x)
    return 32 - (u.unsqueeze(-1) >= (torch.ones_like(u).unsqueeze(-1) << torch.arange(32))).sum(-1)


def _popc32(x):
    u = _bits32(x)
    return ((u.unsqueeze(-1) >> torch.arange(32)) & 1).sum(-1)


def _wrap(x, dtype):
    """``x`` cast to a narrow integer type (two's complement wrap), back as int64."""
    if dtype == "bool":
        return (x != 0).long()
    bits = {"int8": 8, "uint8": 8, "int16": 16}[dtype]
    if dtype.startswith("u"):
        return x & ((1 << bits) - 1)
    half = 1 << (bits - 1)
    return ((x + half) & ((1 << bits) - 1)) - half


class _Scalar:
    """Random int / float expressions over the loop indices ``i`` / ``j`` (Python ints in the
    generated code when their loops are constant-unrolled), the thread index ``tx``, ``row``
    and a loaded value ``a``: (text, fn(env) -> tensor over rows, bound on |value|, whether
    it names a variable)."""

    LIMIT = 60000

    def __init__(self, rng, leaves):
        self.rng = rng
        self.leaves = leaves  # name -> bound

    def leaf(self, var=False, pure=False):
        rng = self.rng
        if not var and rng.random() < 0.2:
            k = rng.randint(-9, 9)
            return f"({k})", (lambda env, k=k: torch.full_like(env["tx"], k)), abs(k), False
        name = rng.choice([v for v in self.leaves if v in ("i", "j")] if pure else list(self.leaves))
        return name, (lambda env, name=name: env[name]), self.leaves[name], True

    def divisor(self, pure=False):
        rng = self.rng
        kind = rng.choice(["k", "k", "i", "j"] if pure else ["k", "k", "i", "j", "tx"])
        if kind == "k":
            d = rng.choice([2, 3, 4, 5, 7, 8, 16, -2, -3, -5, -8])
            return f"({d})", lambda env, d=d: torch.full_like(env["tx"], d)
        if kind in ("i", "j") and kind in self.leaves:
            return f"({kind} + 1)", lambda env, v=kind: env[v] + 1
        return "(tx % 4 + 1)", lambda env: env["tx"] % 4 + 1

    def int_expr(self, depth, var=False, pure=False):
        """``pure``: of ``i``, ``j`` and constants only (a Python int in the generated code
        when the loops are constant-unrolled); a third of the subtrees are."""
        pure = pure or self.rng.random() < 0.33
        for _ in range(30):
            got = self._int_expr(depth, var, pure)
            if got[2] <= self.LIMIT:
                return got
        return self.leaf(True, pure)

    def _int_expr(self, depth, var, pure):
        rng = self.rng
        if depth == 0 or rng.random() < 0.2:
            return self.leaf(var, pure)
        op = rng.choice(["+", "-", "*k", "//", "%", "T.truncdiv", "T.truncmod", "T.min", "T.max", "T.abs",
                         ">>", "<<", "&", "|", "^", "~", "T.clz", "T.popcount", "ite", "cmp", "cast", "cast",
                         "+", "-"])
        x, fx, bx, vx = self.int_expr(depth - 1, var or op in ("T.clz", "T.popcount", "T.abs", "cast", "~"), pure)
        if op in ("+", "-", "T.min", "T.max", "&", "|", "^"):
            y, fy, by, vy = self.int_expr(depth - 1, not vx, pure)
            fn = {"+": torch.add, "-": torch.sub, "T.min": torch.minimum, "T.max": torch.maximum,
                  "&": torch.bitwise_and, "|": torch.bitwise_or, "^": torch.bitwise_xor}[op]
            bound = bx + by if op in ("+", "-") else (max(bx, by) if op in ("T.min", "T.max") else 2 * max(bx, by) + 1)
            text = f"{op}({x}, {y})" if op.startswith("T.") else f"({x} {op} {y})"
            return text, (lambda env: fn(fx(env), fy(env))), bound, True
        if op == "*k":
            k = rng.choice([-3, -2, 2, 3, 5])
            return f"({x} * {k})", (lambda env: fx(env) * k), bx * abs(k), vx
        if op == "T.abs":
            return f"T.abs({x})", (lambda env: fx(env).abs()), bx, vx
        if op == "~":
            return f"(~{x})", (lambda env: -fx(env) - 1), bx + 1, vx
        if op == ">>":
            k = rng.randint(0, 5)
            return f"({x} >> {k})", (lambda env: fx(env) >> k), bx, vx
        if op == "<<":
            k = rng.randint(0, 3)
            return f"({x} << {k})", (lambda env: fx(env) << k), bx << k, vx
        if op == "T.clz":
            return f"T.clz({x})", (lambda env: _clz32(fx(env))), 32, vx
        if op == "T.popcount":
            return f"T.popcount({x})", (lambda env: _popc32(fx(env))), 32, vx
        if op == "cast":
            dt = rng.choice(["int8", "uint8", "int16", "bool"])
            bound = {"int8": 128, "uint8": 255, "int16": 32768, "bool": 1}[dt]
            inner = f"{x} != 0" if dt == "bool" and rng.random() < 0.3 else x
            return (f'T.Cast("int32", T.Cast("{dt}", {inner}))', (lambda env: _wrap(fx(env), dt)),
                    min(bound, bx), vx)
        if op in ("ite", "cmp"):
            c, fc, vc = self.cond(depth - 1, pure)
            if op == "cmp":
                return f'T.Cast("int32", {c})', (lambda env: fc(env).long()), 1, vc
            y, fy, by, vy = self.int_expr(depth - 1, False, pure)
            return (f"T.if_then_else({c}, {x}, {y})", (lambda env: torch.where(fc(env), fx(env), fy(env))),
                    max(bx, by), vx or vy or vc)
        d, fd = self.divisor(pure)
        if op == "//":
            return f"({x} // {d})", (lambda env: torch.div(fx(env), fd(env), rounding_mode="floor")), bx, vx
        if op == "%":
            return (f"({x} % {d})", (lambda env: fx(env) - torch.div(fx(env), fd(env), rounding_mode="floor") * fd(env)),
                    16 if d.startswith("(") and d[1:-1].lstrip("-").isdigit() else bx + 16, vx)
        if op == "T.truncdiv":
            return f"T.truncdiv({x}, {d})", (lambda env: torch.div(fx(env), fd(env), rounding_mode="trunc")), bx, vx
        return f"T.truncmod({x}, {d})", (lambda env: torch.fmod(fx(env), fd(env))), bx, vx

    def cond(self, depth, pure=False):
        """(text, fn -> bool tensor, names a variable)."""
        rng = self.rng
        pure = pure or rng.random() < 0.33
        x, fx, _, vx = self.int_expr(max(depth, 0), True, pure)
        y, fy, _, vy = self.int_expr(max(depth - 1, 0), False, pure)
        cmp = rng.choice(["<", "<=", ">", ">=", "==", "!="])
        fn = {"<": torch.lt, "<=": torch.le, ">": torch.gt, ">=": torch.ge, "==": torch.eq, "!=": torch.ne}[cmp]
        text, f = f"{x} {cmp} {y}", (lambda env: fn(fx(env), fy(env)))
        if rng.random() < 0.25:
            z, fz, _ = self.cond(0, pure and rng.random() < 0.5)
            if rng.random() < 0.5:
                return f"({text} and {z})", (lambda env: f(env) & fz(env)), True
            return f"({text} or {z})", (lambda env: f(env) | fz(env)), True
        return text, f, True

    def float_expr(self, depth):
        """(text, fn -> float32 tensor), exact in float32 (powers of two, correctly rounded
        sqrt, casts rounding to nearest even)."""
        rng = self.rng
        kind = rng.choice(["int", "exp2", "exp2", "sqrt", "half", "ite", "mul", "wide"] if depth else
                          ["int", "exp2", "wide"])
        if kind == "int":
            x, fx, _, _ = self.int_expr(1)
            form = rng.choice(['T.Cast("float32", {})', "T.float32({})", 'T.cast({}, "float32")',
                               'T.Cast("float32", T.Cast("float16", {}))', 'T.Cast("float32", T.Cast("bfloat16", {}))'])
            half = _TORCH["bfloat16" if "bfloat16" in form else "float16"] if "16" in form else torch.float32
            return form.format(x), lambda env: fx(env).to(half).float()
        if kind == "wide":  # float16 / bfloat16 spacings above 2048 / 256: the cast rounds
            x, fx, _, _ = self.int_expr(1)
            dt = rng.choice(["float16", "bfloat16"])
            return (f'T.Cast("float32", T.Cast("{dt}", T.truncmod({x}, 60) * 1001 + 1))',
                    lambda env: (torch.fmod(fx(env), 60) * 1001 + 1).to(_TORCH[dt]).float())
        if kind == "exp2":
            x, fx, _, _ = self.int_expr(2)
            e = rng.choice([f"T.truncmod({x}, 9)", f"({x} % 13 - 6)"])
            fe = ((lambda env: torch.fmod(fx(env), 9)) if e.startswith("T.") else
                  (lambda env: fx(env) - torch.div(fx(env), 13, rounding_mode="floor") * 13 - 6))
            form = rng.choice(['T.exp2(T.Cast("float32", {}))', "T.exp2(T.float32({}))"])
            return form.format(e), lambda env: torch.exp2(fe(env).float())
        if kind == "sqrt":  # (the reference rounds a float64 root: torch's float32 sqrt on
            # some CPUs was one ulp off the GPU's correctly rounded sqrt.rn, scalar seed 3884)
            x, fx, _, _ = self.int_expr(2, True)
            return f'T.sqrt(T.Cast("float32", T.abs({x})))', lambda env: torch.sqrt(fx(env).abs().float().double()).float()
        if kind == "half":
            dt = rng.choice(["float16", "bfloat16"])
            x, fx = self.float_expr(depth - 1)
            return (f'T.Cast("float32", T.Cast("{dt}", {x}))',
                    lambda env: fx(env).to(_TORCH[dt]).float())
        if kind == "ite":
            c, fc, _ = self.cond(1)
            x, fx = self.float_expr(depth - 1)
            y, fy = self.float_expr(depth - 1)
            return f"T.if_then_else({c}, {x}, {y})", lambda env: torch.where(fc(env), fx(env), fy(env))
        x, fx = self.float_expr(0)  # a power of two times a small int: exact
        k = rng.choice([-1, -2, 3, 0.5])
        return f"({x} * {k!r})", lambda env: fx(env) * k


def _loop(rng, var, n_max):
    """(text, values) of a constant loop: T.unroll / T.serial, with a start and step."""
    kind = rng.choice(["T.unroll", "T.unroll", "T.serial", "T.serial", "T.grid_like"])
    n = rng.randint(1, n_max)
    if kind == "T.grid_like" or rng.random() < 0.5:
        kind = "T.unroll" if kind == "T.grid_like" else kind
        return f"{kind}({n})", list(range(n))
    start = rng.choice([0, 1, 2])
    step = rng.choice([1, 2, 3])
    stop = start + n * step - rng.choice([0, step - 1])
    return f"{kind}({start}, {stop}, {step})", list(range(start, stop, step))


def gen_scalar(rng, seed):
    """Each thread runs scalar code: ``tx = T.get_thread_binding()``, constant ``T.unroll``
    / ``T.serial`` loops (stepped, nested) whose indices are Python ints in the generated
    code, ``T.alloc_var`` / ``T.alloc_local`` accumulators indexed by them (sometimes by
    ``tx``), ``if`` and ``T.if_then_else`` on them, integer intrinsics of them (``T.clz``,
    ``T.popcount``, shifts and bit ops, ``//`` / ``%`` (floor), ``T.truncdiv`` /
    ``T.truncmod``, ``T.min`` / ``T.max`` / ``T.abs``, casts to int8 / uint8 / int16 /
    bool), float ones (``T.exp2`` of them, ``T.sqrt``, casts through float16 / bfloat16),
    loads of the input at their indices, an ``T.atomic_add`` at them and warp shuffles
    (``T.shfl_xor / down / up / sync``) of values and by lanes made of them."""
    threads = rng.choice([32, 64, 96, 128, 256])
    nb = rng.choice([1, 1, 2])
    R = max(1, nb * threads - rng.choice([0, 0, 1, 5, threads // 2]))
    W = rng.choice([3, 4, 8, 16])
    L, LF = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 3])
    loop1, vals1 = _loop(rng, "i", 6)
    nested = rng.random() < 0.7
    loop2, vals2 = _loop(rng, "j", 4) if nested else ("", [0])
    leaves = {"i": max(vals1 + [0]), "tx": threads - 1, "a": 50, "row": nb * threads}
    if nested:
        leaves["j"] = max(vals2 + [0])
    S = _Scalar(rng, leaves)
    n2 = max(len(vals2), 1)
    idx_forms = [(f"({'i * ' + str(n2) + ' + j' if nested else 'i'}) % W",
                  lambda e: (e["i"] * n2 + e["j"]) % W),
                 ("T.min(i + j, W - 1)" if nested else "T.min(i, W - 1)",
                  lambda e: torch.clamp(e["i"] + e["j"], max=W - 1)),
                 ("T.truncmod(i * 3 + j * 5, W)" if nested else "T.truncmod(i * 3, W)",
                  lambda e: torch.fmod(e["i"] * 3 + e["j"] * 5, W)),
                 ("(i + tx) % W", lambda e: (e["i"] + e["tx"]) % W)]
    idx_text, idx_fn = rng.choice(idx_forms)
    slot_forms = [(f"({'i + j' if nested else 'i'}) % L", lambda e: (e["i"] + e["j"]) % L),
                  ("T.min(i, L - 1)", lambda e: torch.clamp(e["i"], max=L - 1)),
                  ("T.truncmod(i * 2 + j, L)" if nested else "T.truncmod(i * 2, L)",
                   lambda e: torch.fmod(e["i"] * 2 + e["j"], L)),
                  ("(tx + i) % L", lambda e: (e["tx"] + e["i"]) % L)]
    slot_forms.append(("T.if_then_else(i % 2 == 0, 0, L - 1)", lambda e: torch.where(e["i"] % 2 == 0, 0, L - 1)))
    slot_text, slot_fn = rng.choice(slot_forms[:3] + slot_forms[4:] if rng.random() < 0.8 else slot_forms)
    e_loc = S.int_expr(rng.randint(1, 3))
    e_acc = S.int_expr(rng.randint(1, 3))
    guard = S.cond(1) if rng.random() < 0.6 else None
    e_else = S.int_expr(rng.randint(0, 2)) if guard is not None and rng.random() < 0.4 else None
    ld = rng.choice(["int32", "int32", "int32", "int64", "int16", "int8", "uint8"])  # the locals' dtypes
    fd = rng.choice(["float32", "float32", "float16", "bfloat16"])
    fslot = rng.randrange(LF)
    e_f = S.float_expr(rng.randint(1, 2))
    atomic = rng.random() < 0.4
    e_at = S.int_expr(rng.randint(0, 2)) if atomic else None
    shuffle = rng.choice([None, None, "T.shfl_xor", "T.shfl_down", "T.shfl_up", "T.shfl_sync"])
    e_sh = S.int_expr(rng.randint(0, 2)) if shuffle else None
    delta_forms = [("1", lambda e: torch.ones_like(e["i"])), ("(i % 4 + 1)", lambda e: e["i"] % 4 + 1),
                   ("T.min(i, 31)", lambda e: torch.clamp(e["i"], max=31))]
    if nested:
        delta_forms.append(("(j * 2 + 1)", lambda e: e["j"] * 2 + 1))
    delta_text, delta_fn = rng.choice(delta_forms)
    init = rng.choice(["T.unroll", "T.serial"])
    acc_decl = rng.choice(["acc = T.alloc_var(\"int32\", init=3)", "acc = T.alloc_var(\"int32\")\nacc = 3"])
    body = [f"tx = T.get_thread_binding()",
            "row = bx * threads + tx",
            *acc_decl.split("\n"),
            f'loc = T.alloc_local((L,), "{ld}")',
            f'fl = T.alloc_local((LF,), "{fd}")',
            f"for k in {init}(L):",
            "    loc[k] = k",
            "for k in T.unroll(LF):",
            f'    fl[k] = T.cast(0, "{fd}")',
            f"for i in {loop1}:"]
    ind = "    "
    if nested:
        body.append(f"    for j in {loop2}:")
        ind = "        "
    body += [ind + f"a = A[T.min(row, R - 1), {idx_text}]",
             ind + (f"loc[{slot_text}] += {e_loc[0]}" if ld == "int32" else
                    f'loc[{slot_text}] = T.Cast("{ld}", loc[{slot_text}] + {e_loc[0]})')]
    if shuffle:  # (every lane of the warp runs it)
        body += [ind + f"acc += {shuffle}({e_sh[0]}, {delta_text})"]
    if guard is not None:
        body += [ind + f"if {guard[0]}:", ind + f"    acc += {e_acc[0]}"]
        if e_else is not None:
            body += [ind + "else:", ind + f"    acc -= {e_else[0]}"]
    else:
        body += [ind + f"acc += {e_acc[0]}"]
    body += [ind + (f"fl[{fslot}] += {e_f[0]}" if fd == "float32" else
                    f'fl[{fslot}] = T.Cast("{fd}", T.Cast("float32", fl[{fslot}]) + {e_f[0]})')]
    if atomic:
        body += [ind + "if row < R:", ind + f"    T.atomic_add(Cnt[{slot_text}], {e_at[0]})"]
    body += ["if row < R:",
             "    for k in T.serial(L):",
             "        O[row, k] = loc[k]" if ld == "int32" else '        O[row, k] = T.Cast("int32", loc[k])',
             "    O[row, L] = acc",
             "    for k in T.unroll(LF):",
             "        F[row, k] = fl[k]" if fd == "float32" else '        F[row, k] = T.Cast("float32", fl[k])']
    text = "\n".join(" " * 12 + line for line in body)
    src_text = f'''
    @T.prim_func
    def main(A: T.Tensor((R, W), "int32"), O: T.Tensor((R, L + 1), "int32"), F: T.Tensor((R, LF), "float32"),
             Cnt: T.Tensor((L,), "int32")):
        with T.Kernel(nb, threads=threads) as bx:
{text}

    return main
    '''
    params = dict(R=R, W=W, L=L, LF=LF, nb=nb, threads=threads)

    def make_inputs(device):
        g = _gen(seed)
        return [_ints(g, (R, W), -50, 51, "int32").to(device), torch.zeros(L, dtype=torch.int32, device=device)]

    def reference(inputs):  # every thread of the grid runs the loops (rows past R too)
        A = inputs[0].cpu().long()
        T_ = nb * threads
        rows = torch.arange(T_)
        env = {"tx": rows % threads, "row": rows}
        lane = rows % 32
        loc = torch.arange(L).long().repeat(T_, 1)
        acc = torch.full((T_,), 3, dtype=torch.long)
        fl = torch.zeros(T_, LF, dtype=torch.float32)
        cnt = torch.zeros(L, dtype=torch.long)
        live = rows < R
        for i in vals1:
            for j in (vals2 if nested else [0]):
                env["i"] = torch.full((T_,), i, dtype=torch.long)
                env["j"] = torch.full((T_,), j, dtype=torch.long)
                env["a"] = A[rows.clamp(max=R - 1), idx_fn(env)]
                s = slot_fn(env)
                got = loc[rows, s] + e_loc[1](env)
                loc[rows, s] = got if ld in ("int32", "int64") else _wrap(got, ld)
                if shuffle:
                    v, d = e_sh[1](env), delta_fn(env)
                    src = {"T.shfl_xor": lane ^ d,
                           "T.shfl_down": torch.where(lane + d < 32, lane + d, lane),
                           "T.shfl_up": torch.where(lane - d >= 0, lane - d, lane),
                           "T.shfl_sync": d % 32}[shuffle]
                    acc += v[rows - lane + src]
                add = e_acc[1](env)
                if guard is None:
                    acc += add
                else:
                    acc += torch.where(guard[1](env), add, -e_else[1](env) if e_else is not None else 0)
                fl[:, fslot] = (fl[:, fslot] + e_f[1](env)).to(_TORCH[fd]).float()
                if atomic:
                    cnt.index_add_(0, s[live], e_at[1](env)[live])
        O = torch.cat([loc, acc.view(T_, 1)], 1)[:R].to(torch.int32)
        out = {1: O, 2: fl[:R]}
        if atomic:
            out[3] = cnt.to(torch.int32)
        return out

    return _module(src_text, [1, 2], params), params, [1, 2], make_inputs, reference, (0.0, 0.0)


# ---- packed integer tiles unpacked for T.gemm ---------------------------------------------------
def _unpack_expr(mode, byte, pos, bits):
    """The text of a ``bits``-wide field ``pos`` of the packed byte ``byte`` as TileLang's
    dequantizing examples unpack it: ``u`` unsigned (``(b >> (bits * pos)) & mask``),
    ``zp`` that minus a zero point, ``sel`` sign-extended by a T.if_then_else, ``reint``
    by ``T.reinterpret`` of the field moved to the byte's top then an arithmetic shift,
    ``i8`` (an int8 byte) by a T.Cast to int8 of the byte shifted left, then shifted right."""
    mask, half = (1 << bits) - 1, 1 << (bits - 1)
    u = f"(({byte} >> ({bits} * {pos})) & {hex(mask)})"
    if mode == "u":
        return u
    if mode == "zp":
        return f"({u} - {half})"
    if mode == "sel":
        return f"T.if_then_else({u} >= {half}, {u} - {1 << bits}, {u})"
    if mode == "reint":
        return f"(T.reinterpret(T.Cast(\"uint8\", {u} << {8 - bits}), \"int8\") >> {8 - bits})"
    return f"(T.Cast(\"int8\", {byte} << ({8 - bits} - {bits} * {pos})) >> {8 - bits})"


def _unpack_ref(packed, bits, mode, dim):
    """``packed`` (an integer tensor of bytes) unpacked along ``dim`` (each byte's fields in
    order, lowest bits first) into int64 values, as ``_unpack_expr``'s ``mode`` reads them."""
    b = packed.to(torch.int64) & 0xFF
    per, mask, half = 8 // bits, (1 << bits) - 1, 1 << (bits - 1)
    fields = torch.stack([(b >> (bits * p)) & mask for p in range(per)], dim=dim + 1)
    shape = list(b.shape)
    shape[dim] *= per
    v = fields.reshape(shape)
    if mode == "zp":
        return v - half
    if mode in ("sel", "reint", "i8"):
        return v - (v >= half).to(torch.int64) * (1 << bits)
    return v


def gen_dequant(rng, seed):
    """A weight of 4-bit or 2-bit fields packed two or four to a byte (uint8, or int8 read with
    sign-extending shifts), unpacked in a T.Parallel nest the way TileLang's dequantizing
    GEMMs write it -- ``(B[i, j // 2] >> (4 * (j % 2))) & 0xF``, zero points, sign extension
    by T.if_then_else / T.reinterpret / int8 shifts, ``T.Cast``, inline or in a plain Python
    helper, per-group scales ``Scale[n, k // group]`` (read from global memory, or staged by
    a T.copy into a shared tile / fragment read packed, ``ss[n, k // group]``) -- from global
    memory, from a shared tile, or from a fragment copied out of it, into a fragment or a
    shared tile (also written transposed; swizzled by T.annotate_layout) that is the B
    operand (transposed or not; a fragment given as it is, or copied to shared) or the A
    operand (the fragment A of TileLang's W4A8 example: C^T = W A^T) of a T.gemm, float16 /
    bfloat16 into float32; or int8 weights (dense, or unpacked int4) in an int8 x int8 ->
    int32 T.gemm (K-major, or MN-major B), rescaled by row and column scales through a
    float32 fragment or in a guarded store."""
    i8 = rng.random() < 0.3
    dtype = "int8" if i8 else rng.choice(["float16", "bfloat16"])
    acc_t = "int32" if i8 else "float32"
    threads = rng.choice([128, 128, 256])
    bits = rng.choice([4, 4, 2]) if not i8 else 4
    per = 8 // bits
    dense = i8 and rng.random() < 0.3  # int8 x int8, no packing
    storage = "int8" if dense else rng.choice(["uint8", "uint8", "int8"])
    mode = "dense" if dense else ("i8" if storage == "int8" else rng.choice(["u", "zp", "sel", "reint"]))
    if i8 and mode == "u":
        mode = "zp"
    bm = rng.choice([64, 64, 128, 32, 16])
    bn = rng.choice([32, 64, 128])
    bk = rng.choice([32, 64, 128]) if i8 else rng.choice([32, 64, 64, 128])
    # the packing: along K (the weight (N, K // per), TileLang's layout) or along N
    wpack = "k" if i8 else rng.choice(["k", "k", "n"])
    role = rng.choice(["B", "B", "A"]) if wpack == "k" else "B"
    # the tile written transposed (int8: an MN-major B operand; dense, the weight stored (K, N))
    flip = role == "B" and rng.random() < (0.2 if i8 else 0.3)
    src = "dense" if dense else rng.choice(["global", "shared", "frag"])
    if role == "A":
        wscope = rng.choice(["frag", "frag", "shared"])
    else:
        wscope = rng.choice(["shared", "shared", "frag"])  # frag: unpacked, then T.copy to shared
    copy2 = role == "A" and wscope == "frag" and rng.random() < 0.4  # TileLang's prev_local copy
    helper = not dense and rng.random() < 0.3
    # a fragment B operand given to T.gemm as it is (TileLang's register B, gemm_sr), or
    # copied to a shared tile first
    frag_b = role == "B" and wscope == "frag" and rng.random() < 0.4
    stages = rng.choice([0, 1, 2, 3])
    policy = rng.choice(_POLICIES)
    nk = rng.choice([1, 2, 3, 4])
    K = nk * bk
    M = _ragged(rng, bm, 2)
    N = _ragged(rng, bn, 2)
    if wpack == "n":
        N = max(per, N - N % per)
    scaled = not i8 and mode != "dense" and rng.random() < 0.7
    group = rng.choice([g for g in (16, 32, bk // 2, bk, 2 * bk, K) if g >= 16 and K % g == 0])
    sdt = rng.choice([dtype, "float32"]) if scaled else None
    # the step's scales staged by a T.copy into a shared tile or a fragment, read packed
    # (``ss[n, k // group]``, as the bytes are), or read from global memory
    sc_stage = rng.choice([None, "shared", "frag"]) if scaled and group <= bk else None
    out = rng.choice(["float32", "float32", "float16" if dtype != "bfloat16" else "bfloat16"])

    def smem(st):
        a = bm * bk * (1 if i8 else 2)
        w = bn * bk * (1 if i8 else 2)
        p = 0 if src in ("global", "dense") else bn * bk // per
        return st * (a + p) + w + (st * w if dense else 0)
    while stages > 1 and smem(stages) > 160 * 1024:
        stages -= 1

    # the weight tile's own shape, and the (n, k) of its element [i, j]
    if role == "A" or (wpack == "k" and not flip) or (wpack == "n" and flip):
        wshape, nl, kl = ("bn", "bk"), "i", "j"
    else:
        wshape, nl, kl = ("bk", "bn"), "j", "i"
    if wpack == "k":
        ptile, p_at = "(bn, bk // per)", "bx * bn, k * (bk // per)"
        local, pos = f"[{nl}, {kl} // per]", f"({kl} % per)"
        glob = f"Bp[bx * bn + {nl}, k * (bk // per) + {kl} // per]"
    else:
        ptile, p_at = "(bk, bn // per)", "k * bk, bx * (bn // per)"
        local, pos = f"[{kl}, {nl} // per]", f"({nl} % per)"
        glob = f"Bp[k * bk + {kl}, bx * (bn // per) + {nl} // per]"
    byte = {"global": glob, "shared": "Bs" + local, "frag": "Bl" + local, "dense": None}[src]
    ragged_n = N % bn != 0
    lines = ["T.copy(A[by * bm, k * bk], As)"]
    if src in ("shared", "frag"):
        lines.append(f"T.copy(Bp[{p_at}], Bs)")
    if src == "frag":
        lines.append("T.copy(Bs, Bl)")
    if sc_stage:
        lines.append("T.copy(Sc[bx * bn, k * (bk // group)], Ss)")
    wname = "Wf" if wscope == "frag" else "Ws"
    if dense:
        lines.append(f"T.copy(Bp[{'k * bk, bx * bn' if flip else 'bx * bn, k * bk'}], {wname})")
    else:
        # the expression inline, or a plain Python helper the nest calls (TileLang's examples'
        # _tir_u8_to_i4_to_i8(nbit, val, pos, dtype), run over the kernel's expressions)
        q = f"unpack({byte}, {pos})" if helper else _unpack_expr(mode, byte, pos, bits)
        val = f"T.Cast(dtype, {q})"
        if scaled:
            sc = f"Ss[{nl}, {kl} // group]" if sc_stage else f"Sc[bx * bn + {nl}, (k * bk + {kl}) // group]"
            val = f"{val} * {sc}"
            if sdt != dtype:
                val = f"T.Cast(dtype, {val})"
        if ragged_n and (src == "global" or scaled):  # (rows of the weight past N: no read)
            val = f"T.if_then_else(bx * bn + {nl} < N, {val}, T.cast(0, dtype))"
        lines += [f"for i, j in T.Parallel({wshape[0]}, {wshape[1]}):", f"    {wname}[i, j] = {val}"]
    if role == "B" and wscope == "frag" and not frag_b:
        lines.append("T.copy(Wf, Ws)")
        wname = "Ws"
    if copy2:
        lines.append("T.copy(Wf, Wf2)")
        wname = "Wf2"
    pol = _pol(policy)
    if role == "A":
        lines.append(f"T.gemm({wname}, As, acc, transpose_B=True{_kw(('policy', pol))})")
    else:
        tb = wshape == ("bn", "bk")
        lines.append(f"T.gemm(As, {wname}, acc{_kw(('transpose_B', tb or None), ('policy', pol))})")
    body = "\n".join(" " * 16 + ln for ln in lines)
    allocs = ["As = T.alloc_shared((bm, bk), dtype)"]
    if src in ("shared", "frag"):
        allocs.append(f"Bs = T.alloc_shared({ptile}, storage)")
    if src == "frag":
        allocs.append(f"Bl = T.alloc_fragment({ptile}, storage)")
    if sc_stage:
        allocs.append(f"Ss = T.alloc_{'shared' if sc_stage == 'shared' else 'fragment'}((bn, bk // group), sdt)")
    if wscope == "frag":
        allocs.append(f"Wf = T.alloc_fragment(({wshape[0]}, {wshape[1]}), dtype)")
    if copy2:
        allocs.append(f"Wf2 = T.alloc_fragment(({wshape[0]}, {wshape[1]}), dtype)")
    if (role == "B" and not frag_b) or wscope == "shared":
        allocs.append(f"Ws = T.alloc_shared(({wshape[0]}, {wshape[1]}), dtype)")
    ashape = "(bn, bm)" if role == "A" else "(bm, bn)"
    allocs.append(f"acc = T.alloc_fragment({ashape}, \"{acc_t}\")")
    # the epilogue: int32 rescaled by row (activation) and column (weight) scales
    if role == "A":
        cshape, c_at = "(N, M)", "bx * bn, by * bm"
        r_i, c_j, ext = "bx * bn + i", "by * bm + j", "(bn, bm)"
    else:
        cshape, c_at = "(M, N)", "by * bm, bx * bn"
        r_i, c_j, ext = "by * bm + i", "bx * bn + j", "(bm, bn)"
    rlim, clim = ("N", "M") if role == "A" else ("M", "N")
    epi_kind = rng.choice(["frag", "guarded"]) if i8 else rng.choice(["copy", "copy", "guarded", "shared"])
    if i8:
        sr, sc_ = ("Sb", "Sa") if role == "A" else ("Sa", "Sb")
        if epi_kind == "frag":  # T.copy of the int32 accumulator to a float32 fragment, scaled there
            epi = [f"accf = T.alloc_fragment({ext}, \"float32\")",
                   "T.copy(acc, accf)",
                   f"for i, j in T.Parallel{ext}:",
                   f"    accf[i, j] = accf[i, j] * {sr}[{r_i}] * {sc_}[{c_j}]",
                   f"T.copy(accf, C[{c_at}])"]
        else:
            epi = [f"for i, j in T.Parallel{ext}:",
                   f"    if {r_i} < {rlim} and {c_j} < {clim}:",
                   f"        C[{r_i}, {c_j}] = T.Cast(out, T.Cast(\"float32\", acc[i, j]) * {sr}[{r_i}]"
                   f" * {sc_}[{c_j}])"]
    elif epi_kind == "copy":
        epi = [f"T.copy(acc, C[{c_at}])"]
    elif epi_kind == "shared":
        epi = [f"cs = T.alloc_shared({ext}, out)", "T.copy(acc, cs)", f"T.copy(cs, C[{c_at}])"]
    else:
        epi = [f"for i, j in T.Parallel{ext}:",
               f"    if {r_i} < {rlim} and {c_j} < {clim}:",
               f"        C[{r_i}, {c_j}] = acc[i, j]"]
    epilogue = "\n".join(" " * 12 + ln for ln in epi)
    # TileLang's examples swizzle the packed tile (and the operand) with T.annotate_layout
    packed_row = (bk if wpack == "k" else bn) // per  # (bytes: a swizzle needs 32 or more)
    swz = [b for b, ok in (("Bs", src in ("shared", "frag") and packed_row >= 32),
                           ("Ws", (role == "B" and not frag_b) or wscope == "shared")) if ok and rng.random() < 0.3]
    if swz:
        allocs.append("T.annotate_layout({" + ", ".join(f"{b}: tilecute.layout.make_swizzled_layout({b})"
                                                         for b in swz) + "})")
    loop = f"T.Pipelined(K // bk, num_stages={stages})" if stages else "T.serial(K // bk)"
    bshape = ("(K, N)" if flip else "(N, K)") if dense else ("(N, K // per)" if wpack == "k" else "(K, N // per)")
    params_txt = [f"A: T.Tensor((M, K), dtype)", f"Bp: T.Tensor({bshape}, storage)"]
    if scaled:
        params_txt.append("Sc: T.Tensor((N, K // group), sdt)")
    if i8:
        params_txt += ["Sa: T.Tensor((M,), \"float32\")", "Sb: T.Tensor((N,), \"float32\")"]
    params_txt.append(f"C: T.Tensor({cshape}, out)")
    out_pos = len(params_txt) - 1
    allocs_txt = "\n".join(" " * 12 + ln for ln in allocs)
    helper_txt = ("def unpack(val, pos):\n"
                  f"        return {_unpack_expr(mode, 'val', 'pos', bits)}\n\n    ") if helper else ""
    src_text = f'''
    {helper_txt}@T.prim_func
    def main({", ".join(params_txt)}):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
{allocs_txt}
            T.clear(acc)
            for k in {loop}:
{body}
{epilogue}

    return main
    '''
    params = dict(M=M, N=N, K=K, bm=bm, bn=bn, bk=bk, per=per, group=group, threads=threads, dtype=dtype,
                  storage=storage, sdt=sdt, out=out)

    def make_inputs(device):
        g = _gen(seed)
        a = _ints(g, (M, K), -3, 4, dtype) if i8 else _ints(g, (M, K), -2, 3, dtype)
        if dense:
            bp = _ints(g, (K, N) if flip else (N, K), -8, 8, "int8")
        else:
            lo, hi = (-128, 128) if storage == "int8" else (0, 256)
            bp = _ints(g, (N, K // per) if wpack == "k" else (K, N // per), lo, hi, storage)
        ins = [a, bp]
        if scaled:
            ins.append((2.0 ** torch.randint(-2, 2, (N, K // group), generator=g)).to(_TORCH[sdt]))
        if i8:
            ins.append(2.0 ** torch.randint(-3, 2, (M,), generator=g))
            ins.append(2.0 ** torch.randint(-2, 3, (N,), generator=g))
        return [x.to(device) for x in ins]

    def reference(inputs):
        a, bp = inputs[0].cpu(), inputs[1].cpu()
        if dense:
            w = (bp.T if flip else bp).to(torch.int64)
        elif wpack == "k":
            w = _unpack_ref(bp, bits, mode, 1)
        else:
            w = _unpack_ref(bp, bits, mode, 1).T
        w = w.double()
        if not i8:
            w = _round(w, dtype)
        if scaled:
            w = _round(w * inputs[2].cpu().double().repeat_interleave(group, dim=1), dtype)
        c = a.double() @ w.T
        if i8:
            c = c * inputs[-2].cpu().double().view(M, 1) * inputs[-1].cpu().double().view(1, N)
        if role == "A":
            c = c.T
        return {out_pos: c.to(_TORCH[out])}

    return _module(src_text, [out_pos], params), params, [out_pos], make_inputs, reference, (0.0, 0.0)


# ---- accumulators post-processed by chains of T.Parallel nests -------------------------------------
_CHAIN_RED = {"sum": lambda x, d: x.sum(d, keepdim=True), "max": lambda x, d: x.amax(d, keepdim=True),
              "min": lambda x, d: x.amin(d, keepdim=True), "absmax": lambda x, d: x.abs().amax(d, keepdim=True)}


def gen_acc_chain(rng, seed):
    """A T.gemm accumulator post-processed by 2..5 T.Parallel nests over varied index forms,
    each a step of the chain: row statistics (T.reduce_sum / max / min / absmax along dim 1)
    broadcast back (``acc[i, j] - r[i]``), column sums (dim 0, ``acc[i, j] - c[j]``), a column
    vector from global memory (a T.Parallel load or a T.copy into a fragment) scaling it
    (``acc[i, j] * v[j]``), a row vector, the accumulator written transposed into shared
    (``st[j, i] = acc[i, j]``) and read back at other places (rows flipped, columns rolled),
    ``T.copy(acc, shared)`` read at other indices, fragment -> fragment copies to float16 /
    bfloat16 / int32 (rounding, floor ``%``), ``T.if_then_else`` / ``if`` masks on ``i`` / ``j``
    against run-time bounds (scalar parameters); then stored with T.copy (direct or through
    shared) or per element under guards.  Integer data: every value exact in float32."""
    dtype = rng.choice(["float16", "bfloat16"])
    threads = rng.choice([128, 128, 256])
    bm = rng.choice([64, 64, 128, 32, 16])
    bn = rng.choice([32, 64, 128])
    bk = rng.choice([32, 64])
    while bm * bn > 128 * 64 and threads == 128:
        bn //= 2
    tb = rng.random() < 0.4
    policy = rng.choice(_POLICIES)
    stages = rng.choice([0, 1, 2])
    M, N = _ragged(rng, bm, 2), _ragged(rng, bn, 3)
    K = rng.choice([bk, 2 * bk, bk + 16])
    gm, gn = -(-M // bm), -(-N // bn)
    m_lim, n_lim = rng.randint(0, M), rng.randint(0, N)
    bound = 4.0 * K
    steps, allocs, refs = [], [], []
    need_v = need_u = need_lims = False
    used = set()
    n_steps = rng.randint(2, 5)
    tries = 0
    while len(refs) < n_steps and tries < 40:
        tries += 1
        kind = rng.choice(["row", "row", "col", "colvec", "rowvec", "shared_t", "copy_shared", "cast", "cast",
                           "mask", "mask"])
        k = len(refs)
        if kind == "row":
            red, op = rng.choice(list(_CHAIN_RED)), rng.choice(["-", "+", "max_half"])
            nb = bound * (bn if red == "sum" else 1) + bound
            if nb > 2 ** 22:
                continue
            expr = f"acc[i, j] {op} r{k}[i]" if op != "max_half" else f"T.max(acc[i, j], r{k}[i] * 0.5)"
            allocs.append(f"r{k} = T.alloc_fragment((bm,), \"float32\")")
            steps += [f"T.reduce_{red}(acc, r{k}, dim=1)", "for i, j in T.Parallel(bm, bn):", f"    acc[i, j] = {expr}"]

            def f(x, R, C, red=red, op=op):
                r = _CHAIN_RED[red](x, -1)
                return x - r if op == "-" else x + r if op == "+" else torch.maximum(x, r * 0.5)
        elif kind == "col":
            red = rng.choice(["sum", "max"])
            nb = bound * (bm if red == "sum" else 1) + bound
            if nb > 2 ** 22:
                continue
            allocs.append(f"c{k} = T.alloc_fragment((bn,), \"float32\")")
            steps += [f"T.reduce_{red}(acc, c{k}, dim=0)", "for i, j in T.Parallel(bm, bn):",
                      f"    acc[i, j] = acc[i, j] - c{k}[j]"]

            def f(x, R, C, red=red):
                return x - _CHAIN_RED[red](x, -2)
        elif kind == "colvec":
            if "colvec" in used:
                continue
            need_v = True
            nb = bound * 2 + 2
            allocs.append("v = T.alloc_fragment((bn,), \"float32\")")
            if rng.random() < 0.5:
                steps += ["for j in T.Parallel(bn):", "    v[j] = V[bx * bn + j]"]
            else:
                steps += ["T.copy(V[bx * bn:(bx + 1) * bn], v)"]
            plus = rng.random() < 0.5
            steps += ["for i, j in T.Parallel(bm, bn):", f"    acc[i, j] = acc[i, j] * v[j]{' + v[j]' if plus else ''}"]
            f = ("colvec", plus)  # (reads the input V: applied in the reference)
        elif kind == "rowvec":
            if "rowvec" in used:
                continue
            need_u = True
            nb = bound + 6
            allocs.append("u = T.alloc_fragment((bm,), \"float32\")")
            steps += ["for i in T.Parallel(bm):", "    u[i] = U[by * bm + i]",
                      "for i, j in T.Parallel(bm, bn):", "    acc[i, j] = acc[i, j] + u[i] * 3"]
            f = ("rowvec",)
        elif kind == "shared_t":
            nb = 2 * bound
            read = rng.choice(["flip", "roll"])
            allocs.append(f"st{k} = T.alloc_shared((bn, bm), \"float32\")")
            rd = f"acc[i, j] - st{k}[j, bm - 1 - i]" if read == "flip" else f"acc[i, j] + st{k}[(j + 1) % bn, i]"
            steps += ["for i, j in T.Parallel(bm, bn):", f"    st{k}[j, i] = acc[i, j]",
                      "for i, j in T.Parallel(bm, bn):", f"    acc[i, j] = {rd}"]

            def f(x, R, C, read=read):
                return x - x.flip(-2) if read == "flip" else x + x.roll(-1, -1)
        elif kind == "copy_shared":
            nb = 3 * bound
            sdt = rng.choice(["float32", dtype])
            if sdt == "float16" and bound > 30000:  # (no infinities: fmaxf and torch differ on NaN)
                sdt = "float32"
            read = rng.choice(["flip", "shift"])
            allocs.append(f"cs{k} = T.alloc_shared((bm, bn), \"{sdt}\")")
            rd = f"cs{k}[i, bn - 1 - j]" if read == "flip" else f"cs{k}[(i + 3) % bm, j]"
            steps += [f"T.copy(acc, cs{k})", "for i, j in T.Parallel(bm, bn):",
                      f"    acc[i, j] = {rd} * 2 - acc[i, j]" if sdt == "float32" else
                      f"    acc[i, j] = T.Cast(\"float32\", {rd}) * 2 - acc[i, j]"]

            def f(x, R, C, sdt=sdt, read=read):
                y = _round(x, sdt)
                y = y.flip(-1) if read == "flip" else y.roll(-3, -2)
                return y * 2 - x
        elif kind == "cast":
            fdt = rng.choice([dtype, "int32"])
            if fdt == "float16" and bound > 30000:
                fdt = "int32"
            nb = 2 * bound + 5
            allocs.append(f"h{k} = T.alloc_fragment((bm, bn), \"{fdt}\")")
            if fdt == "int32":
                rd = f"acc[i, j] + T.Cast(\"float32\", h{k}[i, j] % 5)"
            else:
                rd = f"acc[i, j] - T.Cast(\"float32\", h{k}[i, j]) * 2"
            steps += [f"T.copy(acc, h{k})", "for i, j in T.Parallel(bm, bn):", f"    acc[i, j] = {rd}"]

            def f(x, R, C, fdt=fdt):
                if fdt == "int32":
                    return x + torch.remainder(x.trunc(), 5)
                return x - _round(x, fdt) * 2
        else:  # mask
            need_lims = True
            nb = bound
            fill = rng.choice(["0", "-1", "acc[i, j] * 2"])
            nb = 2 * bound if fill != "0" else bound
            if rng.random() < 0.5:
                steps += ["for i, j in T.Parallel(bm, bn):",
                          f"    acc[i, j] = T.if_then_else(by * bm + i < m_lim and bx * bn + j < n_lim, acc[i, j], {fill})"]
            else:
                steps += ["for i, j in T.Parallel(bm, bn):",
                          "    if by * bm + i >= m_lim or bx * bn + j >= n_lim:",
                          f"        acc[i, j] = {fill}"]

            def f(x, R, C, fill=fill):
                keep = (R < m_lim) & (C < n_lim)
                other = {"0": torch.zeros_like(x), "-1": torch.full_like(x, -1.0), "acc[i, j] * 2": x * 2}[fill]
                return torch.where(keep, x, other)
        if nb > 2 ** 22:
            continue
        bound = nb
        used.add(kind)
        refs.append(f)
    out = rng.choice(["float32", "float32", dtype if dtype != "float16" or bound < 60000 else "float32"])
    store = rng.choice(["copy", "guarded", "shared"])
    if store == "copy":
        st = ["T.copy(acc, C[by * bm, bx * bn])"]
    elif store == "shared":
        st = ["co = T.alloc_shared((bm, bn), out)", "T.copy(acc, co)",
              "T.copy(co, C[by * bm:(by + 1) * bm, bx * bn:(bx + 1) * bn])"]
    else:
        st = ["for i, j in T.Parallel(bm, bn):", "    if by * bm + i < M and bx * bn + j < N:",
              "        C[by * bm + i, bx * bn + j] = acc[i, j]"]
    b_shape, b_tile, b_at = ("(N, K)", "(bn, bk)", "bx * bn, k * bk") if tb else ("(K, N)", "(bk, bn)", "k * bk, bx * bn")
    params_txt = ["A: T.Tensor((M, K), dtype)", f"B: T.Tensor({b_shape}, dtype)"]
    if need_v:
        params_txt.append("V: T.Tensor((gn * bn,), \"float32\")")
    if need_u:
        params_txt.append("U: T.Tensor((gm * bm,), \"float32\")")
    if need_lims:
        params_txt += ["m_lim: T.int32", "n_lim: T.int32"]
    params_txt.append("C: T.Tensor((M, N), out)")
    out_pos = len(params_txt) - 1
    loop = f"T.Pipelined(T.ceildiv(K, bk), num_stages={stages})" if stages else "T.serial(T.ceildiv(K, bk))"
    ind = " " * 12
    src_text = f'''
    @T.prim_func
    def main({", ".join(params_txt)}):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            As = T.alloc_shared((bm, bk), dtype)
            Bs = T.alloc_shared({b_tile}, dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
{chr(10).join(ind + ln for ln in allocs)}
            T.clear(acc)
            for k in {loop}:
                T.copy(A[by * bm, k * bk], As)
                T.copy(B[{b_at}], Bs)
                T.gemm(As, Bs, acc{_kw(("transpose_B", tb or None), ("policy", _pol(policy)))})
{chr(10).join(ind + ln for ln in steps + st)}

    return main
    '''
    params = dict(M=M, N=N, K=K, gm=gm, gn=gn, bm=bm, bn=bn, bk=bk, threads=threads, dtype=dtype, out=out)

    def make_inputs(device):
        g = _gen(seed)
        ins = [_ints(g, (M, K), -2, 3, dtype), _ints(g, (N, K) if tb else (K, N), -2, 3, dtype)]
        if need_v:
            ins.append(_ints(g, (gn * bn,), -2, 3, "float32"))
        if need_u:
            ins.append(_ints(g, (gm * bm,), -2, 3, "float32"))
        ins = [x.to(device) for x in ins]
        if need_lims:
            ins += [m_lim, n_lim]
        return ins

    def reference(inputs):
        a, b = inputs[0].cpu().double(), inputs[1].cpu().double()
        c = a @ (b.T if tb else b)
        pad = torch.zeros(gm * bm, gn * bn, dtype=torch.float64)
        pad[:M, :N] = c
        x = pad.view(gm, bm, gn, bn).permute(0, 2, 1, 3)  # (gm, gn, bm, bn): each block's tile
        R = torch.arange(gm).view(gm, 1, 1, 1) * bm + torch.arange(bm).view(1, 1, bm, 1)
        C = torch.arange(gn).view(1, gn, 1, 1) * bn + torch.arange(bn).view(1, 1, 1, bn)
        pos = 2
        v = u = None
        if need_v:
            v, pos = inputs[pos].cpu().double().view(1, gn, 1, bn), pos + 1
        if need_u:
            u = inputs[pos].cpu().double().view(gm, 1, bm, 1)
        for f in refs:
            if isinstance(f, tuple):
                x = x * v + (v if f[1] else 0) if f[0] == "colvec" else x + u * 3
            else:
                x = f(x, R, C)
        y = x.permute(0, 2, 1, 3).reshape(gm * bm, gn * bn)[:M, :N]
        return {out_pos: y.to(_TORCH[out])}

    return _module(src_text, [out_pos], params), params, [out_pos], make_inputs, reference, (0.0, 0.0)


# ---- back-to-back GEMMs --------------------------------------------------------------------------
def gen_gemm2(rng, seed):
    """Two chained T.gemm: per key tile, S = Q K^T (Q and K transposed or not; clear_accum or a
    T.clear first), an elementwise step on S, P the cast of S -- ``T.copy(S, P)`` into a 16-bit
    fragment (registers) or shared tile, or written transposed into shared by the threads and
    read with transpose_A -- then O += P V (V transposed or not) under T.Pipelined with 0..3
    stages over the second GEMM's K (S sometimes over D in two chunks, a T.serial loop inside); M / N / K tiles of 16..128, 128 or 256 threads, the warp
    policies of both GEMMs, the output's columns split over a second grid dim, ragged rows and
    keys.  Integer data: S and P exact in 16 bits, O exact in float32."""
    dtype = rng.choice(["float16", "bfloat16"])
    threads = rng.choice([128, 128, 256])
    bm = rng.choice([16, 32, 64, 64, 128])
    bn = rng.choice([16, 32, 64, 64, 128])
    D = rng.choice([16, 32, 64, 128])
    dv = rng.choice([16, 32, 64, 128])
    while bm * (bn + dv + bn // 2) > 160 * threads:
        if dv >= bn and dv > 16:
            dv //= 2
        else:
            bn //= 2
    # (mostly) enough m16n8 tiles for every warp: TileLang finds no warp partition otherwise
    if rng.random() < 0.85:
        while (bm // 16) * (bn // 8) < threads // 32:
            bn *= 2
        while (bm // 16) * (dv // 8) < threads // 32:
            dv *= 2
    splits = rng.choice([1, 1, 2])
    DV = dv * splits
    ta = rng.random() < 0.2
    tk = rng.random() < 0.7  # K stored (Nk, D): S = Q K^T with transpose_B
    tv = rng.random() < 0.3  # V stored (DV, Nk): transpose_B on the second GEMM
    p_mode = rng.choice(["frag", "frag", "shared", "shared_t"])
    mid = rng.choice(["none", "half", "relu", "minus1"])
    clear1 = rng.random() < 0.6
    pol1 = rng.choice(_POLICIES)
    pol2 = pol1 if rng.random() < 0.7 else rng.choice(_POLICIES)
    stages = rng.choice([0, 1, 2, 2, 3])
    v_early = rng.random() < 0.5
    M = _ragged(rng, bm, 2)
    Nk = _ragged(rng, bn, 4)
    out = rng.choice(["float32", "float32", dtype])
    store = rng.choice(["copy", "copy", "guarded"])
    # S over D in two chunks: a serial loop inside the pipelined one, Q and K loaded a chunk
    # at a time, S cleared before it
    dsplit = D >= 32 and rng.random() < 0.25
    bd = D // 2 if dsplit else D
    if dsplit:
        clear1 = False

    def smem(st):
        return 2 * (bm * bd + st * bn * (bd + dv) + (bm * bn if p_mode != "frag" else 0))
    while stages > 1 and smem(stages) > 200 * 1024:
        stages -= 1
    d0 = "d * bd" if dsplit else "0"
    q_shape, q_tile, q_at = ("(D, M)", "(bd, bm)", f"{d0}, bx * bm") if ta else ("(M, D)", "(bm, bd)", f"bx * bm, {d0}")
    k_shape, k_tile, k_at = ("(Nk, D)", "(bn, bd)", f"k * bn, {d0}") if tk else ("(D, Nk)", "(bd, bn)", f"{d0}, k * bn")
    v_shape, v_tile, v_at = ("(DV, Nk)", "(dv, bn)", "by * dv, k * bn") if tv else ("(Nk, DV)", "(bn, dv)",
                                                                                   "k * bn, by * dv")
    g1 = f"T.gemm(qs, ks, s{_kw(('transpose_A', ta or None), ('transpose_B', tk or None), ('clear_accum', clear1 or None), ('policy', _pol(pol1)))})"
    vcopy = f"T.copy(V[{v_at}], vs)"
    body = [vcopy] if v_early else []
    if dsplit:
        body += ["T.clear(s)", "for d in T.serial(D // bd):", f"    T.copy(Q[{q_at}], qs)", f"    T.copy(K[{k_at}], ks)",
                 f"    {g1}"]
    else:
        body.insert(0, f"T.copy(K[{k_at}], ks)")
        if not clear1:
            body.append("T.clear(s)")
        body.append(g1)
    mid_expr = {"none": None, "half": "s[i, j] * 0.5", "relu": "T.max(s[i, j], 0)", "minus1": "s[i, j] - 1"}[mid]
    if mid_expr:
        body += ["for i, j in T.Parallel(bm, bn):", f"    s[i, j] = {mid_expr}"]
    if p_mode == "shared_t":
        body += ["for i, j in T.Parallel(bm, bn):", "    p[j, i] = s[i, j]"]
    else:
        body.append("T.copy(s, p)")
    if not v_early:
        body.append(vcopy)
    body.append(f"T.gemm(p, vs, o{_kw(('transpose_A', (p_mode == 'shared_t') or None), ('transpose_B', tv or None), ('policy', _pol(pol2)))})")
    p_alloc = {"frag": "p = T.alloc_fragment((bm, bn), dtype)", "shared": "p = T.alloc_shared((bm, bn), dtype)",
               "shared_t": "p = T.alloc_shared((bn, bm), dtype)"}[p_mode]
    if store == "copy":
        st = ["T.copy(o, O[bx * bm, by * dv])"]
    else:
        st = ["for i, j in T.Parallel(bm, dv):", "    if bx * bm + i < M:", "        O[bx * bm + i, by * dv + j] = o[i, j]"]
    loop = f"T.Pipelined(T.ceildiv(Nk, bn), num_stages={stages})" if stages else "T.serial(T.ceildiv(Nk, bn))"
    src_text = f'''
    @T.prim_func
    def main(Q: T.Tensor({q_shape}, dtype), K: T.Tensor({k_shape}, dtype), V: T.Tensor({v_shape}, dtype),
             O: T.Tensor((M, DV), out)):
        with T.Kernel(T.ceildiv(M, bm), DV // dv, threads=threads) as (bx, by):
            qs = T.alloc_shared({q_tile}, dtype)
            ks = T.alloc_shared({k_tile}, dtype)
            vs = T.alloc_shared({v_tile}, dtype)
            s = T.alloc_fragment((bm, bn), "float32")
            {p_alloc}
            o = T.alloc_fragment((bm, dv), "float32")
            {"" if dsplit else f"T.copy(Q[{q_at}], qs)"}
            T.clear(o)
            for k in {loop}:
{chr(10).join(" " * 16 + ln for ln in body)}
{chr(10).join(" " * 12 + ln for ln in st)}

    return main
    '''
    src_text = "\n".join(ln for ln in src_text.split("\n") if ln.strip() or not ln)
    params = dict(M=M, Nk=Nk, D=D, DV=DV, bm=bm, bn=bn, bd=bd, dv=dv, threads=threads, dtype=dtype, out=out)

    def make_inputs(device):
        g = _gen(seed)
        q = _ints(g, (D, M) if ta else (M, D), -1, 2, dtype)
        k = _ints(g, (Nk, D) if tk else (D, Nk), -1, 2, dtype)
        v = _ints(g, (DV, Nk) if tv else (Nk, DV), -2, 3, dtype)
        return [q.to(device), k.to(device), v.to(device)]

    def reference(inputs):
        q, k, v = (x.cpu().double() for x in inputs)
        q, k, v = (q.T if ta else q), (k if tk else k.T), (v.T if tv else v)
        s = q @ k.T  # (M, Nk)
        # the key tail: zero rows of K and V (TileLang's copies read 0 past the tensor), so S
        # is 0 there before the elementwise step and P V adds nothing
        s = {"none": s, "half": s * 0.5, "relu": s.clamp(min=0), "minus1": s - 1}[mid]
        return {3: (_round(s, dtype) @ v).to(_TORCH[out])}

    return _module(src_text, [3], params), params, [3], make_inputs, reference, (0.0, 0.0)


# ---- convolutions as implicit GEMMs ----------------------------------------------------------
def gen_conv(rng, seed):
    """A 2-D convolution over an NHWC image as an implicit GEMM, as TileLang's users write it:
    per K step the (bm, bk) image tile is ``T.im2col(X, x_s, by, ko, k, s, d, p)`` or gathered
    by the threads with the index math written out (``T.if_then_else`` on the padding and the
    tails), the (bk, bn) weight tile a ``T.copy`` of the (k * k * c, f) weights, ``T.gemm``
    into a float32 accumulator, under ``T.Pipelined`` with 0..3 stages; square kernels 1..5,
    stride 1..3, dilation 1..2, padding 0..2, channel counts that are and are not multiples of
    the column tile, ragged output pixels and filters, an optional bias + relu epilogue.
    Integer data: the sums are exact in float32 (and rounded once into a 16-bit output)."""
    dtype = rng.choice(["float16", "bfloat16"])
    k = rng.choice([1, 1, 2, 3, 3, 3, 5])
    s = rng.choice([1, 1, 2, 3])
    d = rng.choice([1, 1, 2]) if k > 1 else 1
    p = rng.randint(0, min(2, (k - 1) * d))
    c = rng.choice([8, 16, 24, 32, 48, 64, 128])
    f = rng.choice([16, 32, 48, 64, 128])
    n = rng.choice([1, 2])
    span = (k - 1) * d + 1
    h = rng.randint(max(span - 2 * p, 1), 20)
    w = rng.randint(max(span - 2 * p, 1), 20)
    oh = (h + 2 * p - span) // s + 1
    ow = (w + 2 * p - span) // s + 1
    threads = rng.choice([128, 128, 256])
    bm = rng.choice([64, 64, 128]) if threads == 256 else rng.choice([32, 64, 64, 128])
    bn = rng.choice([32, 64, 64, 128])
    bk = rng.choice([16, 32, 32, 64])
    stages = rng.choice([0, 1, 2, 3, 3])
    gather = "im2col" if rng.random() < 0.6 else "manual"
    epi = rng.choice(["none", "none", "bias_relu"])
    out = rng.choice(["float32", "float32", dtype])
    store = rng.choice(["copy", "copy", "guarded"])
    pol = rng.choice(_POLICIES)
    M = n * oh * ow
    KK = k * k * c
    steps = "T.ceildiv(KK, bk)"
    loop = f"T.Pipelined({steps}, num_stages={stages})" if stages else f"T.serial({steps})"
    if gather == "im2col":
        fill = ["T.im2col(X, x_s, by, ko, k, s, d, p)"]
    else:
        fill = ["for i, j in T.Parallel(bm, bk):",
                "    m = by * bm + i",
                "    kk = ko * bk + j",
                "    img = m // (oh * ow)",
                "    oy = m % (oh * ow) // ow",
                "    ox = m % ow",
                "    kh = kk // c // k",
                "    kw = kk // c % k",
                "    ih = oy * s + kh * d - p",
                "    iw = ox * s + kw * d - p",
                "    x_s[i, j] = T.if_then_else(m < M and kk < KK and ih >= 0 and ih < h and iw >= 0 and iw < w,",
                "                               X[img, ih, iw, kk % c], T.cast(0, dtype))"]
    body = fill + ["T.copy(Wt[ko * bk, bx * bn], w_s)",
                   f"T.gemm(x_s, w_s, acc{_kw(('policy', _pol(pol)))})"]
    if epi == "bias_relu":
        epi_lines = ["for i, j in T.Parallel(bm, bn):",
                     "    acc[i, j] = T.max(acc[i, j] + Bias[bx * bn + j], 0)"]
        bias_param = ", Bias: T.Tensor((f,), \"float32\")"
    else:
        epi_lines, bias_param = [], ""
    if store == "copy":
        st = ["T.copy(acc, Y[by * bm, bx * bn])"]
    else:
        st = ["for i, j in T.Parallel(bm, bn):",
              "    if by * bm + i < M and bx * bn + j < f:",
              "        Y[by * bm + i, bx * bn + j] = acc[i, j]"]
    src_text = f'''
    @T.prim_func
    def main(X: T.Tensor((n, h, w, c), dtype), Wt: T.Tensor((KK, f), dtype){bias_param},
             Y: T.Tensor((M, f), out)):
        with T.Kernel(T.ceildiv(f, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            x_s = T.alloc_shared((bm, bk), dtype)
            w_s = T.alloc_shared((bk, bn), dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for ko in {loop}:
{chr(10).join(" " * 16 + ln for ln in body)}
{chr(10).join(" " * 12 + ln for ln in epi_lines + st)}

    return main
    '''
    src_text = "\n".join(ln for ln in src_text.split("\n") if ln.strip() or not ln)
    params = dict(n=n, h=h, w=w, c=c, f=f, k=k, s=s, d=d, p=p, oh=oh, ow=ow, M=M, KK=KK, bm=bm, bn=bn,
                  bk=bk, threads=threads, dtype=dtype, out=out)
    out_pos = 3 if epi == "bias_relu" else 2

    def make_inputs(device):
        g = _gen(seed)
        x = _ints(g, (n, h, w, c), -1, 2, dtype)
        wt = _ints(g, (KK, f), -2, 3, dtype)
        ins = [x.to(device), wt.to(device)]
        if epi == "bias_relu":
            ins.append(_ints(g, (f,), -4, 5, "float32").to(device))
        return ins

    def reference(inputs):
        x, wt = inputs[0].cpu().double(), inputs[1].cpu().double()
        wk = wt.view(k, k, c, f).permute(3, 2, 0, 1)
        y = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2), wk, stride=s, padding=p, dilation=d)
        y = y.permute(0, 2, 3, 1).reshape(M, f)
        if epi == "bias_relu":
            y = (y + inputs[2].cpu().double()).clamp(min=0)
        return {out_pos: y.to(_TORCH[out])}

    return _module(src_text, [out_pos], params), params, [out_pos], make_inputs, reference, (0.0, 0.0)


# ---- block-sparse loops ----------------------------------------------------------------------------
def gen_sparse(rng, seed):
    """A GEMM whose K steps are taken or skipped by data, as TileLang's block-sparse GEMM and
    sparse decode kernels write it: the ``T.Pipelined`` body is one ``if`` on a mask tensor
    (``if Mask[by, bx, k]:``), or on a block index read first (``i_s = Idx[by, k]`` then
    ``if i_s >= 0:``, the tiles read at ``i_s``), holding the two copies and ``T.gemm``;
    0..3 stages, float16 / bfloat16, tiles 32..128, 128 or 256 threads, ragged M / N, an
    optional row scale after the loop.  Integer data: exact in float32."""
    dtype = rng.choice(["float16", "bfloat16"])
    threads = rng.choice([128, 128, 256])
    bm = rng.choice([64, 128]) if threads == 256 else rng.choice([32, 64, 64, 128])
    bn = rng.choice([32, 64, 64, 128])
    bk = rng.choice([32, 64, 64])
    KT = rng.randint(1, 6)
    K = KT * bk
    M = _ragged(rng, bm, 2)
    N = _ragged(rng, bn, 2)
    stages = rng.choice([0, 1, 2, 3, 3])
    kind = rng.choice(["mask", "mask", "index"])
    density = rng.choice([0.0, 0.3, 0.6, 1.0])
    scale = rng.random() < 0.3
    out = rng.choice(["float32", "float32", dtype])
    pol = rng.choice(_POLICIES)
    gm, gn = -(-M // bm), -(-N // bn)
    loop = f"T.Pipelined(KT, num_stages={stages})" if stages else "T.serial(KT)"
    gemm = f"T.gemm(a_s, b_s, acc{_kw(('policy', _pol(pol)))})"
    if kind == "mask":
        sel_param = "Mask: T.Tensor((gm, gn, KT), \"bool\")"
        body = ["if Mask[by, bx, k]:",
                "    T.copy(A[by * bm, k * bk], a_s)",
                "    T.copy(B[k * bk, bx * bn], b_s)",
                f"    {gemm}"]
    else:
        sel_param = "Idx: T.Tensor((gm, KT), \"int32\")"
        body = ["i_s = Idx[by, k]",
                "if i_s >= 0:",
                "    T.copy(A[by * bm, i_s * bk], a_s)",
                "    T.copy(B[i_s * bk, bx * bn], b_s)",
                f"    {gemm}"]
    tail = []
    if scale:
        tail = ["for i, j in T.Parallel(bm, bn):", "    acc[i, j] = acc[i, j] * S[by * bm + i]"]
    src_text = f'''
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), {sel_param}, S: T.Tensor((M,), "float32"),
             C: T.Tensor((M, N), out)):
        with T.Kernel(gn, gm, threads=threads) as (bx, by):
            a_s = T.alloc_shared((bm, bk), dtype)
            b_s = T.alloc_shared((bk, bn), dtype)
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in {loop}:
{chr(10).join(" " * 16 + ln for ln in body)}
{chr(10).join(" " * 12 + ln for ln in tail)}
            T.copy(acc, C[by * bm, bx * bn])

    return main
    '''
    src_text = "\n".join(ln for ln in src_text.split("\n") if ln.strip() or not ln)
    params = dict(M=M, N=N, K=K, KT=KT, gm=gm, gn=gn, bm=bm, bn=bn, bk=bk, threads=threads, dtype=dtype, out=out)

    def make_inputs(device):
        g = _gen(seed)
        a = _ints(g, (M, K), -1, 2, dtype)
        b = _ints(g, (K, N), -2, 3, dtype)
        if kind == "mask":
            sel = torch.rand((gm, gn, KT), generator=g) < density
        else:
            # each row block's taken K blocks (in order, no repeats), then -1s
            sel = torch.full((gm, KT), -1, dtype=torch.int32)
            for r in range(gm):
                taken = sorted(torch.randperm(KT, generator=g)[:int(round(KT * density))].tolist())
                sel[r, :len(taken)] = torch.tensor(taken, dtype=torch.int32)
        sc = _ints(g, (M,), -3, 4, "float32")
        return [a.to(device), b.to(device), sel.to(device), sc.to(device)]

    def reference(inputs):
        a, b, sel, sc = (x.cpu() for x in inputs)
        a, b = a.double(), b.double()
        c = torch.zeros(M, N, dtype=torch.float64)
        for r in range(gm):
            rows = slice(r * bm, min(M, (r + 1) * bm))
            for q in range(gn):
                cols = slice(q * bn, min(N, (q + 1) * bn))
                for k in range(KT):
                    kb = (k if bool(sel[r, q, k]) else None) if kind == "mask" else \
                        (int(sel[r, k]) if int(sel[r, k]) >= 0 else None)
                    if kb is not None:
                        ks = slice(kb * bk, (kb + 1) * bk)
                        c[rows, cols] += a[rows, ks] @ b[ks, cols]
        if scale:
            c = c * sc.double()[:, None]
        return {4: c.to(_TORCH[out])}

    return _module(src_text, [4], params), params, [4], make_inputs, reference, (0.0, 0.0)


# ---- attention backward ----------------------------------------------------------------------------
def gen_attn_bwd(rng, seed):
    """FlashAttention's backward for one head, as TileLang's users write it: a block per key
    tile holds K and V in shared memory and dK / dV in registers; its ``T.Pipelined`` walk
    over query tiles (from the diagonal when causal) recomputes P^T = exp2(K Q^T * scale - lse)
    from the saved log-sum-exp, dP^T = V dO^T, dV += P^T dO (P^T cast to 16 bits in
    registers), dS^T = P^T (dP^T - delta) * sm_scale, dK += dS^T Q, and dQ = dS K through a
    shared dS^T tile (``transpose_A``) added with ``T.atomic_add`` into a float32 dQ; tiles
    32..128, head dims 16..128, 128 or 256 threads, 0..2 stages, ragged sequences."""
    dtype = rng.choice(["float16", "bfloat16"])
    threads = rng.choice([128, 128, 256])
    bn = 128 if threads == 256 else rng.choice([64, 64, 128])
    bm = rng.choice([64, 128]) if threads == 256 else rng.choice([32, 64, 64, 128])
    D = rng.choice([16, 32, 64, 64, 128])
    while (2 * bm * bn + 2 * bn * D + bm * D) > 150 * threads:
        if bm > 32 and bm >= D:
            bm //= 2
        else:
            D //= 2
    causal = rng.random() < 0.5
    stages = rng.choice([0, 1, 2, 2])
    S = _ragged(rng, max(bm, bn), 3)
    sm_scale = 1.0 / (D ** 0.5)
    log2e = 1.4426950408889634
    out = rng.choice(["float32", dtype])
    start = "T.floordiv(bx * bn, bm)" if causal else "0"
    loop = (f"T.Pipelined({start}, T.ceildiv(S, bm), num_stages={stages})" if stages else
            f"T.serial({start}, T.ceildiv(S, bm))")
    mask = ["for i, j in T.Parallel(bn, bm):",
            "    pT[i, j] = T.if_then_else(bx * bn + i <= k * bm + j, pT[i, j], 0)"] if causal else []
    body = ["T.copy(Q[k * bm, 0], q_s)",
            "T.clear(pT)",
            "T.gemm(k_s, q_s, pT, transpose_B=True)",
            "T.copy(LSE[k * bm], lse_s)",
            "for i, j in T.Parallel(bn, bm):",
            "    pT[i, j] = T.exp2(pT[i, j] * scale_log2 - lse_s[j])",
            *mask,
            "T.copy(dO[k * bm, 0], do_s)",
            "T.clear(dpT)",
            "T.gemm(v_s, do_s, dpT, transpose_B=True)",
            "T.copy(pT, pT_h)",
            "T.gemm(pT_h, do_s, dv)",
            "T.copy(Delta[k * bm], delta_s)",
            "for i, j in T.Parallel(bn, bm):",
            "    dsT_h[i, j] = pT[i, j] * (dpT[i, j] - delta_s[j]) * sm_scale",
            "T.gemm(dsT_h, q_s, dk)",
            "T.copy(dsT_h, dsT_s)",
            "T.clear(dq)",
            "T.gemm(dsT_s, k_s, dq, transpose_A=True)",
            "for i, j in T.Parallel(bm, D):",
            "    if k * bm + i < S:",
            "        T.atomic_add(dQ[k * bm + i, j], dq[i, j])"]
    src_text = f'''
    @T.prim_func
    def main(Q: T.Tensor((S, D), dtype), K: T.Tensor((S, D), dtype), V: T.Tensor((S, D), dtype),
             dO: T.Tensor((S, D), dtype), LSE: T.Tensor((S,), "float32"), Delta: T.Tensor((S,), "float32"),
             dQ: T.Tensor((S, D), "float32"), dK: T.Tensor((S, D), out), dV: T.Tensor((S, D), out)):
        with T.Kernel(T.ceildiv(S, bn), threads=threads) as bx:
            k_s = T.alloc_shared((bn, D), dtype)
            v_s = T.alloc_shared((bn, D), dtype)
            q_s = T.alloc_shared((bm, D), dtype)
            do_s = T.alloc_shared((bm, D), dtype)
            lse_s = T.alloc_shared((bm,), "float32")
            delta_s = T.alloc_shared((bm,), "float32")
            dsT_s = T.alloc_shared((bn, bm), dtype)
            pT = T.alloc_fragment((bn, bm), "float32")
            dpT = T.alloc_fragment((bn, bm), "float32")
            pT_h = T.alloc_fragment((bn, bm), dtype)
            dsT_h = T.alloc_fragment((bn, bm), dtype)
            dv = T.alloc_fragment((bn, D), "float32")
            dk = T.alloc_fragment((bn, D), "float32")
            dq = T.alloc_fragment((bm, D), "float32")
            T.copy(K[bx * bn, 0], k_s)
            T.copy(V[bx * bn, 0], v_s)
            T.clear(dv)
            T.clear(dk)
            for k in {loop}:
{chr(10).join(" " * 16 + ln for ln in body)}
            T.copy(dv, dV[bx * bn, 0])
            T.copy(dk, dK[bx * bn, 0])

    return main
    '''
    src_text = "\n".join(ln for ln in src_text.split("\n") if ln.strip() or not ln)
    params = dict(S=S, D=D, bm=bm, bn=bn, threads=threads, dtype=dtype, out=out, sm_scale=sm_scale,
                  scale_log2=sm_scale * log2e)

    def forward(q, k, v):
        s = (q @ k.T) * sm_scale
        if causal:
            s = s.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
        return s

    def make_inputs(device):
        g = _gen(seed)
        q, k, v, do = ((torch.randn((S, D), generator=g) * 0.5).to(_TORCH[dtype]) for _ in range(4))
        s = forward(q.double(), k.double(), v.double())
        lse = torch.logsumexp(s, dim=1)
        o = torch.softmax(s, dim=1) @ v.double()
        delta = (do.double() * o).sum(1)
        lse2 = (lse * log2e).float()
        return [x.to(device) for x in (q, k, v, do, lse2, delta.float(), torch.zeros(S, D))]

    def reference(inputs):
        q, k, v, do, lse2, delta, _ = (x.cpu().double() for x in inputs)
        s = forward(q, k, v)
        p = torch.exp2(s * log2e - lse2[:, None])  # (query, key), as the kernel recomputes it
        p16 = _round(p, dtype)
        dv = p16.T @ do
        dp = do @ v.T
        ds16 = _round(p * (dp - delta[:, None]) * sm_scale, dtype)
        dk = ds16.T @ q
        dq = ds16 @ k
        return {6: dq.float(), 7: dk.to(_TORCH[out]), 8: dv.to(_TORCH[out])}

    return _module(src_text, [7, 8], params), params, [7, 8], make_inputs, reference, (2e-2, 2e-2)


# ---- int4 GEMMs (mma.sync m16n8k64) ------------------------------------------------------------
def _pack_int4(t):
    """Two int4 values a byte, element 2k in the low nibble (TileLang's packing)."""
    t16 = t.to(torch.int16)
    return ((t16[..., ::2] & 0xF) | ((t16[..., 1::2] & 0xF) << 4)).to(torch.int8).contiguous()


def gen_int4_gemm(rng, seed):
    """T.int4 / T.uint4 -> int32 T.gemm (K-major, packed byte tensors), ragged M / N / K
    tails, pipelined or not, a policy, an epilogue on the accumulator.  Not among
    NEW_FORMS (its seeds would move theirs): ``--form int4_gemm``."""
    threads = rng.choice([32, 64, 128, 128, 256])
    bm = rng.choice([16, 32, 64, 128])
    bn = rng.choice([16, 32, 64, 128, 256])
    bk = rng.choice([64, 64, 128, 256])
    while bm * bn > 128 * 128:
        bn //= 2
    stages = rng.choice([0, 1, 2, 3])
    policy = rng.choice(["Square", "FullRow", "FullCol", None])
    M, N = _ragged(rng, bm, 2), _ragged(rng, bn, 2)
    K = rng.choice([bk, 2 * bk, 3 * bk, 2 * bk - 64, bk + 64]) if bk > 64 else rng.choice([64, 128, 192, 320])
    epi = rng.choice(["none", "none", "relu", "rowscale"])
    ad, bd = rng.choice(["int4", "int4", "uint4"]), rng.choice(["int4", "int4", "uint4"])
    kws = f", policy=T.GemmWarpPolicy.{policy}" if policy else ""
    loop = f"T.Pipelined(T.ceildiv(K, bk), num_stages={stages})" if stages else "T.serial(T.ceildiv(K, bk))"
    epilogue = {"none": "", "relu": """
            for i, j in T.Parallel(bm, bn):
                Cf[i, j] = T.max(Cf[i, j], 0)""", "rowscale": """
            for i, j in T.Parallel(bm, bn):
                Cf[i, j] = Cf[i, j] * (by * bm + i + 1) - (bx * bn + j)"""}[epi]
    src_text = f'''
    @T.prim_func
    def main(A: T.Tensor((M, K), ad), B: T.Tensor((N, K), bd), C: T.Tensor((M, N), "int32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            As = T.alloc_shared((bm, bk), ad)
            Bs = T.alloc_shared((bn, bk), bd)
            Cf = T.alloc_fragment((bm, bn), "int32")
            T.clear(Cf)
            for k in {loop}:
                T.copy(A[by * bm, k * bk], As)
                T.copy(B[bx * bn, k * bk], Bs)
                T.gemm(As, Bs, Cf, transpose_B=True{kws}){epilogue}
            T.copy(Cf, C[by * bm, bx * bn])

    return main
    '''
    params = dict(M=M, N=N, K=K, bm=bm, bn=bn, bk=bk, threads=threads, ad=ad, bd=bd)

    def values(g):
        lo = {"int4": -8, "uint4": 0}
        return (torch.randint(lo[ad], lo[ad] + 16, (M, K), generator=g, dtype=torch.int16),
                torch.randint(lo[bd], lo[bd] + 16, (N, K), generator=g, dtype=torch.int16))

    def make_inputs(device):
        a, b = values(_gen(seed))
        return [_pack_int4(a).to(device), _pack_int4(b).to(device)]

    def reference(inputs):
        a, b = values(_gen(seed))
        c = a.to(torch.int64) @ b.to(torch.int64).T
        if epi == "relu":
            c = c.clamp(min=0)
        if epi == "rowscale":
            c = c * (torch.arange(M).view(M, 1) + 1) - torch.arange(N).view(1, N)
        return {2: c.to(torch.int32)}

    return _module(src_text, [2], params), params, [2], make_inputs, reference, (0.0, 0.0)


NEW_FORMS = ["attn", "gemm_grid", "smem_gemm", "acc_lines", "pipe_order", "macro", "scalar", "dequant", "acc_chain",
             "gemm2", "conv", "sparse", "attn_bwd"]
EXTRA_FORMS = ["int4_gemm"]  # (only by name: adding them to NEW_FORMS would move its seeds)


_GENS = {"copy": gen_copy, "index": gen_index, "reduce": gen_reduce, "cumsum": gen_cumsum, "cast": gen_cast,
         "atomic": gen_atomic, "gemm": gen_gemm, "serial": gen_serial, "pipeline": gen_pipeline,
         "stencil": gen_stencil, "softmax": gen_softmax, "rank3": gen_rank3, "reuse": gen_reuse,
         "attn": gen_attn, "gemm_grid": gen_gemm_grid, "smem_gemm": gen_smem_gemm, "acc_lines": gen_acc_lines,
         "pipe_order": gen_pipe_order, "macro": gen_macro, "scalar": gen_scalar, "dequant": gen_dequant,
         "acc_chain": gen_acc_chain, "gemm2": gen_gemm2, "conv": gen_conv, "sparse": gen_sparse,
         "attn_bwd": gen_attn_bwd, "int4_gemm": gen_int4_gemm}


def generate(seed, form=None):
    """The program of ``seed``: its form picked by the seed among FORMS unless ``form`` is
    given -- one of FORMS, NEW_FORMS or EXTRA_FORMS, or ``"new"``: picked by the seed
    among NEW_FORMS."""
    rng = random.Random(seed * 7919 + 17)
    if form == "new":
        form = NEW_FORMS[seed % len(NEW_FORMS)]
    form = form or FORMS[seed % len(FORMS)]
    source, args, out_idx, make_inputs, reference, tol = _GENS[form](rng, seed)
    return Program(f"{form}_{seed}", seed, form, source, args, out_idx, make_inputs, reference, tol)


def programs(first, count, form=None):
    return [generate(s, form) for s in range(first, first + count)]


# ---- running -----------------------------------------------------------------------------------
def refused(exc):
    """Whether an exception is one of tilecute's refusals (an error class of its own, naming
    what it refuses), not a crash (KeyError, AssertionError, a bare ValueError, a CuTe DSL or
    compiler failure...)."""
    cls = type(exc)
    mod = cls.__module__ or ""
    own = mod.startswith(("tilecute", "backend"))
    return own and issubclass(cls, (ValueError, SyntaxError, NotImplementedError)) and cls not in (
        ValueError, SyntaxError, NotImplementedError)


def compare(prog, before, inputs, outputs):
    """[(position, message)] of the mismatches of one run against the reference: ``before``
    the arguments as made (the reference's), ``inputs`` the same arguments after the run
    (those written in place are compared) and ``outputs`` what the kernel returned."""
    want = prog.reference([x.cpu().clone() if isinstance(x, torch.Tensor) else x for x in before])
    nparams = len(inputs) + len(prog.out_idx)
    got = {}
    outs = list(outputs) if isinstance(outputs, (tuple, list)) else ([outputs] if outputs is not None else [])
    k_in = iter(inputs)
    k_out = iter(outs)
    for p in range(nparams):
        got[p] = next(k_out) if p in prog.out_idx else next(k_in)
    bad = []
    atol, rtol = prog.tol
    for p, w in want.items():
        g = got[p].cpu()
        if g.shape != w.shape or g.dtype != w.dtype:
            bad.append((p, f"shape/dtype {tuple(g.shape)} {g.dtype} != {tuple(w.shape)} {w.dtype}"))
            continue
        gd, wd = g.double(), w.double()
        err = (gd - wd).abs()
        lim = atol + rtol * wd.abs()
        wrong = ~((err <= lim) | (gd.isnan() & wd.isnan()) | (gd == wd))
        if wrong.any():
            n = int(wrong.sum())
            first = tuple(int(v) for v in wrong.nonzero()[0])
            bad.append((p, f"{n}/{wrong.numel()} wrong, first at {first}: got {gd[first].item()} "
                           f"want {wd[first].item()}"))
    return bad


def run_program(prog, device="cuda", on_built=None):
    """Build, run and compare one program: (status, detail) with status one of
    'ok', 'refused', 'crash', 'wrong'.  ``on_built()`` is called between the build and the
    launch (the runner's timeout counts the launch from there)."""
    try:
        kernel = prog.kernel()
        kernel.ensure_cubin()
    except Exception as exc:  # noqa: BLE001 -- sorted into refusal / crash below
        return ("refused" if refused(exc) else "crash"), f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    if on_built is not None:
        on_built()
    inputs = prog.make_inputs(device)
    before = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]  # (scalars too)
    try:
        outputs = kernel(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001
        return "crash", f"run: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
    bad = compare(prog, before, inputs, outputs)
    if bad:
        return "wrong", "; ".join(f"arg {p}: {m}" for p, m in bad)
    return "ok", ""


def build_program(prog, arch=None):
    """Build one program's cubin (no GPU): ('ok' | 'refused' | 'crash', detail)."""
    import os
    import tempfile

    import tilecute
    try:
        kernel = prog.kernel()
        if arch is None or arch == os.environ.get("TILECUTE_ARCH", "sm_90a"):
            assert kernel.ensure_cubin()
        else:
            with tempfile.TemporaryDirectory() as out:
                assert tilecute.build_cubin(prog.factory.get_tir(**prog.args), arch, out_dir=out).kernel_names
    except Exception as exc:  # noqa: BLE001 -- sorted into refusal / crash
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        return ("refused" if refused(exc) else "crash"), f"{type(exc).__name__}: {first}"
    return "ok", ""
