"""The ``T.*`` frontend: TileLang's surface over tilecute's IR.

    import tilecute.language as T

    @T.prim_func
    def add(A: T.Tensor((N,), "float16"), B: T.Tensor((N,), "float16"), C: T.Tensor((N,), "float16")):
        with T.Kernel(T.ceildiv(N, 256), threads=128) as bx:
            for i in T.Parallel(256):
                C[bx * 256 + i] = A[bx * 256 + i] + B[bx * 256 + i]

``@T.prim_func`` parses the function's AST (native ``if``/``for``/``with``; closure
values evaluated at parse time) into a ``tilecute.ir.PrimFunc``.  This module is only
the namespace; what is in it comes from

- ``values``: dtypes (``T.float16`` ...), parameter annotations (``T.Tensor``),
  ``T.dynamic``, ``T.GemmWarpPolicy``, ``T.Layout``, ``T.Fragment``;
- ``ops``: expression helpers (``T.exp2``, ``T.max``, ``T.if_then_else``, ``T.cast``,
  ``T.infinity`` ...), which build IR expressions;
- ``forms``: the statement forms (``T.Kernel``, ``T.Parallel``, ``T.alloc_*``,
  ``T.copy``, ``T.gemm`` ...) with TileLang's signatures, which the parser recognises
  and which raise when called outside a ``@T.prim_func`` body;
- ``parser``: ``prim_func``, ``from_script`` and ``FrontendError``.

A TileLang form that tilecute lacks (``T.alloc_tmem`` ...) is an attribute too, so
that using one is an error saying so at its line.
"""

from __future__ import annotations

import sys
from typing import Optional

from .forms import FORMS, TILELANG_ONLY, Unsupported
from .forms import (  # noqa: F401
    Kernel, ClusterKernel, Parallel, serial, unroll, vectorized, Persistent, Pipelined, alloc_shared, alloc_fragment,
    alloc_local, alloc_var, alloc_barrier, copy, fill, clear, gemm, gemm_sp, reduce, reduce_sum,
    reduce_max, reduce_min, reduce_abssum, reduce_absmax, reduce_bitand, reduce_bitor,
    reduce_bitxor, atomic_add, atomic_max, atomic_min, evaluate, sync_threads, tma_copy, mbarrier_arrive,
    mbarrier_wait_parity, use_swizzle, set_max_nreg, wait_wgmma, warpgroup_wait, barrier_arrive,
    barrier_wait,
)
from .forms import alloc_buffer, alloc_global, alloc_reducer, cummax, cumsum, finalize_reducer, im2col, transpose  # noqa: F401
from .forms import reducer_init, reducer_update  # noqa: F401
from .forms import reads, sblock, writes  # noqa: F401  (TVM's block, TileLang's safe-value scopes)
from .forms import dec_max_nreg, grid, inc_max_nreg, named_barrier_arrive, sync_warp, tvm_storage_sync  # noqa: F401
from .forms import alloc_cluster_barrier, cluster_arrive, cluster_arrive_relaxed, cluster_sync, cluster_wait  # noqa: F401
from .forms import annotate_l2_hit_ratio, annotate_restrict_buffers  # noqa: F401
from .forms import annotate_layout, annotate_min_blocks_per_sm, annotate_safe_value, pdl_sync, pdl_trigger  # noqa: F401
from .forms import let, rng_init, sync_grid  # noqa: F401
from .forms import attr, comm_reducer, tvm_thread_allreduce  # noqa: F401
from .forms import fence_proxy_async, wgmma_gemm  # noqa: F401
from .forms import tma_store_arrive, tma_store_wait  # noqa: F401
from .forms import cp_async_barrier_noinc, ptx_cp_async  # noqa: F401
from .forms import async_copy, copy_cluster, ptx_commit_group, ptx_wait_group  # noqa: F401
from .forms import assume, atomic_addx2, atomic_addx4, device_assert, loop_break, thread_return  # noqa: F401
from .forms import atomic_or, atomic_store, dp4a  # noqa: F401
from .forms import make_tensor, make_tensor_from_addr, reshape, view  # noqa: F401
from .forms import decl_buffer, match_buffer  # noqa: F401
from .forms import stg32, stg64, stg128, stg256, sts32, sts64, sts128  # noqa: F401
from .forms import parallel  # noqa: F401
from .forms import If, Then, Else, While  # noqa: F401  (TVMScript's if / while frames; the parser rewrites them)
from .ops import ldg32, ldg64, ldg128, ldg256, lds32, lds64, lds128, __ldg  # noqa: F401
from .ops import __exp, __exp10, __log, __log2, __log10, __sin, __cos, __tan  # noqa: F401
from .ops import (  # noqa: F401
    asinh, acosh, atanh, copysign, hypot, nextafter, ldexp, nearbyint, fabs, ieee_add, ieee_sub,
    ieee_mul, ieee_fmaf, ieee_fdiv, ieee_frcp, ieee_fsqrt, ieee_frsqrt, fast_rcp, __ffs, __fns,
    match_any_sync, match_all_sync, tvm_warp_activemask, block_rank_in_cluster,
)
from .forms import (annotate_consumer_reg_alloc, annotate_producer_reg_dealloc,  # noqa: F401
                    disable_warp_group_reg_alloc, no_set_max_nreg)
from .ops import EXPRESSION_HELPERS
from .ops import (  # noqa: F401  (TileLang 0.1.15's)
    fmul, get_cluster_dims, get_cluster_extent, get_cluster_extents, get_cluster_id,
    get_cluster_ids, get_cluster_size, ignore_loop_partition,
)
from .ops import atomic_load, index_to_coordinates  # noqa: F401
from .ops import (  # noqa: F401
    ceildiv, cdiv, align_up, exp, exp2, log, log2, sqrt, rsqrt, tanh, sin, cos, floor, ceil, sigmoid,
    abs, max, min, clamp, fma, floordiv, floormod, bitwise_and, bitwise_or, bitwise_xor,
    bitwise_not, shift_left, shift_right, Cast, cast, if_then_else, Select, infinity,
    max_value, min_value, get_thread_binding,
)
from .ops import shfl_down, shfl_sync, shfl_up, shfl_xor  # noqa: F401
from .ops import tvm_warp_shuffle, tvm_warp_shuffle_down, tvm_warp_shuffle_up  # noqa: F401
from .ops import (  # noqa: F401
    activemask, all_sync, any_sync, ballot, ballot_sync, shuffle_elect, syncthreads_and,
    syncthreads_count, syncthreads_or,
)
from .ops import Broadcast, Ramp, Shuffle, extract_lane  # noqa: F401  (TVM's vector forms: lanes.py)
from .ops import add2, sub2, mul2, fma2, max2, min2, abs2  # noqa: F401
from .ops import And, Or, Not, EQ, NE, LT, LE, GT, GE  # noqa: F401  (TVM's node constructors)
from .ops import rng_rand, rng_rand_float  # noqa: F401
from .values import Var  # noqa: F401  (TVM's T.Var: isinstance of what T.dynamic makes; TVM's constructor)
from .ops import (  # noqa: F401
    warp_reduce_bitand, warp_reduce_bitor, warp_reduce_max, warp_reduce_min, warp_reduce_sum,
)
from .ops import (  # noqa: F401
    tan, atan, acos, asin, sinh, cosh, erf, log10, log1p, exp10, pow, fmod, atan2, round,
    trunc, isnan, isinf, isfinite, truncdiv, truncmod, popcount, clz, likely,
    get_lane_idx, get_warp_idx, get_warp_idx_sync, get_warp_group_idx,
    get_thread_bindings, get_block_binding, get_block_bindings, get_thread_extent,
    get_thread_extents, get_block_extent, get_block_extents, reinterpret, any_of, all_of, thread_binding,
    launch_thread,
)
from .parser import FrontendError, parse_script, prim_func
from .tile_schedule import PersistentTileScheduler  # noqa: F401
from .values import DTYPE_NAMES, DType, GemmWarpPolicy, Layout, TensorSpec, dtype_name  # noqa: F401
from .custom_layouts import Fragment  # noqa: F401
from .values import UnsupportedDType, tilelang_only_dtype
from .lanes import VectorDType, vector_dtype
from .values import Buffer, StridedTensor, Tensor, dyn, dynamic, symbolic  # noqa: F401
from .values import FragmentBuffer, LocalBuffer, SharedBuffer  # noqa: F401
from .values import Macro, macro  # noqa: F401
from .values import buffer, buffer_decl, handle, meta_var, var  # noqa: F401
from .values import ptr  # noqa: F401  (TileLang's T.ptr: pointer parameters, tables of addresses)
from ..ir import nodes as _N

Serial, Unroll, Vectorized = FORMS["Serial"], FORMS["Unroll"], FORMS["Vectorized"]
ws = WarpSpecialize = FORMS["ws"]  # TileLang's explicit warp-specialized regions
c2d_im2col = FORMS["c2d_im2col"]
print = FORMS["print"]  # noqa: A001  (TileLang's T.print)
globals().update(DTYPE_NAMES)  # T.float16, T.half, T.bool ...
dtype = DType  # TileLang's T.dtype: the type of T.float16 ..., T.dtype("half") is T.float16


def from_script(text: str, env: Optional[dict] = None, filename: str = "<script>") -> _N.PrimFunc:
    """Parse a printed script (``PrimFunc.script()``) or a kernel's source text: its
    top-level assignments and imports run as Python with ``T`` bound to this module,
    then its one ``@T.prim_func`` function is parsed."""
    return parse_script(text, {"T": sys.modules[__name__], **(env or {})}, filename)


def __getattr__(name: str):
    if name in TILELANG_ONLY:
        return Unsupported(name)
    if tilelang_only_dtype(name):
        return VectorDType(name) if vector_dtype(name) else UnsupportedDType(name)
    raise AttributeError(f"module 'tilecute.language' has no attribute {name!r}")


__all__ = [
    "prim_func", "from_script", "FrontendError", "Tensor", "StridedTensor", "Buffer",
    "SharedBuffer", "FragmentBuffer", "LocalBuffer",
    "symbolic", "dynamic", "Var", "Ref", "handle", "ptr", "var", "meta_var", "buffer", "buffer_decl", "dtype", "GemmWarpPolicy", "Layout", "Fragment", "macro", *FORMS, *EXPRESSION_HELPERS,
    "ldg32", "ldg64", "ldg128", "ldg256", "lds32", "lds64", "lds128", "__ldg",
    *DTYPE_NAMES,
]



class Ref:
    """TileLang's ``T.Ref``: a ``T.macro`` parameter annotated ``x: T.Ref`` (or the
    deprecated ``x: T.Var``) is passed by reference: given a buffer element (``A[i]``),
    reading ``x`` loads it and ``x = v`` / ``x += v`` store into it (its indices evaluated
    once, at the call); given a ``T.alloc_var`` or a buffer region, it is that.  Any other
    argument is an error at the call."""

    def __init__(self, *args, **kwargs):
        raise TypeError("T.Ref annotates a T.macro parameter (`def m(x: T.Ref)`); it is not "
                        "called")


# TileLang's T.PrimExpr: tilecute's expression class (`isinstance(x, T.PrimExpr)` on a
# macro's values, annotations), as tilecute.tvm.tirx.PrimExpr
from ..ir.nodes import Expr as PrimExpr  # noqa: E402,F401
