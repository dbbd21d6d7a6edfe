"""Atomics for generated kernels: adds (max, min) into global or shared memory, result
unused; the same returning the old value (``atomic_fetch``, TileLang's ``return_prev``);
TileLang's ordered loads, stores and ors.

Both helpers lower to PTX ``red`` (reduction without a returned value) with
``.relaxed`` ordering (the semantics of CUDA ``atomicAdd``) at ``.gpu`` scope for
global tensors and ``.cta`` scope for shared ones; ``atomic_add`` / ``atomic_max`` /
``atomic_min`` take TileLang's other memory orders too (``order=``).

Usage in generated code::

    from tilecute.runtime.cute import atomic as tca
    tca.atomic_add(out, (i, j), value)              # scalar
    tca.atomic_add_vector(out, (i, j * 4), vals, 4)  # 4 contiguous elements
    tca.atomic_add_view(cute.make_tensor(out.iterator + off, cute.make_layout(4)), vals)

Dtypes (scalar): Float32, Float64, Float16, Int32, Uint32, Int64, Uint64 on sm_80 and
sm_90; BFloat16 by ``red.add.noftz.bf16`` on sm_90+, and before sm_90 (where ptxas has no
bf16 add atomic) by a 16-bit compare-and-swap loop, as CUDA's ``atomicAdd`` does there.

TileLang's ordered single-element atomics (device scope, global memory):
``atomic_load(t, coord, order)``, ``atomic_store(t, coord, value, order)``,
``atomic_or(t, coord, value, order)``; see each for its PTX.
``atomic_fetch(t, coord, value, op)``: ``atom`` add/max/min whose result is the element's
old value (``T.atomic_add(x[i], v, return_prev=True)``).
"""

import cutlass
import cutlass.cute as cute
from cutlass._mlir.dialects import arith
from cutlass._mlir.dialects import llvm as _llvm
from cutlass.cutlass_dsl import CuTeDSL, dsl_user_op

_RED_DTYPES = (cutlass.Float32, cutlass.Float64, cutlass.Float16, cutlass.BFloat16,
               cutlass.Int32, cutlass.Uint32, cutlass.Int64, cutlass.Uint64)


def arch_major() -> int:
    """Major compute capability of the arch being compiled for (``--gpu-arch`` option,
    else CUTE_DSL_ARCH); a trace-time Python int."""
    return CuTeDSL._get_dsl().get_arch_enum().major


def element_ptr(tensor, coord):
    """Pointer to ``tensor[coord]``: ``tensor.iterator + crd2idx(coord, tensor.layout)``.
    ``coord`` is a tuple matching the tensor's rank or a single (linear) index; a
    1-tuple on a rank-1 layout built from a plain int (``make_layout(n)``, shape ``n``
    rather than ``(n,)``) is unwrapped, since ``crd2idx`` rejects that pairing.  Works
    for swizzled (composed) layouts too: the swizzle is applied to the offset."""
    if isinstance(coord, tuple) and len(coord) == 1 and not isinstance(tensor.shape, tuple):
        coord = coord[0]
    return tensor.iterator + cute.crd2idx(coord, tensor.layout)


def _red_type(dtype):
    """The ``red`` type for ``dtype``: ptxas has no ``red.add.s64``, and a two's
    complement add is the same as ``.u64``."""
    return cutlass.Uint64 if dtype is cutlass.Int64 else dtype


def _scope(tensor) -> str:
    return "cta" if tensor.iterator.memspace == cute.AddressSpace.smem else "gpu"


def _check_dtype(dtype) -> None:
    if dtype not in _RED_DTYPES:
        raise TypeError(f"tilecute atomic_add: no atomic add for {dtype.__name__}")


def atomic_add(tensor, coord, value, order: str = "relaxed") -> None:
    """``tensor[coord] += value`` atomically; ``tensor`` in global or shared memory.

    ``coord``: see :func:`element_ptr`.  ``value`` is converted to the tensor's element
    type first.  PTX: ``red.relaxed.gpu.global.add.f32`` (global) /
    ``red.relaxed.cta.shared::cta.add.f32`` (shared); ``.f64``, ``.noftz.f16``,
    ``.noftz.bf16`` (sm_90+), ``.s32`` (Int32, and Uint32 buffers: their tensors have
    Int32 elements), ``.u64`` (Int64, Uint64) for the other dtypes.  ``order``
    (TileLang's ``memory_order``, a trace-time name): see :func:`_ordered_update`.
    """
    dtype = tensor.element_type
    _check_dtype(dtype)
    if _bf16_cas(dtype):
        _cas16(tensor, coord, value, "add", order)
        return
    _ordered_update(tensor, coord, dtype(value), "add", _red_type(dtype), order)


def _bf16_cas(dtype) -> bool:
    """A bfloat16 add before sm_90 (no ``red.add.bf16``): :func:`_cas16`'s loop."""
    return dtype is cutlass.BFloat16 and arch_major() < 9


def _ordered_update(tensor, coord, value, op: str, red_dtype, order: str) -> None:
    """One atomic update of ``tensor[coord]`` whose result is unused, with TileLang's
    memory ``order`` at the tensor's scope (``.gpu`` global, ``.cta`` shared), as libcu++'s
    ``cuda::atomic_ref::fetch_<op>`` orders it on sm_70+: relaxed / release: ``red.{order}``;
    consume / acquire: ``atom.acquire``; acq_rel: ``atom.acq_rel``; seq_cst: ``fence.sc``
    then ``atom.acquire`` (the old value of an ``atom`` is dropped)."""
    if order not in MEMORY_ORDERS:
        raise ValueError(f"tilecute atomic_{op}: no memory order {order!r}")
    ptr, scope = element_ptr(tensor, coord), _scope(tensor)
    if order in ("relaxed", "release"):
        cute.arch.red(ptr, value, op=op, dtype=red_dtype, sem=order, scope=scope)
        return
    if order == "seq_cst":
        fence_sc(scope)
    sem = "acq_rel" if order == "acq_rel" else "acquire"
    {"add": cute.arch.atomic_add, "max": cute.arch.atomic_max,
     "min": cute.arch.atomic_min}[op](ptr, value, sem=sem, scope=scope)


def vector_chunk(dtype, width: int, global_memory: bool = True) -> int:
    """Elements per ``red`` instruction that :func:`atomic_add_vector` uses for
    ``width`` ``dtype`` elements on the current arch: ``width`` itself where one
    vector ``red`` exists, 2 for f16 pairs (``f16x2``), else 1."""
    if not global_memory:
        return 1  # nvvm.red: "vector arguments only support reduction on global or generic"
    if arch_major() >= 9:
        if dtype is cutlass.Float32 and width in (2, 4):
            return width
        if dtype in (cutlass.Float16, cutlass.BFloat16) and width in (2, 4, 8):
            return width
    if dtype is cutlass.Float16 and width % 2 == 0:
        return 2  # red.global.add.noftz.f16x2, sm_60+
    return 1


def atomic_add_vector(tensor, coord, values, width: int) -> None:
    """Atomically add ``width`` values to the ``width`` contiguous elements of
    ``tensor`` starting at ``coord`` (``width`` compile-time).

    ``values``: a register tensor (``cute.make_rmem_tensor``) or a TensorSSA of
    ``width`` elements of the tensor's element type.  Contract: the ``width`` elements
    are contiguous in memory (unit stride, no swizzle inside the vector) and the first
    one is aligned to ``width * element bytes`` (the caller guarantees it; the vector
    ``red`` faults on a misaligned address).

    One instruction where the hardware has it: sm_90+, global memory:
    ``red.relaxed.gpu.global.add.v2.f32`` / ``.v4.f32``, ``.add.noftz.v4.f16`` /
    ``.v8.f16`` / ``.v4.bf16`` / ``.v8.bf16`` (2 x f16 / bf16: ``.noftz.f16x2`` /
    ``.noftz.bf16x2``).  Elsewhere it splits: global f16 on sm_80 into ``f16x2``
    pairs, everything else (shared memory: the NVVM ``red`` op takes vectors only for
    global/generic pointers; other dtypes or widths) into one scalar ``red`` per
    element.  Each instruction is atomic on its own, not the whole vector.
    """
    _red_vector(element_ptr(tensor, coord), tensor, values, width)


def atomic_add_view(view, values) -> None:
    """:func:`atomic_add_vector` into the contiguous elements of ``view`` (a tensor of
    ``width`` elements at unit stride, as the generated code makes a vector access:
    ``cute.make_tensor(t.iterator + offset, cute.make_layout(width))``; aligned to its
    bytes, which the launcher checks); ``values`` a register tensor of ``width``."""
    _red_vector(view.iterator, view, values, cute.size(view))


def _red_vector(ptr, tensor, values, width: int) -> None:
    dtype = tensor.element_type
    _check_dtype(dtype)
    if isinstance(values, cute.TensorSSA):
        regs = cute.make_rmem_tensor((width,), dtype)
        regs.store(values)
    else:
        regs = values
    chunk = vector_chunk(dtype, width, tensor.iterator.memspace == cute.AddressSpace.gmem)
    for i in range(0, width, chunk):
        if chunk == 1 and _bf16_cas(dtype):
            _cas16(cute.make_tensor(ptr + i, cute.make_layout(1)), 0, dtype(regs[i]), "add",
                   "relaxed")
            continue
        if chunk == 1:
            part = dtype(regs[i])
        else:
            part = cute.make_tensor(regs.iterator + i, cute.make_layout(chunk)).load()
        cute.arch.red(ptr + i, part, op="add", dtype=_red_type(dtype), sem="relaxed",
                      scope=_scope(tensor))


# dtypes with an atomic max/min (the validator allows exactly these IR dtypes: float32,
# int32, int64, float16, bfloat16; uint buffers have signless Int elements here, so their
# order is not known)
_MINMAX_DTYPES = (cutlass.Float32, cutlass.Int32, cutlass.Int64)
_HALF_DTYPES = (cutlass.Float16, cutlass.BFloat16)
# the f32 of a 16-bit float in register `old` (into `fo`): exact for both formats
_WIDEN = {cutlass.Float16: "cvt.f32.f16 {dst}, {src};",
          cutlass.BFloat16: "mov.b32 {dst}, {{zero, {src}}};"}


@dsl_user_op
def _cas16(tensor, coord, value, op: str, order: str, *, loc=None, ip=None):
    """TileLang's 16-bit ``AtomicMax`` / ``AtomicMin`` (``atomic.h``: CUDA has no half or
    bfloat16 max/min atomic, so it loops on a 16-bit ``atomicCAS``), returning the element's
    value before this thread's update.

    One inline PTX block: read the element; while ``value > old`` (``<`` for min; compared
    as float32, exact for both formats, so a NaN on either side compares false: a NaN value
    changes nothing and a NaN element stays, and ``+0 > -0`` is false) try
    ``atom.cas.b16(old -> value)``; stop when the swap took or the comparison fails against
    the value it found.  ``order``: the read is ``ld.relaxed`` (``ld.acquire`` for an
    acquiring order) and the swap ``atom.{sem}.cas`` with the order's semantics, ``fence.sc``
    first for seq_cst (TileLang's CAS loop drops the order: a stronger one is kept here).
    ``.gpu`` scope in global memory, ``.cta`` in shared (``atom.cas.b16``: sm_70+).

    ``op="add"`` (bfloat16 before sm_90, which has no ``red``/``atom`` ``.add.bf16``: CUDA's
    ``atomicAdd(__nv_bfloat16*)`` loops on a compare-and-swap there too): the new element is
    ``bf16(float(old) + float(value))``, rounded to nearest even, swapped in until no other
    thread changed the element between the read and the swap."""
    if order not in MEMORY_ORDERS:
        raise ValueError(f"tilecute atomic_{op}: no memory order {order!r}")
    dtype = tensor.element_type
    ptr = element_ptr(tensor, coord)
    if ptr.memspace == cute.AddressSpace.smem:
        space, scope, addr_t, addr_c = "shared", "cta", cutlass.Int32, "r"
    elif ptr.memspace == cute.AddressSpace.gmem:
        space, scope, addr_t, addr_c = "global", "gpu", cutlass.Int64, "l"
    else:
        raise TypeError(f"tilecute atomic_{op}: the element must be in global or shared memory")
    if order == "seq_cst":
        fence_sc(scope)
    acquiring = order in ("consume", "acquire", "acq_rel", "seq_cst")
    sem = {"consume": "acquire", "seq_cst": "acquire"}.get(order, order)
    addr = addr_t(_llvm.ptrtoint(addr_t.mlir_type, ptr.to_llvm_ptr(loc=loc, ip=ip), loc=loc, ip=ip))
    bits = cutlass.Int16(arith.bitcast(cutlass.Int16.mlir_type,
                                       dtype(value).ir_value(loc=loc, ip=ip), loc=loc, ip=ip))
    widen = _WIDEN[dtype]
    cmp = {"max": "gt", "min": "lt"}.get(op)
    text = "\n".join([
        "{",
        ".reg .pred p;", ".reg .b16 old, seen, next, zero;", ".reg .f32 fv, fo;",
        "mov.b16 zero, 0;",
        f"ld.{'acquire' if acquiring else 'relaxed'}.{scope}.{space}.b16 old, [$1];",
        widen.format(dst="fv", src="$2"),
        "TC_CAS16_LOOP:",
        widen.format(dst="fo", src="old"),
        *([f"setp.{cmp}.f32 p, fv, fo;", "@!p bra TC_CAS16_DONE;", "mov.b16 next, $2;"]
          if op != "add" else ["add.rn.f32 fo, fo, fv;", "cvt.rn.bf16.f32 next, fo;"]),
        "mov.b16 seen, old;",
        f"atom.{sem}.{scope}.{space}.cas.b16 old, [$1], seen, next;",
        "setp.ne.b16 p, old, seen;",
        "@p bra TC_CAS16_LOOP;",
        "TC_CAS16_DONE:",
        "mov.b16 $0, old;",
        "}"])
    old = _llvm.inline_asm(cutlass.Int16.mlir_type,
                           [addr.ir_value(loc=loc, ip=ip), bits.ir_value(loc=loc, ip=ip)],
                           text, f"=h,{addr_c},h,~{{memory}}", has_side_effects=True,
                           is_align_stack=False, asm_dialect=_llvm.AsmDialect.AD_ATT,
                           loc=loc, ip=ip)
    return dtype(arith.bitcast(dtype.mlir_type, old, loc=loc, ip=ip))


_UNSIGNED = {32: cutlass.Uint32, 64: cutlass.Uint64}


def _as_unsigned(dtype, op: str):
    """The unsigned type of the integer element type ``dtype`` (a uint32 / uint64 buffer's
    tensor has signless Int elements: the order of its values is the IR dtype's, which the
    generated call states with ``unsigned=True``)."""
    if dtype not in (cutlass.Int32, cutlass.Uint32, cutlass.Int64, cutlass.Uint64):
        raise TypeError(f"tilecute atomic_{op}(unsigned=True): {dtype.__name__} elements")
    return _UNSIGNED[dtype.width]


def _atomic_minmax(tensor, coord, value, op: str, order: str, unsigned: bool) -> None:
    dtype = tensor.element_type
    if unsigned:  # red / atom .max.u32 / .u64 (cuda::atomic_ref<unsigned>::fetch_max)
        u = _as_unsigned(dtype, op)
        _ordered_update(tensor, coord, u(value), op, u, order)
        return
    if dtype in _HALF_DTYPES:
        _cas16(tensor, coord, value, op, order)
        return
    if dtype not in _MINMAX_DTYPES:
        raise TypeError(f"tilecute atomic_{op}: no atomic {op} for {dtype.__name__}")
    if dtype is cutlass.Float32:
        # the sign-split integer max/min (atom.max.s32 / atom.min.u32 on the bits)
        if order not in MEMORY_ORDERS:
            raise ValueError(f"tilecute atomic_{op}: no memory order {order!r}")
        scope = _scope(tensor)
        if order == "seq_cst":
            fence_sc(scope)
        sem = {"consume": "acquire", "seq_cst": "acquire"}.get(order, order)
        f = cute.arch.atomic_fmax if op == "max" else cute.arch.atomic_fmin
        f(element_ptr(tensor, coord), dtype(value), sem=sem, scope=scope)
    else:
        _ordered_update(tensor, coord, dtype(value), op, dtype, order)


def atomic_max(tensor, coord, value, order: str = "relaxed", unsigned: bool = False) -> None:
    """``tensor[coord] = max(tensor[coord], value)`` atomically (``.gpu`` scope in global
    memory, ``.cta`` in shared; ``order`` as :func:`_ordered_update`).  Float32:
    ``cute.arch.atomic_fmax`` (a signed integer max on the bits of a non-negative value, an
    unsigned min on those of a negative one, with the order's ``sem``); Int32/Int64:
    ``red.max.s32``/``.s64`` (``atom`` for an acquiring order); ``unsigned=True`` (a uint32 /
    uint64 buffer): ``.u32`` / ``.u64``; Float16/BFloat16: :func:`_cas16`."""
    _atomic_minmax(tensor, coord, value, "max", order, unsigned)


def atomic_min(tensor, coord, value, order: str = "relaxed", unsigned: bool = False) -> None:
    """``tensor[coord] = min(tensor[coord], value)`` atomically; as :func:`atomic_max`."""
    _atomic_minmax(tensor, coord, value, "min", order, unsigned)


def atomic_fetch(tensor, coord, value, op: str, unsigned: bool = False, order: str = "relaxed"):
    """TileLang's ``T.atomic_add/max/min(tensor[coord], value, return_prev=True)``: the
    element updated atomically (``.gpu`` scope in global memory, ``.cta`` in shared memory)
    and its value before the update returned.  ``order`` (TileLang's ``memory_order``, a
    trace-time name), as libcu++'s ``cuda::atomic_ref::fetch_<op>`` orders it on sm_70+:
    the ``atom``'s ``.sem`` is the order (consume: acquire), seq_cst a ``fence.sc`` then
    an ``acquire`` atom.  PTX
    ``atom.{sem}.{gpu.global,cta.shared}.{add,max,min}`` (``.s32``/``.u32``/``.u64``,
    ``.f32``/``.f64``, ``.noftz.f16``, ``.noftz.bf16`` (sm_90+) for add; a float32 max/min
    is CuTe DSL's integer-bitcast ``atomic_fmax``/``atomic_fmin``; ``unsigned=True``, a uint32
    / uint64 buffer: ``.max.u32`` / ``.u64``; float16 / bfloat16: :func:`_cas16`);
    ``value`` converted to the element type."""
    if tensor.iterator.memspace not in (cute.AddressSpace.gmem, cute.AddressSpace.smem):
        raise TypeError(f"tilecute atomic_{op}(return_prev=True): the element must be in "
                        "global or shared memory")
    if order not in MEMORY_ORDERS:
        raise ValueError(f"tilecute atomic_{op}(return_prev=True): no memory order {order!r}")
    ptr = element_ptr(tensor, coord)
    scope = _scope(tensor)
    dtype = tensor.element_type
    v = dtype(value)
    if op == "add":
        _check_dtype(dtype)
        if _bf16_cas(dtype):  # atom.add.noftz.bf16 is sm_90+
            return _cas16(tensor, coord, v, "add", order)
    elif dtype in _HALF_DTYPES and not unsigned:
        return _cas16(tensor, coord, v, op, order)
    if order == "seq_cst":
        fence_sc(scope)
    sem = {"consume": "acquire", "seq_cst": "acquire"}.get(order, order)
    if op == "add":
        return cute.arch.atomic_add(ptr, v, sem=sem, scope=scope)
    if unsigned:  # atom.max.u32 / .u64 (CuTe DSL: umax for unsigned values)
        u = _as_unsigned(dtype, op)
        f = cute.arch.atomic_max if op == "max" else cute.arch.atomic_min
        return f(ptr, u(value), sem=sem, scope=scope)
    if dtype is cutlass.Float32:
        f = cute.arch.atomic_fmax if op == "max" else cute.arch.atomic_fmin
        return f(ptr, v, sem=sem, scope=scope)
    f = cute.arch.atomic_max if op == "max" else cute.arch.atomic_min
    return f(ptr, v, sem=sem, scope=scope)


@cute.jit
def atomic_fetch_once(tensor, coord, value, op: cutlass.Constexpr, owner, lane, mask,
                      unsigned: cutlass.Constexpr = False, order: cutlass.Constexpr = "relaxed"):
    """:func:`atomic_fetch` run by one of the threads that hold a value alike (``owner``;
    the lanes of ``mask``, one warp, run this together), its result shuffled from lane
    ``lane`` (the owner's) to them all: one atomic per logical element, every holder seeing
    its old value (an MMA row fragment's quad, a column fragment's lanes)."""
    old = tensor.element_type(0)
    if owner:
        old = tensor.element_type(atomic_fetch(tensor, coord, value, op, unsigned, order))
    return tensor.element_type(cute.arch.shuffle_sync(old, lane, mask=mask))


# ---- TileLang's T.atomic_load / T.atomic_store / T.atomic_or ------------------------------
# Memory orders by name (TileLang's ids 0..5 are cuda::memory_order's, in this order).  The
# orderings are libcu++'s cuda::atomic_ref<T, thread_scope_device> (what TileLang's
# AtomicLoad/AtomicStore call) on sm_70+: a seq_cst access is a fence.sc.gpu before an
# acquire load / a relaxed store / an acquire read-modify-write; consume is acquire.
MEMORY_ORDERS = ("relaxed", "consume", "acquire", "release", "acq_rel", "seq_cst")


@dsl_user_op
def fence_sc_gpu(*, loc=None, ip=None) -> None:
    """PTX ``fence.sc.gpu`` (the fence before a sequentially consistent access)."""
    _llvm.inline_asm(None, [], "fence.sc.gpu;", "", has_side_effects=True, is_align_stack=False,
                     asm_dialect=_llvm.AsmDialect.AD_ATT, loc=loc, ip=ip)


@dsl_user_op
def fence_sc_cta(*, loc=None, ip=None) -> None:
    """PTX ``fence.sc.cta`` (before a sequentially consistent access to shared memory)."""
    _llvm.inline_asm(None, [], "fence.sc.cta;", "", has_side_effects=True, is_align_stack=False,
                     asm_dialect=_llvm.AsmDialect.AD_ATT, loc=loc, ip=ip)


def fence_sc(scope: str) -> None:
    """``fence.sc`` at ``scope`` ("gpu" or "cta")."""
    (fence_sc_gpu if scope == "gpu" else fence_sc_cta)()


def _flag_ptr(tensor, coord, what: str):
    """The element's pointer and its state space for ``ld`` / ``st``: None (``.global``)
    for global memory, ``"cta"`` (``.shared::cta``) for shared memory."""
    space = tensor.iterator.memspace
    if space not in (cute.AddressSpace.gmem, cute.AddressSpace.smem):
        raise TypeError(f"tilecute {what}: the element must be in global or shared memory")
    return element_ptr(tensor, coord), ("cta" if space == cute.AddressSpace.smem else None)


def atomic_load(tensor, coord, order: str):
    """``tensor[coord]`` read atomically at device (``.gpu``) scope with ``order``
    (relaxed, consume, acquire or seq_cst): ``ld.relaxed.gpu`` / ``ld.acquire.gpu`` /
    ``fence.sc.gpu; ld.acquire.gpu``.  Global or shared memory (TileLang's
    ``cuda::atomic_ref<T, thread_scope_device>`` takes either)."""
    if order not in ("relaxed", "consume", "acquire", "seq_cst"):
        raise ValueError(f"tilecute atomic_load: no {order} load")
    ptr, ss = _flag_ptr(tensor, coord, "atomic_load")
    if order == "seq_cst":
        fence_sc_gpu()
    return cute.arch.load(ptr, tensor.element_type, sem="relaxed" if order == "relaxed" else "acquire",
                          scope="gpu", ss=ss)


def atomic_store(tensor, coord, value, order: str) -> None:
    """``tensor[coord] = value`` atomically at device scope with ``order`` (relaxed,
    release or seq_cst): ``st.relaxed.gpu`` / ``st.release.gpu`` / ``fence.sc.gpu;
    st.relaxed.gpu``.  Global or shared memory; ``value`` converted to the element type."""
    if order not in ("relaxed", "release", "seq_cst"):
        raise ValueError(f"tilecute atomic_store: no {order} store")
    ptr, ss = _flag_ptr(tensor, coord, "atomic_store")
    if order == "seq_cst":
        fence_sc_gpu()
    cute.arch.store(ptr, tensor.element_type(value), sem="release" if order == "release" else "relaxed",
                    scope="gpu", ss=ss)


_OR_DTYPES = (cutlass.Int32, cutlass.Uint32, cutlass.Int64, cutlass.Uint64)


def atomic_or(tensor, coord, value, order: str) -> None:
    """``tensor[coord] |= value`` atomically at device scope, result unused (32- or 64-bit
    integers, global or shared memory).  relaxed / release: ``red.{order}.gpu.global.or.b32/.b64``
    (TileLang's); acquire, consume, acq_rel: ``atom.{acquire|acq_rel}.gpu.or``; seq_cst:
    ``fence.sc.gpu`` then the acquire ``atom``."""
    dtype = tensor.element_type
    if dtype not in _OR_DTYPES:
        raise TypeError(f"tilecute atomic_or: no atomic or for {dtype.__name__}")
    ptr, _ = _flag_ptr(tensor, coord, "atomic_or")  # (red / atom take the pointer's space)
    if order in ("relaxed", "release"):
        cute.arch.red(ptr, dtype(value), op="or", dtype="b32" if dtype.width == 32 else "b64",
                      sem=order, scope="gpu")
        return
    if order == "seq_cst":
        fence_sc_gpu()
    cute.arch.atomic_or(ptr, dtype(value), sem="acq_rel" if order == "acq_rel" else "acquire",
                        scope="gpu")
