"""Plan ``T.gemm``: pick the MMA family (``Gemm.family``), check the tile shapes, and fix
the layouts the MMA needs (runs first, so the TMA pass sees the operand swizzles).

``T.gemm(A, B, C, transpose_A, transpose_B, clear_accum)`` computes ``C += A @ B`` with
``A`` ``(M, K)`` (``(K, M)`` when ``transpose_A``), ``B`` ``(K, N)`` (``(N, K)`` when
``transpose_B``), both shared, and ``C`` an ``(M, N)`` fragment of the accumulator dtype
(the products are summed in it).  With 16-bit types
``A`` may instead be an ``(M, K)`` fragment: wgmma's RS form, or mma.sync (sm_80+, every
warp along M, as if ``policy=FullRow``) reads it from registers, laid out as an ``mma``
fragment with ``operand="A"`` (register ``r`` holds the same ``(i, j)`` as register ``r``
of an accumulator with ``K`` columns, so a ``T.Parallel`` loop or ``T.copy`` can move an
accumulator into it, as attention kernels do with P = softmax(S)).  Any other fragment
operand (a ``B`` fragment, TileLang's gemm_sr; a transposed ``A`` fragment, its gemm_rs; a
fragment of a dtype or tile no MMA reads from registers) is staged through shared memory:
a new shared buffer of the fragment's shape (at the kernel's top level, wherever the
fragment is allocated), a ``T.copy`` into it before the ``T.gemm``,
which reads it (:meth:`_Kernel.stage`).  ``tfloat32`` operands (TileLang's) are float32
ones: the tensor cores multiply both as tf32.

Families (``runtime/cute/mma.py`` issues them), by operand -> accumulator dtype
(``target.MMA_ACCUMULATORS``):

* ``wgmma`` on sm_90+ for float16 (-> float32 or float16), bfloat16 (-> float32), float8
  e4m3/e5m2 (-> float32 or float16) and int8/uint8 (-> int32): one warpgroup (128
  threads) per 64 rows, ``threads / 128`` warpgroups along M; N a multiple of 8 per
  warpgroup (for int8: 8, 24 or a multiple of 16), in instructions of up to 256 columns
  (a warpgroup's wider part in several, as TileLang's 64 x 512 accumulators).  float8 and int8 operands must be
  K-major (``transpose_B=True``, no ``transpose_A``).
* ``mma`` (warp ``mma.sync``) on sm_80+ for float16 (-> float32 or float16) and bfloat16
  (-> float32), for float32 (as tf32; K-major operands only) on every arch, since
  CuTe DSL has no tf32 wgmma atom, and for int8/uint8 (-> int32, m16n8k32; K-major
  operands only) below sm_90a and for tiles wgmma cannot take with the block's
  warpgroups (a 32-row tile, TileLang's w4a8 dequant GEMM), as TileLang, or whose shared
  operand no swizzle chunk tiles (B stored (K, N), 8 or 24 float16 columns).  Warps are
  arranged ``(warps_m, warps_n)`` over the tile by the policy; T.gemms whose rows meet
  share one arrangement, and those whose row statistics meet such a T.gemm's join it on
  mma.sync where wgmma could take them (:meth:`_Kernel.shared_partitions`).
* ``simt`` where no tensor-core MMA serves the dtypes, majorness, arch or tile (float64;
  float32, float8 or int8 MN-major; float8 below sm_90a or on a tile wgmma cannot take;
  int8 on a tile neither wgmma nor mma.sync can take; other accumulators such as
  bfloat16 -> float16): every thread multiply-adds its own elements of ``C`` in ``C``'s dtype (K-major int8 -> int32: four bytes a
  ``dp4a``, codegen).  ``C`` keeps no MMA layout: the layout pass
  lays it out as any fragment (blocked or replicated), so loops, copies and reductions
  over it are the ordinary ones; the operands are ``row_major`` (or the TMA swizzle the
  program annotated).

Layouts (tensor-core families): each operand becomes ``tma_swizzled`` with the widest swizzle (128, 64 or 32
bytes) dividing its last dim's bytes (or the narrower one the program gave it with
``T.annotate_layout``; another kind the program gave it is an error), so TMA copies fill it (one box per chunk) and the
MMA reads it without bank conflicts; ``C`` (and every fragment it shares a
``T.Parallel`` loop with, see the layout pass) gets the ``mma`` layout.
"""

from __future__ import annotations

import dataclasses
import math

from ..ir import nodes as N
from ..ir.printer import expr_str, gemm_operand
from ..ir.validate import INTS4
from ..ir.visitor import BODY_FIELDS, StmtMutator, walk_nodes, walk_stmts
from ..runtime.dtypes import DTYPES, storage_bytes
from .analysis import accesses, known_multiple, parallel_nest, whole
from ..target import (MMA_ACCUMULATORS, MMA_INSTR_K, MMA_TYPES, TMA_SWIZZLES, WARP, WARPGROUP,
                      WGMMA_TYPES, arch_at_least, target)

# operand dtypes that may differ between A and B (the MMAs take either of each pair)
# A fragments an MMA reads from registers (wgmma's RS form; mma.sync for 16-bit types)
RS_TYPES = ("float16", "bfloat16")
MIXED = (("float8_e4m3", "float8_e5m2"), ("int8", "uint8"), INTS4,
         ("float32", "tfloat32"))
TF32 = ("float32", "tfloat32")  # operands the tensor cores multiply as tf32



class GemmError(ValueError):
    pass


# registers a thread needs beside one wgmma instruction's accumulator (its descriptors,
# addresses, loop state): measured with ptxas on CuTe DSL's GEMMs (m64nNk16 float32: N / 2 +
# 26 for N = 160..256), which stops with "Insufficient registers" (C7602) below it
WGMMA_SPARE_REGS = 26


def wgmma_instruction_regs(cols: int, acc_dtype: str) -> int:
    """Registers per thread of one wgmma instruction's accumulator, for a warpgroup's
    ``cols`` columns: its instruction takes ``cols`` up to 256, else the widest N up to 256
    dividing it (``runtime.cute.mma.wgmma_instruction_n``), 64 x N over 128 threads."""
    n = cols if cols <= 256 else next(
        (w for w in range(256, 7, -8) if cols % w == 0 and (w % 16 == 0 or cols % 16)), 256)
    return max(1, n // 2 * DTYPES[acc_dtype].bytes // 4)


def wgmma_warps(m: int, n: int, warpgroups: int, policy: str = "Square") -> tuple[int, int] | None:
    """``(warpgroups along M, along N)`` for wgmma: each warpgroup a 64-row step (or
    several) by a multiple of 8 columns.  As TileLang: ``FullRow`` puts as many along M
    as the tile allows and the rest along N, ``FullCol`` as many along N; ``Square`` all
    along M, else all along N, else the most along M.  An arrangement whose warpgroups
    take at most 256 columns (one instruction's N) is preferred; where none does, each
    warpgroup takes its wider part in several instructions of up to 256 columns along N
    (TileLang's 64 x 512 accumulator of one warpgroup; ``tcm.tiled_mma`` picks the
    instruction)."""
    def fits(wm, wn, widest):
        return m % (64 * wm) == 0 and n % wn == 0 and (n // wn) % 8 == 0 and n // wn <= widest
    splits = [(wm, warpgroups // wm) for wm in range(warpgroups, 0, -1) if warpgroups % wm == 0]
    order = {"FullRow": splits, "FullCol": splits[::-1],
             "Square": [(warpgroups, 1), (1, warpgroups)] + splits}[policy]
    return next((w for w in order if fits(*w, 256)), None) or \
        next((w for w in order if fits(*w, n)), None)


def wgmma_part_swizzle(s: N.Gemm, what: str, dtype: str, warps: tuple, m: int, n: int) -> int:
    """The widest swizzle whose chunks tile each warpgroup's part of operand ``what`` of
    ``s`` ("A" / "B") where it is MN-major and split over warpgroups along its MN dim
    (``warps``: wgmma's (along M, along N)); 128 where it is neither.  0: wgmma cannot
    read the parts (B stored (K, N), 24 columns of 16-bit values each: 48 bytes)."""
    mn_major, parts, extent = (s.transpose_a, warps[0], m) if what == "A" else \
        (not s.transpose_b, warps[1], n)
    if not mn_major or parts == 1:
        return 128
    return operand_swizzle(extent // parts * DTYPES[dtype].bytes)


def operand_swizzle(inner_bytes: int) -> int:
    """The widest TMA swizzle whose chunks tile a row of ``inner_bytes`` (0 if none)."""
    return next((s for s in TMA_SWIZZLES if inner_bytes % s == 0), 0)


def mma_warps(m: int, n: int, warps: int, policy: str = "Square",
              all_along_m: bool = False) -> tuple[int, int] | None:
    """``(warps_m, warps_n)`` for mma.sync: each warp a multiple of 16 x 16 where an
    arrangement gives that, else of 16 x 8 (TileLang's narrowest warp tile: a 32 x 16
    tile over four warps; ``tcm.mma_n_step``).  As TileLang: ``FullRow`` puts as many
    warps along M as the tile allows, ``FullCol`` as many along N, ``Square`` makes each
    warp's tile as square as possible; ``all_along_m``: every warp along M or nothing (A
    from registers)."""
    # (warps along N other than a power of two take 16 x 8 steps: CuTe DSL aborts the
    # process partitioning B for ldmatrix.x4 (16 x 16 steps) over 3, 6, 12 warps along N;
    # with .x2 (one n8 atom a step, runtime.cute.mma.mma_n_step) it partitions any count)
    def arrangements(step):
        return [(wm, warps // wm) for wm in range(1, warps + 1) if warps % wm == 0
                and m % (16 * wm) == 0 and n % (step * (warps // wm)) == 0
                and (step == 8 or (warps // wm) & (warps // wm - 1) == 0)
                and not (all_along_m and warps // wm != 1)]
    valid = arrangements(16) or arrangements(8)
    if not valid:
        return None
    if policy == "FullRow":
        return max(valid)
    if policy == "FullCol":
        return min(valid)
    return min(valid, key=lambda w: abs(m // w[0] - n // w[1]))  # first of equal scores


class _Kernel:
    def __init__(self, func: N.PrimFunc, scope: N.KernelScope, arch: str, wgmma: bool = True,
                 forced: dict | None = None, moved: frozenset = frozenset(),
                 first_pass: bool = False):
        self.func, self.scope, self.arch = func, scope, arch
        # the first planning (select_mma): two mma.sync partitions of one accumulator are
        # left to shared_partitions to reconcile (``deferred``) rather than refused there
        self.first_pass = first_pass
        self.deferred = False
        self.policy_of: dict[str, str] = {}  # buffer -> the policy of the T.gemm that laid it out
        self.wgmma = wgmma
        # id(T.gemm) -> the (warps_m, warps_n) it must take on mma.sync (shared_partitions)
        self.forced: dict[int, tuple[int, int]] = forced or {}
        # ids of the T.gemms wgmma would take that run on mma.sync with the T.gemms they
        # share rows with (shared_partitions)
        self.moved = moved
        # id(T.gemm on a tensor-core family) -> (M, N, its warps on mma.sync (for one on
        # wgmma: those it would take there, or None), the threads it runs on, whether its A
        # is a fragment in a form mma.sync reads from registers with every warp along M,
        # its family, whether it may run on mma.sync instead)
        self.planned: dict[int, tuple] = {}
        self.buffers = {p.name: p for p in func.params if isinstance(p, N.Buffer)}
        self.allocs: dict[str, N.Allocate] = {}
        self.layouts: dict[str, N.Layout] = {}
        self.threads = scope.num_threads
        self.first = 0  # the first thread of the T.ws region of the T.gemm planned
        self.simt_c: dict[str, N.Gemm] = {}  # accumulators of SIMT T.gemms -> one of them
        self.simt_operands: set[str] = set()  # shared operands of SIMT T.gemms
        self.thread_vars: set[str] = set()  # names bound to values of the thread index
        # id(T.gemm) -> (fragment operand, the shared buffer it is staged in) for each of its
        # operands no MMA reads from registers (see stage)
        self.staged: dict[int, list] = {}
        # shared operand -> the gcd of the bytes into a row where the column ranges T.gemms
        # read of it start and end (Q_s[:, 0:256]); absent for buffers read whole
        self.part_bounds: dict[str, int] = {}

    def fail(self, s, msg: str):
        where = f"{s.loc}: " if getattr(s, "loc", None) else ""
        form = "T.wgmma_gemm" if s.wgmma_only else "T.gemm"
        raise GemmError(f"{where}prim_func '{self.func.name}': {form}("
                        f"{gemm_operand(s.a, s.a_index, s.a_part)}, "
                        f"{gemm_operand(s.b, s.b_index, s.b_part)}, {s.c}): {msg}")

    def collect(self, body, region: N.WarpGroups | None = None, branch: N.If | None = None) -> list:
        """The T.gemm statements of ``body`` with the ``T.ws`` region each runs in (None:
        the block's threads), in order; records its allocations.  ``branch``: the
        enclosing ``if`` on the thread index, if any."""
        out = []
        for s in body:
            if isinstance(s, N.Allocate):
                self.allocs[s.buffer.name] = s
                self.buffers[s.buffer.name] = s.buffer
            elif isinstance(s, N.Let) and self.on_threads(s.value):
                self.thread_vars.add(s.var.name)
            elif isinstance(s, N.Gemm):
                if branch is not None:
                    # TileLang infers the warpgroups of a T.gemm under `if tx < 128:` from
                    # the condition; tilecute plans it for the block's (or T.ws region's)
                    # threads, which would leave the others' part of C uncomputed
                    self.fail(s, f"it runs under `if {expr_str(branch.cond)}:` "
                                 f"({branch.loc or 'a condition on the thread index'}), and "
                                 "tilecute plans a T.gemm for all the threads of the block or of "
                                 "its T.ws region, not for those a condition on the thread index "
                                 "selects; write the branch as a region, `with T.ws(0):` (threads "
                                 "0..127), `with T.ws(1):` ...")
                if region is not None and region.span:
                    lo, hi = region.span
                    self.fail(s, f"it runs in the thread region of threads {lo}..{hi - 1} "
                                 f"({region.loc or 'a branch on the thread index'}), which is "
                                 "not whole warpgroups: tilecute plans a T.gemm for the "
                                 "warpgroups of the block or of a T.ws region")
                out.append((s, region))
            elif isinstance(s, N.WarpGroups):
                out += self.collect(s.body, s, None)
            elif isinstance(s, N.If) and self.on_threads(s.cond):
                out += self.collect(s.then, region, s) + self.collect(s.orelse, region, s)
            else:
                for name in BODY_FIELDS.get(type(s), ()):
                    out += self.collect(getattr(s, name), region, branch)
        return out

    def on_threads(self, e) -> bool:
        """Does ``e`` read the thread index (``T.get_thread_binding()``, a name bound to it)?"""
        return any(isinstance(x, N.Call) and x.name == "thread_idx" or
                   isinstance(x, N.Var) and x.name in self.thread_vars for x in walk_nodes(e))

    def set_layout(self, s: N.Gemm, name: str, layout: N.Layout) -> None:
        have = self.layouts.get(name) or self.allocs[name].layout
        if self.first_pass and name in self.layouts and have.kind == layout.kind == "mma" and \
                have.mma == layout.mma == "mma" and self.policy_of[name] == s.policy and \
                dataclasses.replace(have, warps=layout.warps) == layout:
            # one accumulator of T.gemms of one policy planned with different warp
            # partitions (C @ state on the policy's, P @ V with A from registers on every
            # warp along M; TileLang takes the policy's for both and copies A to the warps
            # along N): shared_partitions gives them one, the second planning checks it
            self.deferred = True
            return
        self.policy_of[name] = s.policy
        if have is not None and have != layout:
            self.fail(s, f"'{name}' needs layout {layout} here but has {have} (from the program "
                         "or another T.gemm)")
        self.layouts[name] = layout

    def plan(self, s: N.Gemm) -> None:
        if s.policy not in N.GEMM_POLICIES:
            self.fail(s, f"policy {s.policy!r} is not one of {', '.join(N.GEMM_POLICIES)}")
        a, b, c = (self.buffers[x] for x in (s.a, s.b, s.c))
        # a fragment operand no MMA reads from registers here goes through shared memory
        if b.scope == "fragment":
            b = self.stage(s, b)
        if a.scope == "fragment" and not self.a_from_registers(s, a, b, c):
            a = self.stage(s, a)
        a_regs = a.scope == "fragment"  # wgmma's RS form or mma.sync's: A from registers
        for buf, what in ((a, "A"), (b, "B")):
            if buf.scope != "shared" and not (buf is a and a_regs):
                self.fail(s, f"{what} ('{buf.name}') is a {buf.scope} buffer; T.gemm reads its "
                             "operands from shared memory (T.alloc_shared) or fragments "
                             "(T.alloc_fragment)")
            index = s.a_index if what == "A" else s.b_index
            if buf.ndim != 2 + len(index):
                self.fail(s, f"{what} ('{buf.name}') has {buf.ndim} dims; T.gemm takes a 2-D "
                             f"buffer or one matrix {what}_s[i, ..., :, :] of a shared buffer of "
                             "more dims")
            if buf.name not in self.allocs:
                self.fail(s, f"{what} ('{buf.name}') must be allocated in this T.Kernel block")
        if c.scope != "fragment" or c.ndim != 2:
            self.fail(s, f"C ('{c.name}') must be a 2-D fragment (T.alloc_fragment)")
        if c.dtype == "bool":
            self.fail(s, f"C ('{c.name}') is bool; T.gemm accumulates in a numeric dtype")
        # (of a matrix operand A_s[s, :, :], the matrix's; of a part Q_s[:, 0:64], the part's)
        def dims(buf, part=()):
            return tuple(n for _, n in part) or tuple(int(d.value) for d in buf.shape[-2:])
        (m, k) = dims(a, s.a_part)[::-1] if s.transpose_a else dims(a, s.a_part)
        (k2, n) = dims(b, s.b_part)[::-1] if s.transpose_b else dims(b, s.b_part)
        if k != k2 or dims(c) != (m, n):
            self.fail(s, f"shapes do not chain: A is {'K x M' if s.transpose_a else 'M x K'} "
                         f"{dims(a, s.a_part)}, B is {'N x K' if s.transpose_b else 'K x N'} "
                         f"{dims(b, s.b_part)}, "
                         f"C is {dims(c)}")
        if a.dtype != b.dtype and not any(a.dtype in pair and b.dtype in pair for pair in MIXED):
            self.fail(s, f"A is {a.dtype} and B is {b.dtype}; the operands must have one dtype "
                         "(or both float8, or both 8-bit integers)")
        a_mn, b_mn = s.transpose_a, not s.transpose_b
        family, why = self.family(a.dtype, c.dtype, not (a_mn or b_mn))
        if family == "simt":
            self.no_fallback(s, family, why, a.dtype, m, n)
            if {a.dtype, b.dtype} & set(INTS4):  # (no scalar 4-bit elements in CuTe DSL)
                self.fail(s, f"T.gemm on {a.dtype} operands runs on mma.sync only, and here {why}")
            self.plan_simt(s, a, b, why)
            return "simt"
        if k % MMA_INSTR_K[a.dtype]:
            self.fail(s, f"K = {k} is not a multiple of {MMA_INSTR_K[a.dtype]}, the MMA's K for "
                         f"{a.dtype}")
        # mma.sync with A from registers puts every warp along M: each warp's A rows are
        # its accumulator rows, with K whole (register r of the A fragment holds the
        # (i, k) of register r of an accumulator with K columns)
        wg_warps = None if self.threads % WARPGROUP else \
            wgmma_warps(m, n, self.threads // WARPGROUP, s.policy)
        if family == "wgmma" and a.dtype in MMA_TYPES and (
                wg_warps is None or not all(wgmma_part_swizzle(s, w, o.dtype, wg_warps, m, n)
                                            for w, o in (("A", a), ("B", b))) or
                not all(self.swizzled_rows(o) for o in (a, b) if o.scope == "shared")) and \
                self.threads % WARP == 0 and mma_warps(m, n, self.threads // WARP, s.policy, a_regs):
            # wgmma cannot tile it with these threads, or cannot read an operand (the
            # warpgroups' parts of an MN-major one: 24 columns of 16-bit B each; a shared
            # tile no swizzle chunk tiles: B stored (K, N) with 8 or 24 columns of 16-bit
            # values, which TileLang reads unswizzled): warp mma.sync, which reads such rows
            family = "mma"
        if family == "wgmma" and id(s) in self.moved:
            family = "mma"  # (with the T.gemms it shares rows with: shared_partitions)
        if family == "wgmma" and a.dtype in ("int8", "uint8", "float8_e4m3", "float8_e5m2") \
                and not s.wgmma_only and (
                self.threads % WARPGROUP or
                wgmma_warps(m, n, self.threads // WARPGROUP, s.policy) is None):
            # float8: TileLang runs it on warp mma.sync (sm_89+), for which CuTe DSL has no
            # atom; int8: mma.sync cannot tile it either (above): CUDA cores
            why = (f"wgmma cannot tile {m} x {n} with {self.threads} threads (warpgroups of "
                   f"{WARPGROUP}, each 64-row steps, policy {s.policy}), " +
                   (f"nor can mma.sync ({self.threads // WARP} warps of 16 x 8 steps)"
                    if a.dtype in MMA_TYPES else
                    f"and CuTe DSL has no warp-level mma.sync for {a.dtype}"))
            self.plan_simt(s, a, b, why)
            return "simt"
        self.no_fallback(s, family, why, a.dtype, m, n)
        if family == "wgmma":
            if self.threads % WARPGROUP:
                mma = ""
                if a.dtype in MMA_TYPES and self.threads % WARP == 0:
                    # (the mma.sync fallback above found no arrangement either)
                    mma = (f"; and on mma.sync no arrangement of {self.threads // WARP} warps "
                           f"tiles {m} x {n} in 16 x 8 steps with policy {s.policy} (each "
                           "warp a multiple of 16 rows and 8 columns, as TileLang's)")
                self.fail(s, ("No valid warp partition (TileLang's words): " if mma else "") +
                          f"wgmma runs on warpgroups of {WARPGROUP} threads; the block has "
                          f"{self.threads}{mma}")
            wg = self.threads // WARPGROUP
            warps = wgmma_warps(m, n, wg, s.policy)
            if warps is None:
                why = []
                if s.policy != "FullCol":
                    why.append(f"M = {m} is not a multiple of 64 x {wg} warpgroups along M")
                if s.policy != "FullRow":
                    why.append(f"N = {n} does not split into {wg} warpgroups of a multiple of 8 "
                               "columns")
                mma = ""
                if a.dtype in MMA_TYPES and self.threads % WARP == 0:
                    # (the mma.sync fallback above, TileLang's for such tiles, found none either)
                    mma = (f"; nor does any arrangement of {self.threads // WARP} warps on "
                           f"mma.sync tile it in 16 x 8 steps (each warp a multiple of 16 rows "
                           "and 8 columns, as TileLang's)")
                self.fail(s, f"No valid warp partition (TileLang's words): no arrangement "
                             f"of {wg} warpgroup(s) tiles {m} x {n} with "
                             f"policy {s.policy}: {' and '.join(why)}; each warpgroup takes "
                             f"64-row steps{mma}; change the tile, the thread count or the policy")
            need = wgmma_instruction_regs(n // warps[1], c.dtype) + WGMMA_SPARE_REGS
            cap = target(self.arch).launch_regs(self.scope.num_threads)
            if need > cap:
                self.fail(s, f"each of the {wg} warpgroup(s) takes {m // warps[0]} x "
                             f"{n // warps[1]} of the {m} x {n} accumulator '{c.name}' (policy "
                             f"{s.policy}); its wgmma instruction holds "
                             f"{need - WGMMA_SPARE_REGS} {c.dtype} registers a thread and needs "
                             f"about {WGMMA_SPARE_REGS} more, over the {cap} a thread of a "
                             f"{self.scope.num_threads}-thread block is compiled with (ptxas: "
                             "'Insufficient registers'); split N over more warpgroups "
                             "(policy FullCol / Square), or use a narrower tile or fewer threads")
            if a.dtype in ("int8", "uint8") and not (
                    (n // warps[1]) % 16 == 0 or n // warps[1] in (8, 24)):
                self.fail(s, f"each of {warps[1]} warpgroup(s) along N takes {n // warps[1]} "
                             f"columns; wgmma on {a.dtype} takes 8, 24 or a multiple of 16")
            movable = a.dtype in MMA_TYPES and b.dtype in MMA_TYPES and not s.wgmma_only and \
                self.threads % WARP == 0
            alone = mma_warps(m, n, self.threads // WARP, s.policy) if movable else None
            a0 = self.buffers[s.a]  # (before staging)
            self.planned[id(s)] = (m, n, alone, (self.first, self.threads),
                                   a0.scope == "fragment" and self.rs_form(s, a0, b, c),
                                   family, movable)
        else:
            if self.threads % WARP:
                self.fail(s, f"mma.sync runs on whole warps; the block has {self.threads} threads")
            warps = self.forced.get(id(s)) or \
                mma_warps(m, n, self.threads // WARP, s.policy, a_regs)
            a0 = self.buffers[s.a]  # (before staging)
            self.planned[id(s)] = (m, n, warps, (self.first, self.threads),
                                   a0.scope == "fragment" and self.rs_form(s, a0, b, c),
                                   family, True)
            if warps is None:
                self.fail(s, f"No valid warp partition (TileLang's words): no arrangement of "
                             f"{self.threads // WARP} warps tiles {m} x {n} in 16 x 8 steps "
                             f"with policy {s.policy} (each warp a multiple of 16 rows and 8 "
                             "columns, as TileLang's; with A from registers every warp along "
                             "M)")
        for buf, what in ((a, "A"), (b, "B")):
            if buf is a and a_regs:
                self.set_layout(s, a.name, N.Layout("mma", threads=self.threads, mma=family,
                                                    warps=warps, operand="A",
                                                    first_thread=self.first))
                continue
            rows, cols = (int(d.value) for d in buf.shape[-2:])
            row_bytes = storage_bytes(buf.dtype, cols)  # (int4: two elements a byte)
            # the chunks must also tile every part of the buffer some T.gemm reads
            bounds = self.part_bounds.get(buf.name, row_bytes)
            swizzle = operand_swizzle(math.gcd(row_bytes, bounds))
            given = self.allocs[buf.name].layout  # the program's (T.annotate_layout, layout=)
            if family == "wgmma":
                swizzle = self.warpgroup_swizzle(swizzle, buf, what, s, warps, m, n)
            if family == "mma" and given is None:
                # (a chunk width the warps' tile along a chunked MN dim can be cut from; else
                # the rows unswizzled, as ldmatrix reads them)
                mn_major = s.transpose_a if what == "A" else not s.transpose_b
                swizzle = self.warp_swizzle(swizzle, buf, mn_major, what, warps, n)
                if not swizzle and rows % 8 == 0 and (row_bytes) % 16 == 0 and \
                        bounds % (row_bytes) == 0:
                    self.check_rows(s, buf, what, s.a_part if buf is a else s.b_part)
                    self.set_layout(s, buf.name, N.Layout("row_major"))
                    continue
            if not swizzle or rows % 8:
                self.fail(s, self.unswizzled(buf, what, swizzle))
            self.check_rows(s, buf, what, s.a_part if buf is a else s.b_part)
            if given is not None and given.kind == "tma_swizzled" and \
                    math.gcd(row_bytes, bounds) % given.swizzle:
                self.fail(s, f"{what} ('{buf.name}') has a {given.swizzle}-byte swizzle from the "
                             f"program, and a part of it T.gemm reads starts or ends within a "
                             f"{given.swizzle}-byte chunk (a multiple of {bounds} bytes into a "
                             f"row); annotate a {swizzle}-byte swizzle or leave it to tilecute")
            if given is not None and given.kind == "tma_swizzled" and \
                    row_bytes % given.swizzle == 0:
                swizzle = given.swizzle  # a narrower swizzle than the widest: as asked
            elif given is not None and given.kind != "tma_swizzled":
                self.fail(s, f"{what} ('{buf.name}') has layout {given.kind} from the program "
                             "(T.annotate_layout or layout=), but T.gemm reads shared operands "
                             "from a TMA swizzle (make_swizzled_layout, make_*_bank_swizzled_"
                             "layout); annotate one of those or leave the layout to tilecute")
            self.set_layout(s, buf.name, N.Layout("tma_swizzled", swizzle=swizzle))
        self.set_layout(s, c.name, N.Layout("mma", threads=self.threads, mma=family, warps=warps,
                                            first_thread=self.first))
        return family

    def swizzled_rows(self, buf: N.Buffer) -> int:
        """The widest swizzle whose chunks tile the rows of the shared operand ``buf`` (and
        the column ranges T.gemms read of it), 0 where none does or its row count is no
        multiple of 8: the layouts a tensor-core operand takes beside mma.sync's row-major
        one (:meth:`plan`)."""
        rows, cols = (int(d.value) for d in buf.shape[-2:])
        row_bytes = storage_bytes(buf.dtype, cols)  # (int4: two elements a byte)
        swizzle = operand_swizzle(math.gcd(row_bytes, self.part_bounds.get(buf.name, row_bytes)))
        return swizzle if rows % 8 == 0 else 0

    def unswizzled(self, buf: N.Buffer, what: str, swizzle: int = 0) -> str:
        """Why the shared operand ``buf`` cannot be read with ``swizzle`` (0: none tiles its
        rows, :meth:`swizzled_rows`; else its row count is no multiple of 8)."""
        rows, cols = (int(d.value) for d in buf.shape[-2:])
        row_bytes = storage_bytes(buf.dtype, cols)
        bounds = self.part_bounds.get(buf.name, row_bytes)
        return (f"{what} ('{buf.name}') is {rows} x {cols} {buf.dtype}: its rows must be a "
                "multiple of 32 bytes and its row count a multiple of 8"
                + ("" if swizzle or bounds % row_bytes == 0 else
                   f"; and the column ranges T.gemm reads of it (at a multiple of {bounds} "
                   "bytes) must start and end on 32-byte chunks of the swizzled layout"))

    def a_from_registers(self, s: N.Gemm, a: N.Buffer, b: N.Buffer, c: N.Buffer) -> bool:
        """Whether an MMA reads the fragment ``a`` from registers as it is: K-major (no
        transpose_A), 16-bit (wgmma's RS form or mma.sync with every warp along M) or 8-bit
        integers (wgmma's RS form) on a tensor-core family that tiles the T.gemm so."""
        if not self.rs_form(s, a, b, c):
            return False
        k_major = s.transpose_b  # (A is K-major)
        family, _ = self.family(a.dtype, c.dtype, k_major)
        m, n = (int(d.value) for d in c.shape)
        # wgmma reads A from registers when every warpgroup lies along M: one with a
        # neighbour along N would need all of its rows' K columns, which a fragment split
        # over the warpgroups along N (T.copy(s, p) of an accumulator of that policy) does
        # not hold in its registers; such an A goes through shared memory
        # (and whose K columns one instruction's A takes: the RS form reads the registers of
        # an accumulator of at most 256 columns, see tcm.a_fragment)
        warps = wgmma_warps(m, n, self.threads // WARPGROUP, s.policy) \
            if self.threads % WARPGROUP == 0 else None
        wgmma_fits = warps is not None and warps[1] == 1 and int(a.shape[1].value) <= 256
        mma_fits = self.threads % WARP == 0 and \
            mma_warps(m, n, self.threads // WARP, s.policy, True) is not None
        if id(s) in self.forced:  # one partition with the T.gemms it shares rows with
            mma_fits = self.forced[id(s)][1] == 1
        if id(s) in self.moved:  # (on mma.sync with them)
            return mma_fits
        if family == "wgmma":  # (mma.sync reads it only where wgmma cannot tile the T.gemm)
            return wgmma_fits or (a.dtype in MMA_TYPES and mma_fits and warps is None)
        return family == "mma" and mma_fits

    @staticmethod
    def rs_form(s: N.Gemm, a: N.Buffer, b: N.Buffer, c: N.Buffer) -> bool:
        """Is ``a`` a form of A an MMA may read from registers (K-major, 2-D, whole, 16-bit,
        B in shared memory)?"""
        return not (s.transpose_a or s.a_index or s.a_part or a.ndim != 2 or
                    b.scope != "shared" or c.ndim != 2 or a.dtype not in RS_TYPES)

    def shared_partitions(self) -> tuple[dict[int, tuple[int, int]], frozenset]:
        """One warp partition for the mma.sync T.gemms whose register layouts meet: an
        accumulator two T.gemms accumulate into (C @ state + P @ x, P from registers), one
        that is copied into another T.gemm's A fragment, or whose row
        statistics (``m[i]`` beside ``acc[i, j]``) another accumulator's rows use too
        (attention: S = Q K^T gives the row max and sum that rescale O = P V).  Planned
        alone, each takes its own policy's partition, and a register A fragment puts every
        warp along M; where they differ the rows meet two register layouts, which no
        layout pass can reconcile (TileLang's own inference refuses such a T.copy(S, P)
        with a layout conflict).  Returns id(T.gemm) -> warps for each group that
        disagrees: every warp along M when a member reads A from registers and that tiles
        every member (flash attention's layout, FA2's), else the first member's partition
        that tiles them all (A fragments of a partition with warps along N go through
        shared memory), each warp a multiple of 16 x 16 where one does, else of 16 x 8; a
        group no partition tiles keeps its own (the layout pass then names the fragment).

        T.gemms on wgmma whose row statistics meet those of one on mma.sync (P @ V on
        mma.sync because wgmma cannot read V's 40-column parts at head dim 80, Q K^T on
        wgmma) join it on mma.sync in such a partition, as no wgmma layout is an mma.sync
        one; their ids are the second member of the pair returned.  They stay on wgmma
        where a member cannot leave it (T.wgmma_gemm, float8 operands) or no partition
        tiles the group, and where only whole tiles meet (``c2[i, j] += c1[i, j]``: the
        layout pass stages the wgmma one's through shared memory)."""
        moved = set()
        for _, members in self.linked_groups(linked_fragments(self.scope.body, rows_only=True),
                                             lambda g: True):
            plans = [self.planned[id(g)] for g in members]
            if {p[5] for p in plans} == {"wgmma", "mma"} and all(p[6] for p in plans):
                moved |= {id(g) for g, p in zip(members, plans) if p[5] == "wgmma"}
        forced = {}
        for key, members in self.linked_groups(linked_fragments(self.scope.body),
                                               lambda g: self.planned[id(g)][5] == "mma"
                                               or id(g) in moved):
            plans = [self.planned[id(g)] for g in members]
            joining = {id(g) for g in members} & moved
            if not joining and len({p[2] for p in plans}) < 2:
                continue
            warps = key[1] // WARP

            def tiles(w, step):
                return all(m % (16 * w[0]) == 0 and n % (step * w[1]) == 0 for m, n, *_ in plans)
            order = ([(warps, 1)] if any(p[4] for p in plans) else []) + \
                [p[2] for p in plans if p[2] is not None]
            choice = next((w for w in order if tiles(w, 16)), None) or \
                next((w for w in order if tiles(w, 8)), None)
            if choice is not None:
                forced.update({id(g): choice for g in members})
        return forced, frozenset(moved & forced.keys())

    def linked_groups(self, root: dict[str, str], take) -> list[tuple[tuple, list]]:
        """The planned T.gemms ``take`` accepts, in groups whose accumulators (or A
        fragments) ``root`` (:func:`linked_fragments`) links, each with the threads it
        runs on (the block's, or a T.ws region's: (first, count))."""
        groups: dict[tuple, list] = {}
        for g, _ in self.gemms:
            if id(g) not in self.planned or not take(g):
                continue  # (SIMT T.gemms keep theirs)
            key = self.planned[id(g)][3]
            names = [g.c] + ([g.a] if self.buffers[g.a].scope == "fragment" else [])
            hit = [k for k in groups if k[0] == key and any(root.get(x, x) in k[1] for x in names)]
            merged = [g] + [h for k in hit for h in groups.pop(k)]
            roots = frozenset(root.get(x, x) for x in names) | \
                frozenset(r for k in hit for r in k[1])
            groups[(key, roots)] = merged
        return [(key, members) for (key, _), members in groups.items()]

    def stage(self, s: N.Gemm, frag: N.Buffer) -> N.Buffer:
        """A shared buffer of ``frag``'s shape and dtype that a copy fills from the fragment
        just before the T.gemm (TileLang's MMA and FMA lowerings stage such operands
        through shared memory too); the T.gemm then reads it as a shared operand."""
        name, i = f"{frag.name}_shared", 0
        while name in self.buffers:
            i += 1
            name = f"{frag.name}_shared{i}"
        buf = N.Buffer(name, frag.dtype, frag.shape, "shared")
        alloc = N.Allocate(buf, loc=self.allocs[frag.name].loc)
        self.buffers[name], self.allocs[name] = buf, alloc
        self.staged.setdefault(id(s), []).append((frag.name, alloc))
        return buf

    def no_fallback(self, s: N.Gemm, family: str, why: str, dtype: str, m: int, n: int) -> None:
        """T.wgmma_gemm (``wgmma_only``) runs on wgmma or is an error, never on another
        family (TileLang's rule: it fails rather than fall back)."""
        if not s.wgmma_only or family == "wgmma":
            return
        if family == "simt":
            reason = why
        elif dtype not in WGMMA_TYPES:
            reason = (f"wgmma takes no {dtype} operands (tf32 runs on mma.sync: CuTe DSL has no "
                      "tf32 wgmma atom)")
        elif not arch_at_least(self.arch, 90):
            reason = f"wgmma needs sm_90a; the target is {self.arch}"
        elif not self.wgmma:
            reason = "wgmma is disabled here (disable_wgmma)"
        else:
            reason = (f"wgmma cannot tile {m} x {n} with {self.threads} threads (warpgroups "
                      f"of {WARPGROUP}, each 64-row steps, policy {s.policy})")
            warps = None if self.threads % WARPGROUP else \
                wgmma_warps(m, n, self.threads // WARPGROUP, s.policy)
            if warps is not None and not wgmma_part_swizzle(s, "B", dtype, warps, m, n):
                part = n // warps[1]
                reason = (f"its {warps[1]} warpgroups along N (policy {s.policy}) take {part} "
                          f"columns each of B, stored (K, N): {part * DTYPES[dtype].bytes} bytes, "
                          "which no 32-, 64- or 128-byte swizzle chunk tiles (wgmma reads an "
                          "MN-major operand in whole chunks)")
            for what, name in (("A", s.a), ("B", s.b)):
                buf = self.buffers[name]
                if warps is not None and buf.scope == "shared" and not self.swizzled_rows(buf):
                    reason = f"{self.unswizzled(buf, what)} (wgmma reads its shared operands swizzled)"
        self.fail(s, f"T.wgmma_gemm runs on wgmma only: {reason}; T.gemm would run it on "
                     f"{family if family == 'simt' else 'mma.sync'}")

    def warpgroup_part_bounds(self, gemms: list) -> None:
        """Each warpgroup's part of a shared operand a wgmma T.gemm reads MN-major split
        along MN joins the operand's part bounds, so that every T.gemm reading the buffer
        takes one swizzle whose chunks tile those parts too (a 64-column bf16 KV tile read
        K-major by Q K^T and MN-major by P @ V on two warpgroups, 32 columns each: 64-byte
        chunks for both)."""
        if not (self.wgmma and arch_at_least(self.arch, 90)):
            return
        for g, region in gemms:
            threads = region.num_threads if region is not None else self.scope.num_threads
            c = self.buffers[g.c]
            if id(g) in self.moved or threads % WARPGROUP or g.policy not in N.GEMM_POLICIES \
                    or len(c.shape) != 2 or not all(isinstance(d, N.Const) for d in c.shape):
                continue  # (plan refuses a policy that is not one; moved: on mma.sync)
            m, n = (int(d.value) for d in c.shape)
            warps = wgmma_warps(m, n, threads // WARPGROUP, g.policy)
            for what, name in (("A", g.a), ("B", g.b)):
                buf = self.buffers[name]
                if warps is None or buf.scope != "shared" or buf.dtype not in WGMMA_TYPES:
                    continue
                part = wgmma_part_swizzle(g, what, buf.dtype, warps, m, n)
                if 0 < part < 128:
                    self.part_bounds[name] = math.gcd(self.part_bounds.get(name, 0), part)

    def warpgroup_swizzle(self, widest: int, buf: N.Buffer, what: str, s: N.Gemm,
                          warps: tuple, m: int, n: int) -> int:
        """The widest swizzle up to ``widest`` whose chunks also tile each warpgroup's part
        of an MN-major wgmma operand split over warpgroups along its MN dim (B stored
        (K, N) cut into 48-column parts of a 96-column tile: 32-byte chunks, as CuTe DSL
        cannot cut 64-byte ones in halves)."""
        part = wgmma_part_swizzle(s, what, buf.dtype, warps, m, n)
        if widest and not part:  # (and mma.sync could not take the T.gemm instead)
            dim, fix = ("M", "transpose_A=False") if what == "A" else ("N", "transpose_B=True")
            parts = warps[0] if what == "A" else warps[1]
            extent = (m if what == "A" else n) // parts
            self.fail(s, f"{what} ('{buf.name}') is stored {dim}-major and each of the {parts} "
                         f"warpgroups along {dim} (policy {s.policy}) takes {extent} of its "
                         f"{dim} elements ({extent * DTYPES[buf.dtype].bytes} bytes), which no "
                         "32-, 64- or 128-byte swizzle chunk tiles (wgmma reads an MN-major "
                         f"operand in whole chunks); store it K-major ({fix}), or change the "
                         "policy, the thread count or the tile")
        return math.gcd(widest, part) if widest else 0

    @staticmethod
    def warp_swizzle(widest: int, buf: N.Buffer, mn_major: bool, what: str, warps: tuple,
                     n: int) -> int:
        """The widest swizzle up to ``widest`` under which CuTe DSL can cut an mma.sync
        operand's MN dim into the warps' tiles, or 0.  A chunked MN dim (an MN-major
        operand: its chunks of ``swizzle`` bytes lie along MN) is cut in tiles of ``P`` =
        warps x step elements (A: 16-row steps; B: ``mma_n_step`` columns) of ``count``
        steps: a chunk must hold whole tiles, or a tile whole chunks of whole steps (CuTe
        DSL aborts the process partitioning B over 3, 6 or 12 warps along N with 64-column
        chunks otherwise).  A K-major operand's MN dim is its rows (groups of 8): any."""
        if not mn_major or not widest:
            return widest
        esize = DTYPES[buf.dtype].bytes
        if what == "A":
            step, count = 16, warps[0]
        else:
            count = warps[1]
            step = 16 if n % (16 * count) == 0 and count & (count - 1) == 0 else 8  # (tcm.mma_n_step)
        tile = step * count
        for swizzle in (x for x in TMA_SWIZZLES if x <= widest):
            width = swizzle // esize
            if width % tile == 0 or tile % width == 0 and width % step == 0 and \
                    count % (width // step) == 0:
                return swizzle
        return 0

    def check_rows(self, s: N.Gemm, buf: N.Buffer, what: str, part: tuple) -> None:
        """A part of a swizzled operand starts and ends on a multiple of 8 rows."""
        if part and (known_multiple(part[0][0]) % 8 or part[0][1] % 8):
            self.fail(s, f"{what} is rows {expr_str(part[0][0])}.. ({part[0][1]} rows) of "
                         f"'{buf.name}': a range of rows of a swizzled operand starts and ends "
                         "on a multiple of 8 rows (the swizzle pattern's period)")

    def family(self, dtype: str, acc: str, k_major: bool) -> tuple[str, str]:
        """The MMA family for ``dtype`` operands accumulating in ``acc`` (before the tile
        shapes are checked), and why not a tensor-core one when it is ``simt``."""
        accs = MMA_ACCUMULATORS.get(dtype, ())
        hopper = arch_at_least(self.arch, 90) and self.wgmma
        if acc in accs:
            if dtype in WGMMA_TYPES and hopper and (dtype in ("float16", "bfloat16") or k_major):
                return "wgmma", ""
            if dtype in MMA_TYPES and arch_at_least(self.arch, 80) and (
                    dtype in ("float16", "bfloat16") or k_major):
                return "mma", ""
        if not accs:
            return "simt", f"no tensor-core MMA takes {dtype} operands"
        if acc not in accs:
            return "simt", (f"tensor-core MMAs on {dtype} accumulate in {' or '.join(accs)}, "
                            f"not {acc}")
        if not k_major and dtype not in ("float16", "bfloat16"):
            return "simt", (f"the tensor cores read {dtype} operands K-major only (A as (M, K), "
                            "B as (N, K) with transpose_B=True)")
        if dtype in WGMMA_TYPES and dtype not in MMA_TYPES:
            return "simt", f"{dtype} operands need wgmma (sm_90a){'' if self.wgmma else ', disabled here'}"
        return "simt", f"{dtype} operands need mma.sync (sm_80+)"

    def plan_simt(self, s: N.Gemm, a: N.Buffer, b: N.Buffer, why: str) -> None:
        """The SIMT fallback: every thread computes its own elements of C (whatever layout
        the layout pass gives the fragment: blocked, or replicated) from A and B in shared
        memory, with scalar multiply-adds in C's dtype.  The operands stay row-major (or
        the TMA swizzle the program gave them)."""
        for buf, what in ((a, "A"), (b, "B")):
            given = self.allocs[buf.name].layout  # the program's (T.annotate_layout, layout=)
            if given is None:
                self.simt_operands.add(buf.name)  # row-major, unless a tensor-core T.gemm swizzles it
            elif given.kind not in ("row_major", "tma_swizzled"):
                self.fail(s, f"{what} ('{buf.name}') has layout {given.kind} from the program, "
                             f"and this T.gemm runs on CUDA cores ({why}), reading shared operands "
                             "row-major or TMA-swizzled")
        self.simt_c[s.c] = s

    def run(self) -> N.KernelScope:
        families: dict[int, str] = {}  # id(T.gemm) -> its family
        gemms = self.gemms = self.collect(self.scope.body)
        for g, _ in gemms:
            for name, part in ((g.a, g.a_part), (g.b, g.b_part)):
                if part:
                    (start, n), bits = part[1], DTYPES[self.buffers[name].dtype].bits
                    bound = math.gcd(known_multiple(start) * bits, n * bits) // 8  # (bytes)
                    self.part_bounds[name] = math.gcd(self.part_bounds.get(name, 0), bound)
        self.warpgroup_part_bounds(gemms)
        for g, region in gemms:
            # in a T.ws region the MMA is its warpgroups' (TileLang's thread range there)
            self.threads = region.num_threads if region is not None else self.scope.num_threads
            self.first = region.first_thread if region is not None else 0
            families[id(g)] = self.plan(g)
        for name in self.simt_operands:  # (SIMT reads a tensor-core operand's swizzle too)
            self.layouts.setdefault(name, N.Layout("row_major"))
        for g, _ in gemms:  # parts of swizzled SIMT operands: on chunks and 8-row groups
            for name, part, what in ((g.a, g.a_part, "A"), (g.b, g.b_part, "B")):
                layout = self.layouts.get(name) or self.allocs[name].layout
                if not part or families[id(g)] != "simt" or layout is None or \
                        layout.kind != "tma_swizzled":
                    continue
                if self.part_bounds[name] % layout.swizzle:
                    self.fail(g, f"{what} is part of '{name}', whose columns it starts or ends "
                                 f"within a {layout.swizzle}-byte chunk of its swizzle")
                self.check_rows(g, self.buffers[name], what, part)
        for c, g in self.simt_c.items():
            if c in self.layouts:
                self.fail(g, f"C ('{c}') is also accumulated by a tensor-core T.gemm, whose "
                             "register layout this T.gemm on CUDA cores does not compute in")
        if not families:
            return self.scope
        scope = _SetLayouts(self.layouts, families, self.staged).visit_kernel(self.scope)
        staging = [dataclasses.replace(a, layout=self.layouts.get(a.buffer.name))
                   for pairs in self.staged.values() for _, a in pairs]
        if not staging:
            return scope
        # the staging tiles at the kernel's top level (shared memory is allocated there),
        # after the allocations heading it, wherever their fragments are allocated
        body = list(scope.body)
        at = next((i for i, t in enumerate(body) if not isinstance(t, (N.Allocate, N.Let))),
                  len(body))
        return dataclasses.replace(scope, body=tuple(body[:at] + staging + body[at:]))


class _SetLayouts(StmtMutator):
    """Each T.gemm's family, the layouts, and the staging of fragment operands: a copy into
    the shared buffer before the T.gemm, which reads it (``_Kernel.run`` allocates the
    buffers at the kernel's top level)."""

    def __init__(self, layouts: dict[str, N.Layout], families: dict[int, str],
                 staged: dict[int, list]):
        self.layouts, self.families = layouts, families
        self.staged = staged

    def visit_gemm(self, s: N.Gemm):
        g = dataclasses.replace(s, family=self.families[id(s)])
        copies = []
        for frag, alloc in self.staged.get(id(s), ()):
            staged = alloc.buffer.name
            zeros = tuple(N.as_expr(0) for _ in alloc.buffer.shape)
            copies.append(N.Copy(N.Region(frag, zeros), N.Region(staged, zeros), loc=s.loc))
            g = dataclasses.replace(g, a=staged if g.a == frag else g.a,
                                    b=staged if g.b == frag else g.b)
        return copies + [g] if copies else g

    def visit_allocate(self, s: N.Allocate):
        layout = self.layouts.get(s.buffer.name)
        return s if layout is None else dataclasses.replace(s, layout=layout)


def linked_fragments(body, rows_only: bool = False) -> dict[str, str]:
    """Fragments whose register layouts must agree row by row, as sets (name -> a
    representative): 2-D fragments a ``T.Parallel(i, j)`` nest walks at ``[i, j]`` or a
    whole ``T.copy`` moves between, 1-D ones such a nest reads or writes at ``[i]`` (row
    statistics), a row reduction's source and output, and 1-D fragments a
    ``T.Parallel(i)`` nest or a ``T.copy`` combines.  ``rows_only``: linked through row
    statistics alone (2-D fragments only where a nest walking them reads or writes a 1-D
    one at ``[i]``; no copies between 2-D fragments): a subset of the links without it."""
    parent: dict[str, str] = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(names):
        names = list(names)
        for x in names[1:]:
            parent[find(x)] = find(names[0])

    frags = {s.buffer.name: s.buffer for s in walk_stmts(body)
             if isinstance(s, N.Allocate) and s.buffer.scope == "fragment"}
    nested = set()
    for s in walk_stmts(body):
        if isinstance(s, N.For) and s.kind == "parallel" and id(s) not in nested:
            loops = parallel_nest(s)
            nested |= {id(lp) for lp in loops}
            if len(loops) > 2:
                continue
            names = [lp.var.name for lp in loops]
            at = [b for b, idx, _ in accesses(loops[-1].body) if b in frags
                  and frags[b].ndim == len(names)
                  and [getattr(x, "name", None) for x in idx] == names]
            rows = [b for b, idx, _ in accesses(loops[-1].body) if b in frags
                    and frags[b].ndim == 1 and len(idx) == 1
                    and getattr(idx[0], "name", None) == names[0]]
            if (at and rows) if rows_only and len(names) == 2 else (at or len(names) == 1):
                union(at + rows)
        elif isinstance(s, N.Copy) and s.src.buffer in frags and s.dst.buffer in frags and \
                not (rows_only and frags[s.src.buffer].ndim != 1):
            src, dst = frags[s.src.buffer], frags[s.dst.buffer]
            if src.shape == dst.shape and whole(s.src, src) and whole(s.dst, dst):
                union([src.name, dst.name])
        elif isinstance(s, N.Reduce) and s.src in frags and s.dst in frags and \
                frags[s.src].ndim == 2 and frags[s.dst].ndim == 1 and s.dim in (1, -1):
            union([s.src, s.dst])
    return {x: find(x) for x in parent}


def select_mma(func: N.PrimFunc, arch: str, wgmma: bool = True) -> N.PrimFunc:
    """Plan every T.gemm; ``wgmma=False`` (the ``disable_wgmma`` option) keeps sm_90a on
    mma.sync.  A kernel whose mma.sync T.gemms must share a warp partition
    (:meth:`_Kernel.shared_partitions`) is planned again with it."""
    kernels = []
    for k in func.kernels:
        first = _Kernel(func, k, arch, wgmma, first_pass=True)
        scope = first.run()
        forced, moved = first.shared_partitions()
        again = forced or first.deferred  # (a conflict left unreconciled is refused there)
        kernels.append(_Kernel(func, k, arch, wgmma, forced, moved).run() if again else scope)
    return dataclasses.replace(func, kernels=tuple(kernels))
