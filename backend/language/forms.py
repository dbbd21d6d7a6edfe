"""The ``T.*`` statement forms: ``T.Kernel``, the loop ranges, ``T.alloc_*``, ``T.copy``,
``T.gemm``, ``T.reduce_*`` ... with TileLang's signatures.

A form is not a Python function a program calls: the parser recognises it in a
``@T.prim_func`` body and binds the call's arguments to the form's signature (so
positional and keyword spellings mean the same, and an unknown argument is an error
that names the form, the argument and the line).  The signatures below are TileLang's
(``tilelang/language/*.py``), in its positional order and with its defaults; the
keyword-only arguments after TileLang's are tilecute's own, marked in each form.
What the parser honors, and what it refuses, is in docs/ir.md ("TileLang's forms").

Also here: :data:`TILELANG_ONLY`, TileLang's forms that tilecute does not have, so
that ``T.alloc_tmem(...)`` is an error saying so rather than "has no attribute".

Imports only the values module; the parser and the ``T`` namespace import this one.
"""

from __future__ import annotations

import inspect

from .values import GemmWarpPolicy


class Form:
    """A ``T.*`` statement form: its name, TileLang's signature and where it stands
    (``with``, ``for``, ``alloc`` for ``buf = T.alloc_*(...)``, ``stmt``)."""

    def __init__(self, fn, kind: str):
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__signature__ = inspect.signature(fn)
        self.kind = kind

    @property
    def signature(self) -> inspect.Signature:
        return self.__signature__

    def __call__(self, *args, **kwargs):
        # arguments the form does not take are a TypeError naming them, wherever it is called
        # (as TileLang's Python function raises), before the error about where it stands
        from .values import signature_error

        error = signature_error(f"T.{self.__name__}", self.signature,
                                [repr(a) for a in args], kwargs)
        if error:
            raise TypeError(error)
        raise RuntimeError(
            f"T.{self.__name__} can only be used inside a @T.prim_func body "
            "(the frontend parses it; it is not a Python function)"
        )

    def __repr__(self) -> str:
        return f"<T.{self.__name__}{self.signature}>"


FORMS: dict[str, Form] = {}


def _form(kind: str, name: str = ""):
    def register(fn):
        form = Form(fn, kind)
        if name:
            form.__name__ = name
        FORMS[form.__name__] = form
        return form
    return register


# ---- kernels ----------------------------------------------------------------------------
@_form("with")
def Kernel(*blocks, threads=None, prelude=None, cluster_dims=None, cluster=None,  # noqa: N802
           producer_threads=0):
    """``with T.Kernel(gx, gy, threads=128) as (bx, by)``; ``cluster_dims`` (TileLang
    0.1.15's: blocks per cluster, as ``T.ClusterKernel``'s).  tilecute's: ``cluster``
    (blocks per cluster, as ``T.ClusterKernel``'s ``cluster_dims``) and
    ``producer_threads`` (the warp-specialization pass's producer warpgroup)."""


@_form("with")
def ClusterKernel(*blocks, cluster_dims, threads=None, prelude=None):  # noqa: N802
    """``with T.ClusterKernel(gx, gy, cluster_dims=2, threads=128) as (bx, by)``."""


@_form("with")
def ws(*warp_group_idx):
    """``with T.ws(1):``: TileLang's explicit warp-specialized region; the body runs on
    warpgroup 1 (threads 128..255) alone and its tile ops map onto those threads.  Also
    ``T.WarpSpecialize``."""


FORMS["WarpSpecialize"] = ws


@_form("with")
def sblock(name="", no_realize=False):
    """``with T.sblock("name"):`` inside a T.Kernel (TVM's block, as TileLang programs
    write it): a scope whose ``T.annotate_safe_value`` map holds for its body alone
    (nested blocks override per tensor, TileLang's lexical safe values); its ``T.reads()``
    / ``T.writes()`` regions are annotations nothing reads.  Without a map its body is
    the enclosing body's."""


@_form("stmt")
def reads(*buffer_slices):
    """TVM's block read regions, inside ``with T.sblock(...)``: no effect."""


@_form("stmt")
def writes(*buffer_slices):
    """TVM's block write regions, inside ``with T.sblock(...)``: no effect."""


# ---- loops ------------------------------------------------------------------------------
@_form("for")
def Parallel(*extents, coalesced_width=None, loop_layout=None, prefer_async=None,  # noqa: N802
             annotations=None, vector_width=0, replicated=False, async_copy=False,
             copy_instruction=""):
    """``for i, j in T.Parallel(M, N)``.  tilecute's: ``vector_width``, ``replicated``,
    ``async_copy``, ``copy_instruction`` (what the passes decided, as the printer writes
    lowered IR)."""


@_form("for")
def serial(start, stop=None, step=None, *, annotations=None):
    """``for k in T.serial(n)`` / ``T.serial(start, stop, step)``."""


@_form("for", "Serial")
def _serial_alias(start, stop=None, step=None, *, annotations=None):
    """Alias of ``T.serial``."""


@_form("for")
def unroll(start, stop=None, step=None, *, explicit=False, unroll_factor=None, annotations=None):
    """``for k in T.unroll(n)``: a serial loop unrolled completely."""


@_form("for", "Unroll")
def _unroll_alias(start, stop=None, step=None, *, explicit=False, unroll_factor=None,
                  annotations=None):
    """Alias of ``T.unroll``."""


@_form("for")
def parallel(start, stop=None, *, annotations=None):
    """``for i in T.parallel(n)``: TVM's parallel loop, which TileLang's passes treat as
    ``T.Parallel(n)`` (its iterations spread over the block's threads); ``start`` must
    be 0 when ``stop`` is given."""


@_form("for")
def vectorized(start, stop=None, *, annotations=None):
    """``for i in T.vectorized(n)``: TVM's vectorized loop, every iteration run by the
    thread that reaches it (tilecute emits it unrolled; its vectorization pass chooses
    the vector accesses)."""


@_form("for", "Vectorized")
def _vectorized_alias(start, stop=None, *, annotations=None):
    """Alias of ``T.vectorized``."""


@_form("for")
def grid(*extents, annotations=None):
    """``for i, j in T.grid(M, N)``: TVM's nest of serial loops, one per extent (each
    thread runs every iteration, as ``T.serial``)."""


@_form("for")
def Persistent(domain, wave_size, index, group_size=8, num_stages=0, *, annotations=None):  # noqa: N802
    """``for bx, by in T.Persistent([m_blocks, n_blocks], sm_num, block_id)``: the tiles of
    ``domain`` this block owns, wave by wave (tile ``w * wave_size + index`` in wave
    ``w``), the last dim walked in groups of ``group_size``; ``num_stages`` (TileLang
    0.1.15's wave-loop pipelining): 0 only."""


@_form("for")
def Pipelined(start, stop=None, num_stages=0, order=None, stage=None, annotations=None,  # noqa: N802
              *, sync=None, group=None, warp_specialize=None, overlap_mma=False):
    """``for k in T.Pipelined(n, num_stages=3)``.  ``num_stages=0`` (TileLang's default)
    is a plain serial loop.  TileLang 0.1.15's positional order (``annotations`` sixth);
    0.1.13's ``sync``, ``group`` by keyword, or positionally when the sixth argument is a
    list (:data:`LEGACY_POSITIONAL`).  tilecute's: ``warp_specialize``, ``overlap_mma``
    (what TileLang's stage/order/group say for the MMA overlap)."""


# ---- allocations (`buf = T.alloc_*(...)`) -------------------------------------------------
@_form("alloc")
def alloc_shared(shape, dtype, scope="shared.dyn", *, layout=None, stages=1):
    """A shared-memory buffer.  tilecute's: ``layout`` and ``stages`` (lowered IR)."""


@_form("alloc")
def alloc_fragment(shape, dtype, scope="local.fragment", *, layout=None):
    """A register tile spread over the block's threads.  tilecute's: ``layout``."""


@_form("alloc")
def alloc_local(shape, dtype, scope="local", *, layout=None):
    """A buffer private to each thread.  tilecute's: ``layout``."""


@_form("alloc")
def alloc_var(dtype, *args, scope="local.var", init=None):
    """A scalar variable (a one-element local buffer): ``x = T.alloc_var(T.int32)``, then
    ``x = ...``, ``x += ...`` and reads of ``x``.  ``T.alloc_var(dtype, init)``,
    ``T.alloc_var(dtype, init, scope)`` and ``T.alloc_var(dtype, scope)`` as in TileLang."""


@_form("alloc")
def alloc_global(shape, dtype, scope="global"):
    """A global-memory workspace: ``ws = T.alloc_global((B, H, 4), T.float32)``, at the top
    level of the body or inside a ``T.Kernel``.  Every call allocates it (torch, on the
    arguments' device, uninitialized) and passes it to every kernel of the function; it
    is not returned.  Dims are ints or symbols that a parameter binds."""


@_form("alloc")
def alloc_buffer(shape, dtype="float32", scope="global", annotations=None, *, data=None,
                 strides=None, elem_offset=None, align=-1, offset_factor=0,
                 buffer_type="default", axis_separators=None):
    """TVM's buffer allocation, which TileLang's ``T.alloc_*`` forms call: scope
    ``"global"`` (the default) is ``T.alloc_global`` (a workspace, at the top level or in a
    ``T.Kernel``); ``"shared"``/``"shared.dyn"``, ``"local.fragment"`` and ``"local"`` are
    ``T.alloc_shared``, ``T.alloc_fragment`` and ``T.alloc_local``.  TVM's buffer details
    (``data``, ``strides``, ``elem_offset``, ``align``, ``offset_factor``,
    ``buffer_type``, ``axis_separators``, ``annotations``) are refused.  TileLang 0.1.15's
    positional order (TVM's ``alloc_buffer(shape, dtype, scope, annotations)``; the older
    details by keyword)."""


@_form("alloc")
def alloc_barrier(arrive_count):
    """``T.alloc_barrier(128)``: one mbarrier expecting 128 arrivals per phase;
    ``T.alloc_barrier([128] * n)``: ``n`` of them."""


@_form("alloc")
def alloc_cluster_barrier(arrive_count):
    """TileLang's cluster barrier: ``T.alloc_barrier``'s mbarriers, which other blocks of
    the cluster may arrive on (``T.mbarrier_arrive(bar, cta_id)``)."""


@_form("stmt")
def cluster_sync():
    """``barrier.cluster.arrive`` then ``wait``: every thread of every block of the
    cluster (a kernel not launched in clusters is a cluster of one block)."""


@_form("stmt")
def cluster_arrive():
    """``barrier.cluster.arrive.aligned`` (release): half of :func:`cluster_sync`."""


@_form("stmt")
def cluster_arrive_relaxed():
    """``barrier.cluster.arrive.relaxed.aligned``: an arrive without memory ordering."""


@_form("stmt")
def cluster_wait():
    """``barrier.cluster.wait.aligned`` (acquire): the other half of :func:`cluster_sync`."""


@_form("alloc")
def view(src, shape=None, dtype=None, strides=None, *, layout=None):
    """``v = T.view(A_shared, (64, 128), dtype=T.int8)``: another buffer over the storage of
    ``src`` (shared, fragment, local or a global parameter), read as ``shape`` and
    ``dtype`` (``src``'s when None) in row-major order; it holds as many bits as ``src``.
    No copy: writes through either are seen through the other.  ``strides`` (TileLang
    0.1.15's): row-major ones only.  tilecute's: ``layout`` (lowered IR)."""


@_form("alloc")
def reshape(src, shape, *, layout=None):
    """``v = T.reshape(A, [N // M, M])``: ``T.view(src, shape)``, same dtype.  tilecute's:
    ``layout`` (lowered IR)."""


@_form("alloc")
def match_buffer(param, shape=None, dtype="float32", data=None, strides=None, elem_offset=None,
                 scope="global", align=-1, offset_factor=0, buffer_type="default",
                 axis_separators=None):
    """``A = T.match_buffer(a, (n, 64), T.float16)`` at the top of a prim_func body, ``a``
    a ``T.handle`` parameter: the parameter is the tensor ``A``, as if
    declared ``A: T.Tensor((n, 64), T.float16)`` (``strides=``: ``T.StridedTensor``)."""


@_form("alloc")
def decl_buffer(shape, dtype="float32", data=None, strides=None, elem_offset=None,
                scope="global", align=0, offset_factor=0, buffer_type="", axis_separators=None):
    """TVM's ``T.decl_buffer``: with ``data=buf.data`` a view of ``buf``'s storage (as
    ``T.Buffer(shape, dtype, data=buf.data)`` in a body); without ``data`` an allocation in
    ``scope``, as ``T.alloc_buffer`` (TVM lowers it to one)."""


@_form("alloc")
def make_tensor(ptr, shape, dtype="float32", strides=None):
    """``A = T.make_tensor(a_ptr, (m, k), T.float16)``: a global tensor over the memory at
    a pointer parameter (``a_ptr: T.ptr``), at the top of the body or in a ``T.Kernel``;
    ``T.make_tensor(ptrs[g], shape, dtype)``, inside a ``T.Kernel``: at the address an
    int64 expression holds (an entry of a table ``ptrs: T.Tensor([G], T.ptr)``, read where
    the statement stands).  Row-major, or with ``strides``; dims are expressions of
    constants, symbols, scalar parameters and lets.  Never copied by TMA."""


@_form("alloc")
def make_tensor_from_addr(addr, shape, dtype="float32", strides=None, storage_scope="global"):
    """``T.make_tensor`` of an int64 address (TileLang's spelling for an address that is
    not a pointer parameter); ``storage_scope`` global only."""


# ---- tile statements --------------------------------------------------------------------
@_form("stmt")
def copy(src, dst, *, coalesced_width=None, disable_tma=False, eviction_policy=None,
         prefer_instruction=None, annotations=None, loop_layout=None):
    """``T.copy(A[by * 64, k * 32], A_shared)``."""


@_form("stmt")
def async_copy(src, dst, *, coalesced_width=None, annotations=None, loop_layout=None):
    """TileLang's ``T.async_copy(A[by * 64, k * 32], A_shared)``: global -> shared memory by
    cp.async (sm_80+), this thread's copies one commit group and no wait: the program
    waits with ``T.ptx_wait_group(n)`` before it reads the tile (tilecute's barrier pass
    then puts a block barrier before another thread's read, as TileLang's sync pass puts
    one after every wait)."""


@_form("stmt")
def transpose(src, dst, annotations=None):
    """``T.transpose(A_shared, B_shared)``: ``dst[..., j, i] = src[..., i, j]``, the last
    two axes swapped (a T.Parallel loop over ``src``'s region; the value cast to ``dst``'s
    dtype)."""


@_form("stmt")
def fill(buffer, value, annotations=None):
    """``T.fill(acc, 0)``."""


@_form("stmt")
def clear(buffer, annotations=None):
    """``T.clear(acc)``: fill with zeros."""


@_form("stmt")
def gemm_sp(A_sparse, E, B, C, transpose_A=False, transpose_E=False, transpose_B=False,  # noqa: N803
            policy=GemmWarpPolicy.Square, clear_accum=False, wg_wait=0, annotations=None, *,
            k_pack=1):
    """TileLang's ``T.gemm_sp(A_sparse, E, B, C)``: ``C += A @ B`` for a 2:4 structured-sparse
    ``A`` given compressed (``A_sparse``: the two kept values of each group of four along
    K) with its metadata ``E`` (each 4-bit field of an ``E`` element, from the low bits:
    the positions of a group's two values, TileLang's natural row-major layout).
    TileLang 0.1.15's positional order (``wg_wait`` tenth; 0.1.13's ``k_pack`` before it
    by keyword, or with eleven positional arguments: :data:`LEGACY_POSITIONAL`)."""


@_form("stmt")
def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,  # noqa: N803
         clear_accum=False, mbar=None, annotations=None, *, k_pack=1, wg_wait=0):
    """``T.gemm(A_shared, B_shared, acc, transpose_B=True)``: ``C += A @ B``.  TileLang
    0.1.15's positional order (``mbar`` eighth); 0.1.13's (``k_pack`` eighth, then
    ``mbar``, ``annotations``) when the eighth positional argument is an int
    (:data:`LEGACY_POSITIONAL`).  ``wg_wait`` (the wgmma batches left in flight, from
    TileLang's earlier T.gemm) by keyword only."""


@_form("stmt")
def wgmma_gemm(A, B, C, transpose_A=False, transpose_B=False,  # noqa: N803
               policy=GemmWarpPolicy.Square, clear_accum=False, annotations=None):
    """``T.wgmma_gemm(A, B, C, ...)``: TileLang's explicit Hopper form of :func:`gemm`: it
    runs on wgmma (an error where wgmma cannot) and never waits: its batch stays in
    flight until ``T.wait_wgmma(n)``."""


@_form("stmt")
def reduce(buffer, out, reduce_type, dim, clear, batch=1, annotations=None, *, nan_propagate=False):
    """``T.reduce(x, out, "max", dim, clear)``.  TileLang 0.1.15's positional order
    (``annotations`` seventh, ``{"nan_propagate": True}`` there); 0.1.13's
    ``nan_propagate`` by keyword, or positionally when the seventh argument is a bool."""


def _reduce_kind(kind: str, abs_like: bool, nan: bool):
    """TileLang's ``T.reduce_<kind>`` signature (``reduce_abssum`` has no ``clear``,
    ``max``/``min``/``absmax`` take ``nan_propagate``).  tilecute's: ``scratch`` (the
    shared buffer of the cross-warp step, set by the layout pass), and ``clear`` as a
    keyword of ``reduce_abssum`` (lowered IR)."""
    params = [inspect.Parameter("buffer", inspect.Parameter.POSITIONAL_OR_KEYWORD),
              inspect.Parameter("out", inspect.Parameter.POSITIONAL_OR_KEYWORD),
              inspect.Parameter("dim", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=-1)]
    if not abs_like:
        params.append(inspect.Parameter("clear", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                        default=True))
    params.append(inspect.Parameter("batch", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=1))
    if nan:
        params.append(inspect.Parameter("nan_propagate", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                        default=False))
    params.append(inspect.Parameter("annotations", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                    default=None))
    if abs_like:
        params.append(inspect.Parameter("clear", inspect.Parameter.KEYWORD_ONLY, default=True))
    params.append(inspect.Parameter("scratch", inspect.Parameter.KEYWORD_ONLY, default=None))

    def fn(*args, **kwargs):
        pass
    fn.__name__ = f"reduce_{kind}"
    fn.__doc__ = f"``T.reduce_{kind}(x, out, dim=-1)``: reduce ``x`` over ``dim`` into ``out``."
    form = Form(fn, "stmt")
    form.__signature__ = inspect.Signature(params)
    FORMS[form.__name__] = form
    return form


reduce_sum = _reduce_kind("sum", False, False)
reduce_max = _reduce_kind("max", False, True)
reduce_min = _reduce_kind("min", False, True)
reduce_abssum = _reduce_kind("abssum", True, False)
reduce_absmax = _reduce_kind("absmax", False, True)
reduce_bitand = _reduce_kind("bitand", False, False)
reduce_bitor = _reduce_kind("bitor", False, False)
reduce_bitxor = _reduce_kind("bitxor", False, False)


def _sig(fn) -> inspect.Signature:
    return inspect.signature(fn)


def _legacy_gemm(A, B, C, transpose_A=False, transpose_B=False,  # noqa: N803
                 policy=GemmWarpPolicy.Square, clear_accum=False, k_pack=1, mbar=None,
                 annotations=None, *, wg_wait=0):
    pass


def _legacy_gemm_sp(A_sparse, E, B, C, transpose_A=False, transpose_E=False,  # noqa: N803
                    transpose_B=False, policy=GemmWarpPolicy.Square, clear_accum=False,
                    k_pack=1, wg_wait=0, annotations=None):
    pass


def _legacy_pipelined(start, stop=None, num_stages=0, order=None, stage=None, sync=None,
                      group=None, annotations=None, *, warp_specialize=None, overlap_mma=False):
    pass


def _legacy_reduce(buffer, out, reduce_type, dim, clear, batch=1, nan_propagate=False,
                   annotations=None):
    pass


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# TileLang 0.1.13's positional orders where 0.1.15 changed them (the forms above take
# 0.1.15's): form -> (index of the positional argument that tells them apart, whether
# its value is 0.1.13's, 0.1.13's signature).  The parser binds a call whose argument
# there passes the test to the old signature, so a program of either release means what
# it means there.
LEGACY_POSITIONAL = {
    # 0.1.13 gemm(..., clear_accum, k_pack, mbar, annotations): k_pack an int, mbar a
    # barrier or None
    "gemm": (7, _is_int, _sig(_legacy_gemm)),
    # 0.1.13 gemm_sp(..., clear_accum, k_pack, wg_wait, annotations): an eleventh
    # positional argument that is an int is 0.1.13's wg_wait (0.1.15's is annotations)
    "gemm_sp": (10, _is_int, _sig(_legacy_gemm_sp)),
    # 0.1.13 Pipelined(start, stop, num_stages, order, stage, sync, group, annotations)
    "Pipelined": (5, lambda v: isinstance(v, (list, tuple)), _sig(_legacy_pipelined)),
    # 0.1.13 reduce(..., batch, nan_propagate, annotations)
    "reduce": (6, lambda v: isinstance(v, bool), _sig(_legacy_reduce)),
}


@_form("stmt")
def atomic_add(dst, value, memory_order=None, return_prev=False, use_tma=False, annotations=None):
    """``T.atomic_add(C[i, j], v)`` or, with regions, a tile: ``T.atomic_add(C[...], acc)``."""


@_form("stmt")
def atomic_max(dst, value, memory_order=None, return_prev=False, annotations=None):
    """``T.atomic_max(Amax[0], v)``: ``dst = max(dst, value)`` atomically (or a tile, with
    regions)."""


@_form("stmt")
def atomic_min(dst, value, memory_order=None, return_prev=False, annotations=None):
    """``T.atomic_min(Amin[0], v)``: ``dst = min(dst, value)`` atomically (or a tile)."""


@_form("stmt")
def atomic_store(dst, src, memory_order="seq_cst"):
    """``T.atomic_store(flag[i], v, memory_order="release")``: ``dst = src`` atomically at
    device scope (one element of a global tensor or a shared buffer; orders relaxed,
    release, seq_cst)."""


@_form("stmt")
def atomic_or(dst, value, memory_order=None):
    """``T.atomic_or(mask[i], bits)``: ``dst |= value`` atomically at device scope (one
    32- or 64-bit integer element of a global tensor or a shared buffer; any of the six
    memory orders, None:
    relaxed)."""


@_form("stmt")
def dp4a(A, B, C):
    """``T.dp4a(a[k], b[k], acc[0])``: ``acc[0] += a[k] * b[k] + ... + a[k + 3] * b[k + 3]``
    (the 4 int8 elements from each of ``A`` and ``B`` in memory order, into the int32
    element ``C``; CUDA's ``__dp4a``, TileLang's ``DP4A``)."""


@_form("stmt")
def atomic_addx2(dst, value, return_prev=False):
    """``T.atomic_addx2(dQ[b, i, h, j], acc_s[i, j])``: add the 2 elements from ``value``
    on to the 2 from ``dst`` (contiguous along the last dim), each atomically (lowered
    to 2 scalar atomic adds: the same sums as TileLang's vector red)."""


@_form("stmt")
def atomic_addx4(dst, value, return_prev=False):
    """``T.atomic_addx4(dst[..., j * 4], src[..., j * 4])``: as ``T.atomic_addx2``, 4
    elements."""


def _wide_store(bits: int, space: str):
    name = f"{'stg' if space == 'global' else 'sts'}{bits}"

    def store(dst, value, pred=None):
        pass

    store.__name__ = name
    store.__doc__ = (f"``T.{name}(dst, value{', pred=None' if space == 'global' else ''})``: "
                     f"store the {bits} bits of ``value`` (TileLang's uint32 words, or any "
                     f"{bits}-bit expression) to {space} memory at ``dst`` (an element or a "
                     "region of a buffer), as its elements; with ``pred`` false nothing is "
                     "written.")
    if space == "shared":
        def store(dst, value):  # noqa: F811 (TileLang's T.sts* take no predicate)
            pass
        store.__name__ = name
    return _form("stmt", name)(store)


stg32, stg64, stg128, stg256 = (_wide_store(b, "global") for b in (32, 64, 128, 256))
sts32, sts64, sts128 = (_wide_store(b, "shared") for b in (32, 64, 128))


@_form("stmt")
def loop_break():
    """``T.loop_break()``: leave the innermost enclosing serial loop (``T.serial``,
    ``T.unroll``, ``range``, ``T.grid``'s innermost, ``while``) now."""


@_form("stmt")
def thread_return(span=None):
    """``T.thread_return()`` (TVM's builtin, as TileLang programs write it): the thread
    runs no more of the kernel.  Honored as the last statement of an ``if`` branch in the
    ``T.Kernel`` body (``if i >= n: T.thread_return()``): the statements after the ``if``
    run in its other branch (TileLang's CuTe DSL backend lowers it so); inside a
    per-thread loop (T.serial, T.unroll, range, while; TileLang's CUDA ``return;``) it sets
    a per-thread ``returned`` flag that guards the rest of the loop, its later iterations
    and what follows it.  ``span`` is TVM's source span, nothing to honor."""


@_form("stmt", "print")
def _print(obj=None, msg="", warp_group_id=0, warp_id=0, *, buffer=None, index=None):
    """``T.print(x, msg="")``: TileLang's device print of a value (by every thread that
    runs it), a buffer (its elements, by thread ``warp_group_id * 128 + warp_id * 32``
    for shared and fragment buffers, by every thread for local and global ones) or, with
    no ``obj``, the message alone.  tilecute's: ``buffer`` and ``index`` (one printed
    buffer element, as the printer writes lowered IR)."""


@_form("stmt")
def device_assert(condition, msg="", no_stack_info=False):
    """``T.device_assert(cond, msg)``: a thread for which ``cond`` is false prints
    ``Device assert failed: <msg>`` (with the source line unless ``no_stack_info``)
    and traps."""


@_form("stmt")
def assume(cond):
    """TileLang's ``T.assume(cond)``: a fact the compiler may take as true.  A parse-time
    false one is an error; ``T.assume(N % k == 0)`` on a ``T.dynamic`` symbol makes the
    symbol promise the divisor (``multiple_of``: the launcher checks it at every call, as
    TileLang checks a host-evaluable assume, and the vectorizer may use it); any other
    condition changes no code (tilecute emits no bounds checks for it to remove)."""


@_form("stmt")
def evaluate(value):
    """``T.evaluate(expr)``: compute ``expr`` for its effect."""


@_form("stmt")
def sync_threads(barrier_id=None, arrive_count=None, *, wait_async=False):
    """A block-wide barrier.  tilecute's: ``wait_async`` (first wait for this thread's
    cp.async copies; the barrier pass sets it)."""


@_form("stmt")
def named_barrier_arrive(barrier_id, thread_count):
    """TileLang's one-sided arrive on a named barrier (``bar.arrive barrier_id,
    thread_count``): the calling threads count toward the ``thread_count`` that a
    ``T.sync_threads(barrier_id, thread_count)`` elsewhere waits for, and go on at once."""


@_form("stmt")
def tvm_storage_sync(storage_scope):
    """TVM's ``T.tvm_storage_sync(storage_scope)`` (a statement): ``"shared"`` /
    ``"shared.dyn"`` the block's barrier (``__syncthreads()``, as TileLang's CUDA codegen
    prints it); ``"warp"`` nothing (TileLang's codegen prints nothing)."""


@_form("stmt")
def sync_warp(mask=None):
    """``__syncwarp(mask)``: the warp's lanes in ``mask`` (all 32 by default) wait for each
    other; their shared-memory writes before it are visible to them after it."""


@_form("stmt")
def copy_cluster(src, dst, *, dst_block=None, cluster_mask=None, remote_barrier=None,
                 eviction_policy=None, coalesced_width=None, annotations=None, loop_layout=None):
    """TileLang's cluster copy: a multicast load (``cluster_mask``) or a copy into another
    block's shared memory (``dst_block``, ``remote_barrier``)."""


@_form("stmt")
def tma_copy(src, dst, *, barrier=None, cluster_mask=None, leader_scope_threads=None,
             eviction_policy=None, annotations=None, stage=None, arrive=False, required=False):
    """A TMA copy with explicit synchronization: a load adds its bytes to ``barrier``'s
    expected transactions and the program's threads arrive (``T.mbarrier_arrive``), as in
    TileLang.  tilecute's: ``stage`` (the stage of a multi-buffered shared buffer),
    ``arrive=True`` (the issuing thread also arrives once: the passes' loads),
    ``required=True`` (a T.copy(..., prefer_instruction="tma") the TMA pass made a load)."""


@_form("stmt")
def tma_store_arrive():
    """The thread that issues the block's TMA stores commits its stores not yet committed
    as one group (``cp.async.bulk.commit_group``); tilecute's TMA stores commit their own
    groups, so this one is empty.  sm_90+."""


@_form("stmt")
def tma_store_wait(count=0, read=True):
    """The thread that issues the block's TMA stores waits until at most ``count`` of its
    store groups are pending: their reads of shared memory (``read=True``, TileLang's
    default: ``cp.async.bulk.wait_group.read``) or also their writes to global memory
    (``read=False``: ``cp.async.bulk.wait_group``).  sm_90+."""


@_form("stmt")
def mbarrier_arrive(mbarrier, cta_id=None):
    """Arrive once on an mbarrier."""


@_form("stmt")
def mbarrier_wait_parity(mbarrier, parity):
    """Wait until the mbarrier's phase with this parity has completed."""


@_form("stmt")
def barrier_arrive(mbarrier):
    """TileLang's name of :func:`mbarrier_arrive` (an mbarrier element from
    ``T.alloc_barrier``)."""


@_form("stmt")
def barrier_wait(mbarrier, parity):
    """TileLang's name of :func:`mbarrier_wait_parity`."""


@_form("stmt")
def wait_wgmma(id):  # noqa: A002  (TileLang's name)
    """Wait until at most ``id`` of this warpgroup's wgmma batches are in flight (after a
    ``T.gemm(..., wg_wait=1)``)."""


@_form("stmt")
def warpgroup_wait(num_mma):
    """TileLang's other name of :func:`wait_wgmma`."""


@_form("stmt")
def use_swizzle(panel_size, order="row", enable=True):
    """Walk the grid in panels (blocks running together share tiles in L2)."""


@_form("stmt")
def set_max_nreg(reg_count, is_inc):
    """``setmaxnreg``: the warpgroup's register budget per thread (sm_90a)."""


@_form("stmt")
def inc_max_nreg(reg_count):
    """``T.set_max_nreg(reg_count, 1)``: raise the warpgroup's register budget."""


@_form("stmt")
def dec_max_nreg(reg_count):
    """``T.set_max_nreg(reg_count, 0)``: lower the warpgroup's register budget."""


# ---- scans, reducers, im2col (issue 17's corpus) -----------------------------------------
@_form("stmt")
def cumsum(src, dst=None, dim=0, reverse=False, annotations=None):
    """``T.cumsum(x, dim=1, reverse=False)``: the inclusive running sum of ``x`` along
    ``dim`` into ``dst`` (``x`` itself when omitted); shared or fragment buffers."""


@_form("stmt")
def cummax(src, dst=None, dim=0, reverse=False, annotations=None):
    """``T.cummax(x, dim=1)``: the running maximum, as ``T.cumsum``."""


@_form("alloc")
def alloc_reducer(shape, dtype, op="sum", replication=None, *, layout=None):
    """``r = T.alloc_reducer(M, "float32", replication="all")``: TileLang's (legacy)
    reducer: each thread holds its own copy of every element; T.Parallel loops combine
    contributions into it (``r[i] += x``); ``T.finalize_reducer(r)`` combines the copies.
    tilecute's: ``layout`` (lowered IR)."""


@_form("stmt")
def finalize_reducer(reducer, dst=None, batch=1, annotations=None, *, scratch=None):
    """``T.finalize_reducer(r)``: every thread's copy of ``r`` becomes the combination of
    all of them; ``T.finalize_reducer(acc, dst)``: a reducer epoch's logical result (its
    ``T.reducer_init`` value combined once) written into the fragment ``dst``.
    tilecute's: ``scratch`` (set by the layout pass)."""


@_form("stmt")
def reducer_init(reducer, init=None):
    """``T.reducer_init(acc)`` / ``T.reducer_init(acc, v)``: open the epoch of a reducer from
    ``T.alloc_reducer`` without ``replication``: partials start from the combine identity;
    ``v`` (captured here) is combined once per output at ``T.finalize_reducer``."""


@_form("stmt")
def reducer_update(target, value):
    """``T.reducer_update(acc[i], v)`` inside a ``T.Parallel`` loop: each logical iteration
    contributes ``v`` to output ``i`` exactly once."""


@_form("stmt")
def im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None,
           annotations=None):
    """``T.im2col(data, data_shared, by, k_iter, KH, S, D, P)``: gather an im2col tile of
    an NHWC image (zero padding)."""


@_form("stmt", "c2d_im2col")
def _c2d_im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad, eviction_policy=None,
                annotations=None):
    """TileLang's older name of ``T.im2col``."""


# ---- annotations -------------------------------------------------------------------------
@_form("stmt")
def annotate_layout(layout_map):
    """``T.annotate_layout({A_shared: make_swizzled_layout(A_shared), ...})``: the layout
    of each shared buffer, from ``tilecute.layout``'s constructors (TileLang's
    ``tilelang.layout``); see docs/tile-ops.md."""


@_form("stmt")
def annotate_producer_reg_dealloc(reg_count=24):
    """In a warp-specialized kernel, the producer warpgroup lowers its register budget to
    ``reg_count`` per thread (``setmaxnreg.dec``); TileLang's default 24."""


@_form("stmt")
def annotate_consumer_reg_alloc(reg_count=240):
    """In a warp-specialized kernel, the compute warpgroups raise their register budget to
    ``reg_count`` per thread (``setmaxnreg.inc``); TileLang's default 240."""


@_form("stmt")
def no_set_max_nreg():
    """A warp-specialized kernel's roles keep the launch's register budget (no
    ``setmaxnreg``)."""


@_form("stmt")
def disable_warp_group_reg_alloc():
    """TileLang's other name of ``T.no_set_max_nreg()``."""


@_form("stmt")
def let(v, value, body=None):
    """TVM's ``T.let(x, value)`` after ``x = T.int32()``: from here on ``x`` names
    ``value`` (a ``Let``; TileLang's alias idiom ``off = T.int32(); T.let(off, ko * 32)``).
    ``body`` (TVM's deprecated Let expression) is refused by name."""


@_form("stmt")
def pdl_sync():
    """TileLang's ``T.pdl_sync()``: wait until the previous kernel on the stream has
    finished and its memory is visible (``griddepcontrol.wait``); the kernel launches with
    Programmatic Dependent Launch (sm_90+; a no-op on older targets, where kernels on a
    stream never overlap)."""


@_form("stmt")
def fence_proxy_async():
    """TileLang's ``T.fence_proxy_async()``: this thread's earlier shared-memory writes
    become visible to the async proxy (wgmma reading operands, TMA) before its later async
    operations (``fence.proxy.async.shared::cta``, sm_90+); what a program that hands a
    tile written by threads to another warpgroup's wgmma issues itself."""


@_form("stmt")
def ptx_cp_async(dst_access_ptr, src_access_ptr, num_elems, predicate=None):
    """TileLang's ``T.ptx_cp_async(T.access_ptr(S[i, j], "w", n), T.access_ptr(G[...], "r",
    n), n)``: this thread starts one ``cp.async`` of ``n`` contiguous elements (4, 8 or 16
    bytes) from global ``G`` to shared ``S``; the program waits for it itself
    (``T.cp_async_barrier_noinc``)."""


@_form("stmt")
def ptx_commit_group():
    """TileLang's ``T.ptx_commit_group()``: this thread's ``cp.async`` copies issued since its
    last commit form one group (``cp.async.commit_group``), which ``T.ptx_wait_group``
    counts (sm_80+)."""


@_form("stmt")
def ptx_wait_group(num):
    """TileLang's ``T.ptx_wait_group(n)``: this thread waits until at most ``n`` (an int
    known at parse time) of its most recent ``cp.async`` groups are pending
    (``cp.async.wait_group n``); the threads that share what the copies wrote meet at a
    barrier after it (TileLang's sync pass puts one after every wait_group; tilecute's
    barrier pass one before a read of another thread's copies)."""


@_form("stmt")
def cp_async_barrier_noinc(barrier):
    """TileLang's ``T.cp_async_barrier_noinc(bar)``: an arrive on mbarrier ``bar`` once this
    thread's earlier ``cp.async`` copies are done, counted against its expected arrivals
    (``cp.async.mbarrier.arrive.noinc.shared::cta.b64``, sm_90+ in CuTe DSL)."""


@_form("stmt")
def pdl_trigger():
    """TileLang's ``T.pdl_trigger()``: the next kernel on the stream may start launching
    (``griddepcontrol.launch_dependents``); its ``T.pdl_sync()`` still waits for this
    one.  Programmatic Dependent Launch as ``T.pdl_sync``."""


@_form("stmt")
def sync_grid():
    """TileLang's ``T.sync_grid()``: every block of the grid waits here until all have
    arrived, and sees their global memory writes after (cooperative groups'
    ``grid.sync()``).  The kernel launches cooperatively: every block resident at once,
    or the launch fails with an error saying how many blocks fit."""


@_form("stmt")
def rng_init(seed, seq=None, off=0, generator="curandStatePhilox4_32_10_t"):
    """TileLang's ``T.rng_init(seed, seq, off)``: (re)start this thread's random number
    generator, Philox4x32-10 keyed by ``seed`` at subsequence ``seq`` (default: the
    thread's global index ``threadIdx.x + blockIdx.x * blockDim.x``) and offset ``off``
    draws, with cuRAND's seeding (``curand_init``).  ``T.rng_rand()`` and
    ``T.rng_rand_float()`` draw from it.  ``generator`` names cuRAND's state type: only
    ``"curandStatePhilox4_32_10_t"`` is implemented (MRG32k3a and XORWOW are refused by
    name)."""


@_form("stmt")
def annotate_safe_value(safe_value_map):
    """``T.annotate_safe_value({A: -1})``: an out-of-bounds read of global tensor ``A``
    anywhere in the kernel (the bounds-checked loads, a ragged ``T.copy``'s missing
    elements, an atomic with a result) gives ``-1`` instead of 0, cast to the load's dtype
    (a copy's, to its destination's); TileLang's ``safe_value_map`` on the kernel's block.
    A copy from ``A`` is never a TMA load (TMA fills with zeros)."""


@_form("stmt")
def annotate_l2_hit_ratio(l2_hit_ratio_map):
    """``T.annotate_l2_hit_ratio({A: 0.8})``: the function's kernels launch with an L2
    access policy window over global tensor ``A`` (its first ``min(bytes, the device's
    persisting-L2 maximum)`` bytes; hits persisting at ratio 0.8, misses streaming), the
    context's persisting-L2 limit raised to the window's bytes for the launches and
    restored after, as TileLang's host code does around the call."""


@_form("stmt")
def annotate_restrict_buffers(*buffers):
    """``T.annotate_restrict_buffers(x, y)``: buffers that may alias (TileLang then drops
    ``__restrict__`` from those parameters); tilecute's kernels never assume parameters
    free of aliases, so it is honored as it stands."""


@_form("stmt")
def annotate_min_blocks_per_sm(n):
    """``T.annotate_min_blocks_per_sm(2)``: the kernel is compiled for at least ``n``
    resident blocks per SM (CUDA's ``__launch_bounds__(threads, n)``)."""


# ---- TVM's thread all-reduce (TileLang's GEMV examples) ------------------------------------
@_form("with")
def attr(node, attr_key, value):
    """TVM's attribute statement, ``with T.attr(node, attr_key, value):`` (or written as a
    statement, TVMScript's frame: it then covers the rest of its block).  tilecute honors
    the one TileLang programs write: ``attr_key="reduce_scope"`` with ``node`` a
    ``T.comm_reducer(...)``, the combiner of the ``T.tvm_thread_allreduce`` calls in its
    body (``value``, TVM's ``T.reinterpret(T.uint64(0), dtype="handle")``, is not read by
    TVM's lowering, nor by tilecute's); any other key is refused by name."""


@_form("expr")
def comm_reducer(combiner, identity):
    """TVM's ``T.comm_reducer(lambda x, y: x + y, [T.float32(0)])``: a commutative
    reducer (``combiner`` takes n left and n right values and returns n; ``identity``, n
    identity values, gives the variables' dtypes: an int is int32).  Only as the node of
    ``T.attr(..., "reduce_scope", ...)``."""


@_form("stmt")
def tvm_thread_allreduce(*args, dtype="handle", scratch=None):
    """TVM's ``T.tvm_thread_allreduce(T.uint32(n), v_1..v_n, cond, r_1[0]..r_n[0],
    *thread_vars, dtype="handle")`` (written inside ``T.evaluate``) under a
    ``T.attr(T.comm_reducer(...), "reduce_scope", ...)``: every thread of the block takes
    part; the threads that differ only in the listed thread indices (``threadIdx.x/y/z``)
    form a group, and each gets its group's values combined by the reducer (where
    ``cond`` is false a thread contributes the identity) in element 0 of the local
    buffers ``r_1..r_n``.  tilecute's: ``scratch`` (set by the layout pass)."""


# ---- TileLang forms tilecute does not have ------------------------------------------------
class IfFrame:
    """TVMScript's if frames ``T.If(cond)``, ``T.Then()``, ``T.Else()``: ``with T.If(c),
    T.Then(): ...`` and ``with T.If(c):`` holding ``with T.Then(): ...`` and an optional
    ``with T.Else(): ...`` are ``if c: ... else: ...``; the parser rewrites them so, and
    refuses any other arrangement at its line."""

    def __init__(self, name: str):
        self.__name__ = name

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"T.{self.__name__} can only be used as `with T.{self.__name__}(...)` "
                           "inside a @T.prim_func body")

    def __repr__(self) -> str:
        return f"<T.{self.__name__}: TVMScript's if frame>"


If, Then, Else = IfFrame("If"), IfFrame("Then"), IfFrame("Else")
# TVMScript's while frame: `with T.While(cond): body` is `while cond: body` (the parser
# rewrites it so)
While = IfFrame("While")


class Unsupported:
    """``T.<name>`` for a TileLang form tilecute does not have: using it in a prim_func is
    an error that says so (the parser raises it at the line); calling it outside is too."""

    def __init__(self, name: str):
        self.__name__ = name

    def message(self) -> str:
        reason = _UNSUPPORTED_WHY.get(self.__name__)
        return (f"T.{self.__name__} is a TileLang form that tilecute does not support "
                + (f"({reason})" if reason else "(see docs/ir.md, \"TileLang's forms\")"))

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(self.message())

    def __repr__(self) -> str:
        return f"<T.{self.__name__}: not supported by tilecute>"


# Why, where docs/ir.md's list alone would leave the user guessing.
_UNSUPPORTED_WHY = {
    "empty": "here: T.empty declares an output at the top level of a @T.prim_func or eager "
    "body, `B = T.empty(shape, dtype)`, which the body then returns",
    "annotate_pass_configs": "here: it stands at the top level of a @T.prim_func or eager body",
    "annotate_compile_flags": "here: it stands at the top level of a @T.prim_func or eager body",
    **{name: "TVM's fixed-point multiply legalizes through int64 shifts, with a special case for "
       "a multiplier of 1 << 30 that ignores q; tilecute does not carry it: write the int64 "
       "arithmetic, e.g. T.Cast(\"int32\", (T.Cast(\"int64\", x) * y + (1 << (q - 1))) >> q)"
       for name in ("q_multiply_shift", "q_multiply_shift_per_axis")},
    **{name: "TileLang's let-frame lookups for Python code run while its builder runs; "
       "tilecute's parser binds names itself: use the name" for name in ("has_let_value",
                                                                         "get_let_value")},
    "KernelLaunchFrame": "it is the object `with T.Kernel(...)` enters in TileLang's builder; "
    "tilecute parses T.Kernel (T.get_thread_binding(), T.get_block_extent() ... read it)",
    "BaseTileScheduler": "tilecute's tile scheduler is T.PersistentTileScheduler; a subclass of "
    "TileLang's base class is not read",
    "const": "here: T.const declares the dims of a @tilecute.jit eager kernel, `M, N = "
    "T.const(\"M, N\")` at the top of its body (TileLang raises outside one); a @T.prim_func "
    "declares them with T.dynamic or `n = T.int32()`",
}

TILELANG_ONLY = frozenset("""
    alloc_tmem alloc_descriptor empty allocate
    tma_gather4 tma_scatter4 tma_load tma_load_2sm
    tcgen05_gemm
    access_ptr
    mbarrier_arrive_expect_tx mbarrier_expect_tx
    sync_global
    annotate_ws_schedule ws_op
    create_tma_descriptor import_source inline
    meta_class call_extern call_intrin
    annotate_pass_configs annotate_compile_flags func_attr CUDASourceCodeKernel
    has_let_value get_let_value KernelLaunchFrame BaseTileScheduler
    gemm_blockscaled annotate_ws_pipeline_depth PartialFragment ptx_fence_barrier_init
    block_name_suffix_context sblock_alloc_buffer bind get_active_lane_mask call_kernel
    handle_add_byte_offset continue_loop break_loop
""".split()) | frozenset("""
    Add Any AnyDType Assert BufferLoad Call CallEffectKind CommReducer Div
    FloatImm FloorDiv FloorMod IntImm IterVar JITFunc Let LetStmt Max Min
    Mod Mul PrimFunc ProducerLoad Ptr Range Reduce SizeVar
    SparseTensorCoreIntrinEmitter StringImm Sub TCGEN05DescriptorParams
    TCGEN05TensorCoreIntrinEmitter TVMBackendAllocWorkspace TVMBackendFreeWorkspace
    TensorCoreIntrinEmitter TensorCoreIntrinEmitterSM120
    TensorCoreIntrinEmitterWithLadderTransform WGMMADescriptorParams
    WGMMATensorCoreIntrinEmitter WGSparseTensorCoreIntrinEmitter WSID WSInstr WSOpRef
    WSPipeline WSRole WSSchedule WSScope WSSync WSSyncKind WarpSpecializeFrame
    address_of alloc_tcgen05_instr_desc
    alloc_tcgen05_instruction_desc alloc_tcgen05_smem_desc alloc_wgmma_desc
    allocate_const anylist_getitem anylist_resetitem anylist_setitem_call_cpacked
    anylist_setitem_call_packed arg axis block block_attr
    broadcast buffer_store buffer_var
    call_cpacked call_cpacked_lowered call_llvm_intrin call_llvm_pure_intrin call_packed
    call_packed_lowered call_pure_extern clc_get_first_ctaid_x clc_get_first_ctaid_y
    clc_get_first_ctaid_z clc_is_canceled clc_try_cancel clc_try_cancel_multicast
    compute_gmma_descriptor compute_umma_descriptor const
    create_barriers end_profile_intrinsic env_thread
    func_name func_ret get_ldmatrix_offset
    get_mma_micro_size get_swizzle_layout get_tvm_dtype
    index_map init
    initialize_tcgen05_descriptor initialize_wgmma_descriptor is_f8f6f4_family is_float4
    is_float4_e2m1_unpacked is_float4_e2m1fn isnullptr iter_var
    llvm_lookup_intrinsic_id lookup_param make_blockscaled_gemm_layout
    make_mma_swizzle_layout mma_fill mma_gemm_blockscaled mma_store
    mma_store_index_map prefetch ptx_arrive_barrier
    ptx_arrive_barrier_expect_tx ptx_cp_async_barrier
    ptx_cp_async_bulk ptx_init_barrier_thread_count ptx_ldmatrix ptx_mma
    ptx_mma_block_scale ptx_mma_sp ptx_tcgen05_mma_blockscaled_ss ptx_tcgen05_mma_ss
    ptx_tcgen05_mma_ts ptx_wait_barrier ptx_wgmma_rs ptx_wgmma_sp_rs
    ptx_wgmma_sp_ss ptx_wgmma_ss q_multiply_shift q_multiply_shift_per_axis ramp
    realize ret start_profile_intrinsic target tcgen05_after_thread_sync
    tcgen05_before_thread_sync tcgen05_cp_warpx4 tcgen05_gemm_blockscaled
    tcgen05_gemm_sp tcgen05_mma tcgen05_mma_arrive tcgen05_mma_blockscaled
    tcgen05_sf_warp_transpose tvm_access_ptr tvm_bmma_sync tvm_call_cpacked
    tvm_call_cpacked_lowered tvm_call_packed tvm_call_packed_lowered tvm_fill_fragment
    tvm_load_matrix_sync tvm_mfma tvm_mfma_store tvm_mma_sync tvm_rdna_wmma
    tvm_rdna_wmma_store tvm_stack_alloca tvm_stack_make_array tvm_stack_make_shape
    tvm_store_matrix_sync tvm_struct_get tvm_struct_set
    tvm_thread_invariant tvm_throw_last_error tvm_tuple
    type_annotation undef validate_gemm_ab_dtypes vectorcombine vectorhigh vectorlow
    void vscale warpgroup_arrive warpgroup_commit_batch warpgroup_fence_operand
    wgmma_gemm_sp wgmma_mma where 
    deallocate_tmem increase_descriptor_offset
    ptx_arrive_cluster_barrier ptx_mma_sm70 tma_gather4_bytes
    sblock_attr
""".split())  # the rest of TileLang's language namespace (tilelang.language's __all__ and
# its CUDA dialect's, TVM's TIR re-exports among them) that tilecute does not serve: each
# is refused by name when used, never "has no attribute"
