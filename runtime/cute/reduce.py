"""Reductions for generated kernels: an element-wise combine, a warp shuffle all-reduce
and a block-level all-reduce through shared memory.

``op`` is always a compile-time Python string: ``"sum"``, ``"max"``, ``"min"``, on
integers (and bools) ``"bitand"``, ``"bitor"``, ``"bitxor"``, or ``"max_nan"`` / ``"min_nan"``: max /
min where a NaN operand is the result (TileLang's ``nan_propagate``).
Use :func:`combine`, not Python's builtin ``max``/``min``: inside ``@cute.kernel``/
``@cute.jit`` bodies CuTe rewrites those into a compare + select (``setp`` + ``selp``,
not ``max.f32``), and in plain helper functions they fail with
``PHASE_DYNAMIC_TO_STATIC_BOOL``.

Usage in generated code::

    from tilecute.runtime.cute import reduce as tcr
    acc = tcr.combine(acc, x, "max")
    red[r] = tcr.warp_allreduce(acc, "max", 32)
    tcr.block_allreduce(red, "max", scratch, 4, 4)
    v = tcr.gather_allreduce(v, lambda x, y: x * y, scratch, tid, first, 64, 4)
"""

import cutlass
import cutlass.cute as cute

OPS = ("sum", "max", "min", "bitand", "bitor", "bitxor", "max_nan", "min_nan")
_FP8 = (cutlass.Float8E4M3FN, cutlass.Float8E5M2)


def pick(frag, index, n: int):
    """``frag[index]`` of a register fragment of ``n`` elements that every thread holds
    whole, read at an index known only at run time (a row statistic read at the thread's
    own row): a chain of ``n - 1`` selects over the registers, where indexing the
    fragment with a run-time value would put it in local memory (a stack frame, ``st.local``
    / ``ld.local``).  A compile-time ``index`` is the register itself."""
    if isinstance(index, int):
        return frag[index]
    value = frag[0]
    for c in range(1, n):
        value = cutlass.select_(index == c, frag[c], value)
    # select_ of two integers comes back signless, which CuTe DSL refuses to convert to a
    # float (an int32 row sum scaled to float32): re-typed as the fragment's element
    return frag.element_type(value)


def combine(a, b, op):
    """``a + b``, ``max(a, b)``, ``min(a, b)``, ``a & b``, ``a | b`` or ``a ^ b`` for ``op``
    "sum" / "max" / "min" / "bitand" / "bitor" / "bitxor" (the last three on integers or
    bools);
    "max_nan" / "min_nan": max / min propagating NaN (``max.NaN.f32``, CUDA's
    ``__hmax_nan`` through Float32 for Float16/BFloat16; Float64 "max" / "min" with a NaN
    operand selected over it; integers as "max" / "min").
    ``op`` may also be a function, the combiner itself: ``op(a, b)``, or for tuples of
    values ``op(*a, *b)`` (TVM's reducer of several values, returning a tuple).

    PTX by dtype: Float32 max/min use ``cute.arch.fmax``/``fmin`` (``max.f32``/``min.f32``,
    NaN-quiet like CUDA ``fmaxf``); Float16/BFloat16 go through Float32 the same way
    (exact; NVVM folds the ``cvt``/``max.f32``/``cvt`` back into ``max.f16``/
    ``max.bf16``, where CuTe's generic max would be ``setp`` + ``selp``); integers and Float64 use
    ``cutlass.max``/``min`` (``max.s32``/``min.u32``/...; f64: ``setp`` + ``selp``).
    Signedness comes from the DSL type: elements loaded from a tensor of a Uint32
    pointer come back as Int32 (CuTe pointers are signless), so wrap them in
    ``cutlass.Uint32(...)`` where unsigned order matters.  ``a`` and ``b`` should have
    the same DSL type; a Python number on one side is fine.  The result has ``a``'s
    type (``b``'s if ``a`` is a Python number).  A plain function emitting straight-line
    code, so it inlines anywhere.
    """
    if callable(op):  # a combiner of its own (TVM's T.comm_reducer: a product, ...)
        return op(*a, *b) if isinstance(a, tuple) else op(a, b)
    fp8 = next((type(x) for x in (a, b) if type(x) in _FP8), None)
    if fp8 is not None:  # no fp8 arithmetic: through Float32, rounded back each step (TileLang's)
        return fp8(combine(cutlass.Float32(a), cutlass.Float32(b), op))
    if op == "sum":
        return a + b
    if op in ("bitand", "bitor", "bitxor"):  # integers (and.b32 / or.b32 / xor.b32) or bools
        r = a & b if op == "bitand" else a | b if op == "bitor" else a ^ b
        # Boolean ^ Boolean comes back as Int8: a bool reduction (T.reduce_bitxor of bools,
        # the parity) stays Boolean
        return cutlass.Boolean(r) if cutlass.Boolean in (type(a), type(b)) else r
    if op not in ("max", "min", "max_nan", "min_nan"):
        raise ValueError(f"tilecute combine: unknown op {op!r}, expected one of {OPS}")
    nan = op.endswith("_nan")
    dtype = type(a) if isinstance(a, cutlass.Numeric) else type(b)
    if dtype is cutlass.Boolean:  # max / min of bools (any / all) stay Boolean
        return cutlass.Boolean(cutlass.max(a, b) if op.startswith("max") else cutlass.min(a, b))
    if dtype in (cutlass.Float32, cutlass.Float16, cutlass.BFloat16):
        f = cute.arch.fmax if op.startswith("max") else cute.arch.fmin
        r = f(cutlass.Float32(a), cutlass.Float32(b), nan=nan)
        return r if dtype is cutlass.Float32 else dtype(r)
    r = cutlass.max(a, b) if op.startswith("max") else cutlass.min(a, b)
    if nan and issubclass(dtype, cutlass.Float):  # Float64 (no max.NaN.f64): a NaN side wins
        r = cutlass.select_(b != b, dtype(b), r)
        r = cutlass.select_(a != a, dtype(a), r)
    return r


def warp_allreduce(value, op, width: int, stride: int = 1):
    """All-reduce ``value`` over each group of ``width`` consecutive lanes (``width`` a
    compile-time power of two, 1..32); every lane of a group returns the group's result.
    With ``stride`` (a power of two, ``width * stride`` <= 32) a group is the ``width``
    lanes ``stride`` apart (``l, l + stride, ...``; TVM's all-reduce over ``threadIdx.y``
    with ``threadIdx.x`` of extent ``stride``).  ``op``: one of ``OPS`` or a combiner
    function (see :func:`combine`); ``value`` may be a tuple of values that the combiner
    takes together (TVM's reducers of several values).

    PTX: log2(width) ``shfl.sync.bfly.b32`` (lane offsets (width/2, ..., 1) x stride, full
    mask, clamp 31) each followed by the combine (``add.f32``/``max.f32``/...).  Values
    under 32 bits are shuffled as 32 bits, 64-bit values as two shuffles.  All 32 lanes of
    the warp must execute it (full-mask shuffle).  ``width`` 1 returns ``value`` unchanged.
    """
    if width < 1 or width > 32 or width & (width - 1):
        raise ValueError(f"tilecute warp_allreduce: width {width} is not a power of two in 1..32")
    if stride < 1 or stride & (stride - 1) or width * stride > 32:
        raise ValueError(f"tilecute warp_allreduce: stride {stride} is not a power of two with "
                         f"width x stride <= 32 (width {width})")
    offset = width // 2
    while offset > 0:
        if isinstance(value, tuple):
            other = tuple(cute.arch.shuffle_sync_bfly(v, offset=offset * stride) for v in value)
        else:
            other = cute.arch.shuffle_sync_bfly(value, offset=offset * stride)
        value = combine(value, other, op)
        offset //= 2
    return value


@cute.jit
def gather_allreduce(value, op: cutlass.Constexpr, scratch: cute.Tensor, tid,
                     first, step: cutlass.Constexpr, count: cutlass.Constexpr,
                     threads: cutlass.Constexpr = 0, barrier_id: cutlass.Constexpr = 1,
                     dtype: cutlass.Constexpr = None):
    """All-reduce across a group whose partials are ``count`` threads ``step`` apart from
    thread ``first`` (run-time, the caller's group): every thread writes its ``value`` to
    ``scratch[tid]`` (a shared tensor of one element per thread, ``tid`` the thread's
    linear index), a barrier, every thread combines ``scratch[first + k * step]`` for ``k``
    in ``0..count`` in order and returns it, a second barrier (so the scratch can be reused
    right after); ``dtype``: the values' DSL type (a jit argument and a load through the
    signless scratch pointer come back signed: a Uint32 must compare unsigned).  The step
    of TVM's all-reduce that no shuffle can do: groups across warps,
    or not lane-aligned.  Every thread of the block (or of named barrier ``barrier_id``
    over ``threads`` threads) must call it."""
    if cutlass.const_expr(isinstance(value, tuple)):  # several values, a scratch each
        for i in cutlass.range_constexpr(len(value)):
            scratch[i][tid] = value[i]
        _sync(threads, barrier_id)
        acc = tuple(b.element_type(b[first]) for b in scratch)
        for k in cutlass.range_constexpr(1, count):
            acc = combine(acc, tuple(b.element_type(b[first + k * step]) for b in scratch), op)
        _sync(threads, barrier_id)
        return acc
    else:
        # (loads of a signless shared pointer come back signed: re-typed, so a Uint32's
        # max / min compare unsigned, as combine's docstring says)
        kind = scratch.element_type if cutlass.const_expr(dtype is None) else dtype
        scratch[tid] = kind(value)
        _sync(threads, barrier_id)
        acc = kind(scratch[first])
        if cutlass.const_expr(count <= 32):
            for k in cutlass.range_constexpr(1, count):
                acc = combine(acc, kind(scratch[first + k * step]), op)
        else:
            for k in cutlass.range(1, count):
                acc = combine(acc, kind(scratch[first + k * step]), op)
        _sync(threads, barrier_id)
        return acc


@cute.jit
def block_allreduce(vals: cute.Tensor, op: cutlass.Constexpr, scratch: cute.Tensor,
                    num_warps: cutlass.Constexpr, group_warps: cutlass.Constexpr,
                    threads: cutlass.Constexpr = 0, barrier_id: cutlass.Constexpr = 1,
                    first_warp: cutlass.Constexpr = 0, lanes: cutlass.Constexpr = 1):
    """All-reduce each of the R values of the register tensor ``vals`` (R = its static
    size) across groups of ``group_warps`` consecutive warps; the result replaces
    ``vals[r]`` in every thread of the group.  With ``lanes`` (a power of two up to 32)
    each warp holds ``lanes`` different values, lane ``l`` the one of ``l % lanes`` (the
    columns of a fragment's rows, a row ``lanes`` threads wide, all-reduced within the
    warp by lanes ``lanes`` apart): they meet separately, ``scratch`` holding ``R *
    num_warps * lanes`` elements.

    Contract: every ``vals[r]`` is already reduced within its warp (e.g. by
    :func:`warp_allreduce` with width 32); ``group_warps`` divides ``num_warps``, both
    compile-time, and the block has ``num_warps`` warps (warp = linear thread id // 32);
    ``scratch`` is a shared-memory tensor of >= R * num_warps elements of ``vals``'
    dtype, indexed linearly.  Every thread of the block must call it (it has barriers).

    Steps: lane 0 of warp w writes ``scratch[r * num_warps + w]`` (``st.shared``);
    ``bar.sync 0``; every thread combines the ``group_warps`` partials of its group
    (``ld.shared``, broadcast reads) into ``vals[r]``; ``bar.sync 0`` again, so
    ``scratch`` can be reused right after.  ``group_warps`` 1 emits nothing.  With
    ``threads`` the barriers are named barrier ``barrier_id`` (default 1) over
    ``threads`` threads: the first ones (a kernel whose producer warpgroup does not take
    part), or a thread region's, whose warps start at warp ``first_warp`` of the block
    (its ``num_warps`` warps then call it, and warp ``w`` is ``first_warp + w``).
    """
    if cutlass.const_expr(num_warps % group_warps != 0):
        raise ValueError(f"tilecute block_allreduce: group_warps {group_warps} "
                         f"does not divide num_warps {num_warps}")
    if cutlass.const_expr(group_warps > 1):
        rows = cute.size(vals)
        warp = cute.arch.warp_idx() - first_warp
        lane = cute.arch.lane_idx()
        if lane < lanes:
            for r in cutlass.range_constexpr(rows):
                scratch[(r * num_warps + warp) * lanes + lane] = vals[r]
        _sync(threads, barrier_id)
        first = 0  # first warp of this thread's group
        if cutlass.const_expr(group_warps < num_warps):
            if cutlass.const_expr(group_warps & (group_warps - 1) == 0):
                first = warp & -group_warps  # warp >= 0: a mask, not a signed division
            else:
                first = (warp // group_warps) * group_warps
        mine = 0
        if cutlass.const_expr(lanes > 1):
            mine = lane % lanes
        for r in cutlass.range_constexpr(rows):
            acc = scratch[(r * num_warps + first) * lanes + mine]
            for g in cutlass.range_constexpr(1, group_warps):
                acc = combine(acc, scratch[(r * num_warps + first + g) * lanes + mine], op)
            vals[r] = vals.element_type(acc)  # a bool went through shared memory as a byte
        _sync(threads, barrier_id)


@cute.jit
def grouped_rows(red: cute.Tensor, rows: cute.Tensor, scratch: cute.Tensor,
                 per_round: cutlass.Constexpr, group: cutlass.Constexpr, tid,
                 threads: cutlass.Constexpr = 0, barrier_id: cutlass.Constexpr = 1):
    """Rows held by lane groups (``group`` consecutive threads a row, ``per_round`` rows per
    round of the blocked layout): ``red[c]`` is this thread's group's result for row
    ``c * per_round + tid // group`` (already all-reduced within the group; a row past
    ``size(rows)``, in a last round the fragment does not fill, is nobody's).  The group's
    first lane writes it to ``scratch[row]``; after a barrier every thread reads all
    ``size(rows)`` rows into ``rows``; a second barrier lets ``scratch`` be reused.  Every
    thread of the block (or the ``threads`` of named barrier ``barrier_id``, ``tid``
    numbering them from 0) must call it."""
    if tid % group == 0:
        for c in cutlass.range_constexpr(cute.size(red)):
            row = c * per_round + tid // group
            if cutlass.const_expr((c + 1) * per_round <= cute.size(rows)):
                scratch[row] = red[c]
            elif row < cute.size(rows):
                scratch[row] = red[c]
    _sync(threads, barrier_id)
    for r in cutlass.range_constexpr(cute.size(rows)):
        # as the rows' type: a bool row went through shared memory as a byte
        rows[r] = rows.element_type(scratch[r])
    _sync(threads, barrier_id)


def _sync(threads: int, barrier_id: int = 1) -> None:
    """A barrier of the whole block, or (``threads``) named barrier ``barrier_id`` over
    ``threads`` threads (the first ones, or a warpgroup region's)."""
    if cutlass.const_expr(threads):
        cute.arch.barrier(barrier_id=barrier_id, number_of_threads=threads)
    else:
        cute.arch.sync_threads()
