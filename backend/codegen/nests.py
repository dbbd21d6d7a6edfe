"""T.Parallel nests as CuTe DSL source text.

A nest spreads its iterations over the block's threads; each thread step runs ``width``
consecutive iterations of the innermost loop (lanes).  Accesses the vectorize pass chose
(``For.vectors``) become 128-bit loads/stores or cp.async copies through registers; the body runs once per
lane; where a vector may cross a tensor's end a per-lane bounds-checked path runs
instead.  Nests over T.gemm accumulators walk each thread's own registers; replicated
nests run every iteration in every thread.  Imports no CUTLASS.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..ir import nodes as N
from ..runtime.dtypes import DTYPES
from ..ir.visitor import substitute, walk_nodes, walk_stmts
from ..transform.analysis import PURE_CALLS, accesses, let_values, mentions, parallel_nest, plain_statements, value_range
from ..transform.layout_inference import int_value, owned_registers, packed_divisor
from .expr import PACKED, PREC, Py, chain, cute_type, register_type
from .memory import flat_index, vector_view
from .source import ident

if TYPE_CHECKING:
    from .kernel import KernelEmitter

UNROLL_LIMIT = 8  # parallel nests with at most this many iterations per thread unroll fully
REPLICATED_UNROLL = 256  # replicated nests up to this many iterations unroll fully

# The rescale of an accumulator by row factors is guarded (skipped where every factor is 1)
# only while the thread's fragments take at most this many 32-bit registers: TileLang's
# flash-attention example with one warpgroup holding 128 x 128 scores and output (320
# registers of fragments a thread) spilled 1608 bytes with the guard and 1152 without.
GUARD_REGISTERS = 224


class NestEmitter:
    """Which register a fragment access inside the current nest body means: ``lane`` (this
    lane's index text), ``step`` ((step text, lanes) of a nest over blocked fragments),
    ``mma_reg`` (the register index of a nest over accumulators), and ``vector`` (each
    vector access of the body -> its register temporary)."""

    def __init__(self, kernel: KernelEmitter):
        self.k = kernel
        self.lane: str | None = None
        self.step: tuple[str, int] | None = None
        self.mma_reg: str | None = None
        self.mma_frag: str | None = None  # the accumulator an mma_reg indexes
        self.row_reg: str | None = None  # the row register of a nest over row fragments
        self.col_reg: str | None = None  # the first column register of a nest over column ones
        self.round: str | None = None  # the reduction round of a nest over row results' rows
        self.round_written: set = set()  # the fragments such a nest writes
        self.made: dict = {}  # the row results such a nest left (KernelEmitter.stmt keeps them)
        self.line_frag: str | None = None  # the row / column fragment such a nest walks
        self.vector: dict[tuple, str] = {}
        self.lets: dict[str, N.Expr] = {}  # the Lets of the innermost body being emitted
        self.loops: list | None = None  # the loops of the blocked nest being emitted
        # the loop variables of the nest being spread that are one value at every unrolled
        # step of a thread (``spread``): a vector load at them is read at the first step only
        self.steady: set = set()
        self.lanes_checked = False  # the lanes being emitted are the bounds-checked fast path

    # ---- registers ------------------------------------------------------------------------
    def register(self, name: str, indices, read: bool = False) -> str:
        """Source text of fragment ``name[indices]`` in this thread's registers.  A read
        of a small fragment every thread holds whole at an index of the distributed nest
        being emitted (``y[r] = s[r]`` after ``T.reduce_sum(x, s)``: the element depends on
        the thread) is ``tcr.pick``, a select over its registers, not an indexed register
        array (local memory)."""
        k = self.k
        buf = k.buffers[name]
        layout = k.layouts.get(name, N.Layout("replicated"))
        if layout.kind == "mma":
            if self.mma_reg is None:
                k.fail(None, f"internal: fragment '{name}' accessed outside its nest")
            lane = "" if self.lane in (None, "0") else f" + {self.lane}"
            return f"{ident(name)}[{self.mma_reg}{lane}]"
        if layout.kind == "mma_rows":
            if self.mma_reg is not None:  # the row of the accumulator register walked
                return f"{ident(name)}[tcrow.row_of({ident(self.mma_frag)}, {self.mma_reg})]"
            if self.row_reg is None:
                k.fail(None, f"internal: fragment '{name}' accessed outside its nest")
            return f"{ident(name)}[{self.row_reg}]"
        if layout.kind == "mma_cols":
            lane = "" if self.lane in (None, "0") else f" + {self.lane}"
            if self.mma_reg is not None:  # the column of the register walked
                return f"{ident(name)}[tcrow.col_of({ident(self.mma_frag)}, {self.mma_reg}{lane})]"
            if self.col_reg is None:
                k.fail(None, f"internal: fragment '{name}' accessed outside its nest")
            return f"{ident(name)}[{self.col_reg}{lane}]"
        if layout.kind == "blocked":
            if self.step is None or self.lane is None:
                k.fail(None, f"internal: fragment '{name}' accessed outside its nest")
            step, width = self.step
            special = self.owner_register(buf, layout, indices)
            if special is None:
                special = self.owned_register(buf, layout, indices)
            if special is not None:
                return f"{ident(name)}[{special}]"
            reg = self.lane if step == "0" else (
                f"{step} * {width} + {self.lane}" if width > 1 else step)
            return f"{ident(name)}[{reg}]"
        cached = self.row_result(name, indices) if read or self.round is not None else None
        if cached is not None:
            return cached
        if name in k.unshared:  # (its rows were not shared out: emit_cute emits again)
            k.rows_read.add(name)
        flat = flat_index(k.exprs, buf, indices)
        size = math.prod(int(d.value) for d in buf.shape) if all(
            isinstance(d, N.Const) for d in buf.shape) else 0
        if read and layout.kind == "replicated" and self.loops and 1 < size <= PICK_LIMIT and \
                any(mentions(tuple(indices), lp.var.name) for lp in self.loops):
            k.out.use("reduce")
            return f"tcr.pick({ident(name)}, {flat}, {size})"
        return f"{ident(name)}[{flat}]"

    def row_result(self, name: str, indices) -> str | None:
        """``d[i]`` read in a nest over ``(i, j)`` laid out as the source of the row
        reduction that last wrote ``d`` (rows held by lane groups: ``KernelEmitter.
        reduce_grouped``): at each step the thread's row is the one its reduction round of
        the same number computed, so the value is that round's register (a compile-time
        index), not ``d`` indexed by a row known at run time (local memory, TileLang's
        top-k example)."""
        hit = self.k.row_results.get(name)
        if hit is not None and self.round is not None:  # (a nest over the rows: over_row_results)
            return f"{hit[0]}[{self.round}]"
        if hit is None or self.step is None or self.mma_reg is not None or \
                self.row_reg is not None or not self.loops or len(self.loops) != 2:
            return None
        red, shape, v, threads = hit
        step, width = self.step
        if len(indices) != 1 or not isinstance(indices[0], N.Var) or \
                indices[0].name != self.loops[0].var.name or width != v or \
                threads != self.k.threads or \
                tuple(int(lp.extent.value) for lp in self.loops) != shape or \
                any(int(lp.start.value) for lp in self.loops):
            return None
        return f"{red}[{step}]"

    def owner_register(self, buf: N.Buffer, layout: N.Layout, indices):
        """The register of a blocked fragment read at an element the layout pass gave this
        thread by the nest's rows or columns (``special_access``), or None for the
        nest's own element: ``x[i]`` (one element a thread) in a nest over ``(i, j)``
        running whole rows a thread step is register ``step`` (row ``i = step * threads +
        tid``); ``b[k, j]`` (a ``(K, J)`` fragment, one column a thread) in a nest over
        ``j`` running one lane a step is register ``k * (J // threads) + step``; ``w[j]``
        (a ``(J,)`` fragment blocked with the nest's V, ``J`` whole rounds of the threads'
        V-element pieces) in a nest over ``(..., j)`` is register ``(step % (J / (threads
        V))) * V + lane``: in every row the thread meets the columns its step would give it
        in a nest over ``j`` alone; ``b[k, j]`` of a ``(K, J)`` one so blocked is that
        register of row ``k``, ``(k * (J / (threads V)) + step % (J / (threads V))) * V +
        lane``, in a nest over ``j`` alone too (``k`` an enclosing loop's, V > 1)."""
        loops, (step, width) = self.loops, self.step
        if not loops or len(indices) != buf.ndim:
            return None
        names = [lp.var.name for lp in loops]
        if (buf.ndim in (1, 2) and len(loops) >= 2 or buf.ndim == 2 and width > 1) and \
                isinstance(indices[-1], N.Var) and \
                indices[-1].name == names[-1] and layout.vector == width and \
                buf.shape[-1] == loops[-1].extent and \
                not (buf.ndim == 2 and any(mentions(indices[0], v) for v in names)):
            rounds = int(buf.shape[-1].value) // (layout.threads * width)
            reg = f"({step} % {rounds})" if rounds > 1 and step != "0" else "0"
            if buf.ndim == 2:  # b[k, j]: row k's pieces come k * rounds pieces in
                row = indices[0]
                if isinstance(row, N.Const):
                    first = str(int(row.value) * rounds) if row.value else "0"
                else:
                    first = self.k.exprs.operand(row, PREC["mul"])
                    first = first if rounds == 1 else f"{first} * {rounds}"
                reg = first if reg == "0" else (reg if first == "0" else f"{first} + {reg}")
                reg = f"({reg})" if "+" in reg and width > 1 else reg
            lane = self.lane or "0"
            reg = f"{reg} * {width}" if reg != "0" and width > 1 else reg
            return lane if reg == "0" else (reg if lane == "0" else f"{reg} + {lane}")
        c = packed_divisor(loops, buf, indices)
        if c and width == layout.vector * c:  # b[i, j // c]: the layout pass's fit_packed
            lane = self.lane or "0"
            part = "0" if lane == "0" else f"({lane}) // {c}"
            if step == "0":
                return part
            reg = f"{step} * {layout.vector}" if layout.vector > 1 else step
            return reg if part == "0" else f"{reg} + {part}"
        if layout.vector != 1:
            return None
        if buf.ndim == 1 and len(loops) == 2 and isinstance(indices[0], N.Var) and \
                indices[0].name == names[0] and width == int(loops[1].extent.value) and width > 1:
            return step
        if buf.ndim == 2 and len(loops) == 1 and width == 1 and \
                isinstance(indices[1], N.Var) and indices[1].name == names[0] and \
                not mentions(indices[0], names[0]):
            per = int(buf.shape[1].value) // layout.threads
            k = self.k.exprs.operand(indices[0], PREC["mul"]) if not isinstance(indices[0], N.Const) \
                else str(indices[0].value)
            outer = k if per == 1 else f"{k} * {per}"
            return outer if step == "0" else f"{outer} + {step}"
        return None

    def owned_register(self, buf: N.Buffer, layout: N.Layout, indices):
        """The register of a program-laid-out fragment read at an element of this thread
        other than the iteration's own (``acc[i, 63 - j]``; the layout pass proved it,
        :func:`owned_registers`), as a compile-time expression of the step and lane:
        ``c + a * step + b * lane`` where the registers are so, else the same modulo the
        fragment's register count (``(lane + 8) % 64``), else a table indexed by ``step *
        V + lane``; None for the iteration's own element."""
        loops, (step, width) = self.loops, self.step
        if not loops or width == layout.vector and \
                [i.name if isinstance(i, N.Var) else None for i in indices] == \
                [lp.var.name for lp in loops]:
            return None
        regs = owned_registers(loops, buf, layout, indices, width)
        if regs is None or regs == tuple(range(len(regs))) and width == layout.vector:
            return None
        lane = self.lane or "0"
        count = math.prod(int(d.value) for d in buf.shape) // layout.threads
        c = regs[0]
        b = regs[1] - c if width > 1 else 0
        a = regs[width] - c if len(regs) > width else 0
        for modulo in (None, count):
            def fits(s, l):
                r = c + a * s + b * l
                return regs[s * width + l] == (r if modulo is None else r % modulo)
            if all(fits(s, l) for s in range(len(regs) // width) for l in range(width)):
                terms = [str(c)] if c else []
                for coef, var in ((a, step), (b, lane)):
                    if coef and var != "0":
                        terms.append(f"{'- ' if coef < 0 else '+ ' if terms else ''}"
                                     f"{'' if abs(coef) == 1 else f'{abs(coef)} * '}{var}")
                text = " ".join(terms) or "0"
                return text if modulo is None else f"({text}) % {modulo}"
            if modulo is None:
                own_row = self.own_row_register(buf, layout, indices, regs)
                if own_row is not None:
                    return own_row
                a, b, c = a % count, b % count, c % count
                own_row = self.own_row_register(buf, layout, indices, regs)
                if own_row is not None:
                    return own_row
        table = ", ".join(map(str, regs))  # (no closed form found)
        at = lane if step == "0" else (f"{step} * {width} + {lane}" if width > 1 else step)
        return f"({table},)[{at}]"

    def own_row_register(self, buf: N.Buffer, layout: N.Layout, indices, regs):
        """``step * V + g(lane)`` for a read of the iteration's own row at column ``g(j)``
        (``acc[i, j ^ 1]``) where each thread step holds whole rows, of the fragment (``V``
        the row's length) and of the nest (its lanes its innermost extent), and the
        registers ``regs`` are so, else None."""
        loops, (step, width) = self.loops, self.step
        names = [lp.var.name for lp in loops]
        v = layout.vector
        if self.lane is None or int(buf.shape[-1].value) != v or \
                int(loops[-1].extent.value) != width or any(int(lp.start.value) for lp in loops) or \
                [i.name if isinstance(i, N.Var) else None for i in indices[:-1]] != names[:-1]:
            return None
        row = indices[-1]
        if any(mentions(row, x) for x in names[:-1]) or any(
                regs[s * width + lane] != s * v + int_value(row, {names[-1]: lane})
                for s in range(len(regs) // width) for lane in range(width)):
            return None
        subst = self.k.exprs.subst
        saved = subst.get(names[-1])
        subst[names[-1]] = self.lane
        try:
            col = self.k.exprs.operand(row, 0 if step == "0" else PREC["add"] + 1)
        finally:
            if saved is None:
                del subst[names[-1]]
            else:
                subst[names[-1]] = saved
        return col if step == "0" else f"{step} * {v} + {col}"

    # ---- nests ----------------------------------------------------------------------------
    def parallel(self, s: N.For, depth: int) -> None:
        k = self.k
        loops = parallel_nest(s)
        inner = _inner_parallel(loops[-1].body)
        if inner is not None and inner.loc is not None and inner.loc.form:
            # a tile op's nest (T.atomic_add of a region after another statement ...)
            k.fail(inner, f"{inner.loc.form} inside a T.Parallel loop: only elementwise "
                          "operations are allowed in a parallel loop's body (TileLang's "
                          "semantic check refuses a tile op there); write it element by "
                          "element, in a T.serial or T.vectorized loop")
        if inner is not None:
            k.fail(s, "a T.Parallel loop inside a T.Parallel body must be the whole body "
                      "(write `for i, j in T.Parallel(a, b)`)")
        if any(not isinstance(lp.extent, N.Const) or not isinstance(lp.start, N.Const)
               for lp in loops):
            touched = accesses(loops[-1].body)
            if loops[-1].replicated or any(k.buffers[b].scope == "fragment" for b, _, _ in touched):
                k.fail(s, "a T.Parallel loop whose extents are known only at run time may not "
                          "touch fragments nor write only locals (fragment and local registers "
                          "are indexed by compile-time constants); give it constant extents")
            self.spread_dynamic(loops, depth)
            return
        mma = [b for b, _, _ in accesses(loops[-1].body) if b in k.mma.coords]
        rows = [b for b, _, _ in accesses(loops[-1].body) if b in k.mma.rows]
        cols = [b for b, _, _ in accesses(loops[-1].body) if b in k.mma.cols]
        if not (mma or rows or cols) and self.row_results_nest(loops):
            self.over_row_results(loops, depth)
        elif loops[-1].replicated:
            self.replicated(loops, depth)
        elif mma:
            self.over_accumulator(loops, mma[0], depth)
        elif rows:
            self.over_rows(loops, rows[0], depth)
        elif cols:
            self.over_cols(loops, cols[0], depth)
        else:
            self.spread(loops, depth)
        if loops[-1].async_copy:  # the nest's cp.async copies form one group
            k.out.line(depth, "cute.arch.cp_async_commit_group()")

    def spread(self, loops, depth: int) -> None:
        """The nest's iterations spread over the block's threads, ``width`` lanes per
        thread step."""
        k, out = self.k, self.k.out
        extents = [int(lp.extent.value) for lp in loops]
        width = max(1, loops[-1].vector_width)
        total = math.prod(extents)
        threads = k.threads  # the block's, or a T.ws region's
        per_step = threads * width
        iters = -(-total // per_step)
        fragments = any(k.buffers[b].scope == "fragment" for b, _, _ in accesses(loops[-1].body))
        # nests over fragments unroll fully: their register indices must be constants
        static_k = iters == 1 or iters <= UNROLL_LIMIT or fragments
        step, f = ("0" if iters == 1 else out.fresh("k")), out.fresh("f")
        scale = f" * {width}" if width > 1 else ""
        if iters == 1:
            inner = depth
            out.line(inner, f"{f} = {k.tid}{scale}")
        else:
            rng = f"cutlass.range_constexpr({iters})" if static_k else f"cutlass.range({iters})"
            out.line(depth, f"for {step} in {rng}:")
            inner = depth + 1
            out.line(inner, f"{f} = ({step} * {threads} + {k.tid}){scale}")
        if total % per_step:
            out.line(inner, f"if {f} < {total}:")
            inner += 1
        rest = total
        for lp, extent in zip(loops, extents):
            rest //= extent
            start = int(lp.start.value)
            per_step_only = static_k and rest % per_step == 0
            if per_step_only:
                # the same for every thread of a step: a compile-time value
                value = f"{step} * {per_step} // {rest}" if rest > 1 else f"{step} * {per_step}"
                if lp is not loops[0]:
                    value = f"{value} % {extent}"
                value = value if step != "0" else "0"
            else:
                value = f"{f} // {rest}" if rest > 1 else f
                if lp is not loops[0]:
                    value = f"({value}) % {extent}"
            if start:
                value = f"{value} + {start}"
            out.line(inner, f"{ident(lp.var.name)} = {value}")
            k.ranges[lp.var.name] = (start, start + extent - 1)
            # (a Python int where it is the unrolled step's alone, else of the thread index)
            k.exprs.bind(lp.var.name, Py.PYTHON if per_step_only else Py.CUTLASS)
        # the nest's variables that are the same at every step of this thread (a step
        # moves the flat index by a whole number of their periods): a vector load at
        # such indices reads the same elements at every step
        rest, steady = total, set()
        for lp, extent in zip(loops, extents):
            rest //= extent
            if iters > 1 and static_k and total % per_step == 0 and per_step % (rest * extent) == 0:
                steady.add(lp.var.name)
        self.step, self.loops, self.steady = (step, width), loops, steady
        self.lanes(loops[-1], width, inner)
        self.step, self.loops, self.steady = None, None, set()

    def spread_dynamic(self, loops, depth: int) -> None:
        """A nest with extents known only at run time (``T.Parallel(n)``, ``n`` a scalar
        parameter or an expression of one; TileLang partitions it over the threads the
        same way): iteration ``f`` runs on thread ``f % threads``, one lane per step."""
        k, out = self.k, self.k.out
        exts = [k.exprs.expr(lp.extent) for lp in loops]
        total = " * ".join(f"({e})" for e in exts)
        threads = k.threads
        step, f = out.fresh("k"), out.fresh("f")
        out.line(depth, f"for {step} in cutlass.range(({total} + {threads - 1}) // {threads}):")
        out.line(depth + 1, f"{f} = {step} * {threads} + {k.tid}")
        out.line(depth + 1, f"if {f} < {total}:")
        inner = depth + 2
        for n, lp in enumerate(loops):
            rest = " * ".join(f"({e})" for e in exts[n + 1:])
            value = f"{f} // ({rest})" if rest else f
            if n:
                value = f"({value}) % ({exts[n]})"
            if not (isinstance(lp.start, N.Const) and lp.start.value == 0):
                value = f"{value} + ({k.exprs.expr(lp.start)})"
            out.line(inner, f"{ident(lp.var.name)} = {value}")
            lo = value_range(lp.start, k.ranges)[0]
            k.ranges[lp.var.name] = (lo, None)
            k.exprs.bind(lp.var.name, Py.CUTLASS)
        with k.bounds.known.scope():
            for lp in loops:  # (one lane per step: the variables' bounds are the loops')
                k.bounds.known.loop(lp.var, lp.start, lp.extent)
            self.lanes(loops[-1], 1, inner)

    def over_accumulator(self, loops, frag: str, depth: int) -> None:
        """A nest over T.gemm accumulators: each thread walks its own registers, with the
        loop variables taken from the register's (i, j)."""
        k, out = self.k, self.k.out
        k.mma.drain(depth, {b for lp in loops for b, _, _ in accesses(lp.body)})
        factor = self.row_scale(loops, frag)
        if factor is not None and k.fragment_registers > GUARD_REGISTERS:
            factor = None  # (no room: the guard's two paths made ptxas spill more)
        if factor is not None:
            # `acc[i, j] *= f[i]`: skipped in a thread whose rows all have f == 1 (an online
            # softmax's rescale, once the rows' maxima stop moving); x * 1 is x exactly
            out.use("rows")
            out.line(depth, f"if tcrow.any_not_one({ident(factor)}):  # else a multiply by 1")
            depth += 1
        r = out.fresh("r")
        width = max(1, loops[-1].vector_width)  # registers r, r + 1: columns j, j + 1
        step = f", {width}" if width > 1 else ""
        # unrolled by the compiler (register indices become constants); range_constexpr
        # would unroll while tracing, slowly, and warn past 64 iterations
        out.line(depth, f"for {r} in cutlass.range(0, cute.size({ident(frag)}){step}, unroll_full=True):")
        names = ", ".join(ident(lp.var.name) for lp in loops)
        out.line(depth + 1, f"{names} = {k.mma.coords[frag]}[{r}]")
        for lp in loops:
            k.ranges[lp.var.name] = (0, int(lp.extent.value) - 1)
            k.exprs.bind(lp.var.name, Py.CUTLASS)  # (a register's coordinates: of the thread)
        self.mma_reg, self.mma_frag = r, frag
        self.lanes(loops[-1], width, depth + 1)
        self.mma_reg = self.mma_frag = None

    def row_scale(self, loops, frag: str):
        """The row fragment ``f`` of a nest whose whole body is ``frag[i, j] = frag[i, j] *
        f[i]`` (or ``f[i] * frag[i, j]``) over the accumulator's two dims, else None."""
        if len(loops) != 2 or len(loops[-1].body) != 1:
            return None
        (st,) = loops[-1].body
        i, j = (N.Var(lp.var.name, lp.var.dtype) for lp in loops)
        if not (isinstance(st, N.Store) and st.buffer == frag and st.indices == (i, j)
                and isinstance(st.value, N.BinOp) and st.value.op == "mul"):
            return None
        own = N.Load(frag, (i, j), self.k.buffers[frag].dtype)
        for x, y in ((st.value.a, st.value.b), (st.value.b, st.value.a)):
            if x == own and isinstance(y, N.Load) and y.indices == (i,) and \
                    y.buffer in self.k.mma.rows and y.dtype == own.dtype:
                return y.buffer
        return None

    def over_rows(self, loops, frag: str, depth: int) -> None:
        """A nest whose first loop walks the rows of row fragments (``T.Parallel(M)``, or
        ``T.Parallel(M, N)`` with no accumulator): each thread walks the rows it holds,
        the other loops whole (the four threads of a quad hold a row: they compute the
        same values and store the same ones)."""
        k, out = self.k, self.k.out
        q = out.fresh("q")
        out.line(depth, f"for {q} in cutlass.range_constexpr(cute.size({ident(frag)})):")
        depth += 1
        out.line(depth, f"{ident(loops[0].var.name)} = {k.mma.rows[frag]}[{q}]")
        k.ranges[loops[0].var.name] = (0, int(loops[0].extent.value) - 1)
        k.exprs.bind(loops[0].var.name, Py.CUTLASS)  # (a row of the thread's)
        split = self.quad_split(loops, frag)
        for n, lp in enumerate(loops[1:]):
            start, stop = int(lp.start.value), int(lp.start.value + lp.extent.value)
            if n == 0 and split:
                # the quad's four lanes take every fourth column each (one store per element)
                steps = out.fresh("c")
                out.line(depth, f"for {steps} in cutlass.range_constexpr({(stop - start) // 4}):")
                first = f"{start} + " if start else ""
                out.line(depth + 1, f"{ident(lp.var.name)} = {first}{steps} * 4 + "
                                    "cute.arch.lane_idx() % 4")
            else:
                out.line(depth, f"for {ident(lp.var.name)} in cutlass.range({start}, {stop}):")
            k.ranges[lp.var.name] = (start, stop - 1)
            k.exprs.bind(lp.var.name, Py.CUTLASS)
            depth += 1
        self.row_reg, self.line_frag = q, frag
        with self.fetched_once(loops, frag):
            self.lanes(loops[-1], 1, depth)
        self.row_reg = self.line_frag = None

    def row_results_nest(self, loops):
        """``(read, written)`` for a ``T.Parallel(rows)`` nest over row reductions' results
        (``out[r] = m[r]``, ``m[r] = T.max(m[r], eps)`` after ``T.reduce_max(x, m)``): every
        fragment it touches is touched at ``[r]``, one geometry (``KernelEmitter.
        row_results``) for those it reads, which are such results; the fragments it writes
        (``written``) are 1-D replicated ones of ``rows`` elements that no statement other
        than a nest names (not ``KernelEmitter.exchanged``), their rows then held as the
        results' are; a nest that writes fragments stores nothing to memory (each thread of a
        lane group runs it), and none writes a local.  Else None."""
        k = self.k
        (loop, *rest), touched = loops, accesses(loops[-1].body)
        if rest or k.one_thread or k.replicas or loop.vectors or int(loop.start.value) != 0 or \
                not isinstance(loop.extent, N.Const):
            return None
        frags = {b for b, _, _ in touched if k.buffers[b].scope == "fragment"}
        written = {b for b, _, w in touched if w and b in frags}
        read = {b for b, _, w in touched if not w and b in frags}
        rows = int(loop.extent.value)
        hits = {k.row_results[b][1:] if b in k.row_results else None for b in read}
        if not read or None in hits or len(hits) != 1 or any(
                idx != (loop.var,) for b, idx, _ in touched if b in frags):
            return None
        (shape_rows, _), _, threads = next(iter(hits))
        if threads != k.threads or shape_rows != rows:
            return None
        memory = any(w and k.buffers[b].scope != "fragment" for b, _, w in touched)
        if written and (memory or any(
                b in k.exchanged or b in k.viewed or
                [getattr(d, "value", None) for d in k.buffers[b].shape] != [rows]
                or k.layouts.get(b, N.Layout("replicated")).kind != "replicated" for b in written)):
            return None
        return sorted(read), sorted(written)

    def over_row_results(self, loops, depth: int) -> None:
        """A ``T.Parallel(rows)`` nest over row reductions' results (:meth:`row_results_nest`)
        walks the rows as the reductions left them, TileLang's loop laid out by the
        reduced fragment: round ``c`` of a thread is row ``c * per_round + tid // group``,
        its values the rounds' registers.  A nest storing to memory runs in the group's
        first thread (the others hold the same rows); one writing fragments in every
        thread, into registers of its own a round (the fragments' rows from then on, read
        as the results' are).  Not the rows spread one a thread, or every row on every
        thread, each read from a replicated fragment at a run-time index (local memory)."""
        k, out = self.k, self.k.out
        (loop,) = loops
        read, written = self.row_results_nest(loops)
        red, (rows, row), v, threads = k.row_results[read[0]]
        group, per_round = row // v, threads * v // row
        rounds = -(-rows // per_round)
        c, r = out.fresh("c"), ident(loop.var.name)
        made = {}
        for b in written:
            made[b] = out.fresh("rows")
            dtype = cute_type(k.buffers[b].dtype)
            out.line(depth, f"{made[b]} = cute.make_rmem_tensor(({rounds},), {dtype})",
                     f"{b}: its rows as the lane groups hold them")
        if not written:
            out.line(depth, f"if {k.tid} % {group} == 0:",
                     f"rows of {', '.join(read)} as their reduction's lane groups hold them")
            depth += 1
        out.line(depth, f"for {c} in cutlass.range_constexpr({rounds}):")
        depth += 1
        for b in written:
            if b in k.row_results:  # (its old rows, which the body may read)
                out.line(depth, f"{made[b]}[{c}] = {k.row_results[b][0]}[{c}]")
            k.row_results[b] = (made[b], (rows, row), v, threads)
        out.line(depth, f"{r} = {c} * {per_round} + {k.tid} // {group}")
        if rows % per_round:
            out.line(depth, f"if {r} < {rows}:")
            depth += 1
        k.ranges[loop.var.name] = (0, rows - 1)
        k.exprs.bind(loop.var.name, Py.CUTLASS)
        self.round, self.round_written = c, set(written)
        self.lanes(loop, 1, depth)
        self.round, self.round_written = None, set()
        k.unshared.update(written)
        self.made = {b: k.row_results[b] for b in written}

    def quad_split(self, loops, frag: str) -> bool:
        """Does a nest over the rows of row fragment ``frag`` split its second loop among
        the four lanes of the quad holding a row (lane ``% 4`` takes every fourth
        iteration), instead of every holder running it whole?  Where the row's holders are
        one quad (one warp along N), that loop's extent is a constant multiple of 4 (at most
        256), and its body only stores to shared or global memory (no fragment or local
        written, no atomic, no other statement): each element is then written once, by one
        thread, a quarter of the work each (TileLang runs such a nest in one lane of the
        quad; the other three wait)."""
        layout = self.k.layouts.get(frag)
        if len(loops) < 2 or layout is None or tuple(layout.warps)[1:] != (1,):
            return False
        extent = int(loops[1].extent.value)  # (constant: the loops of such a nest are)
        if extent % 4 or not 4 <= extent <= 256:
            return False
        body = loops[-1].body
        if not all(isinstance(t, (N.Store, N.Let)) for t in body):
            return False
        if any(isinstance(x, N.Call) and (x.name in N.ATOMIC_RETURNS or x.name not in PURE_CALLS)
               for x in walk_nodes(body)):
            return False
        return all(self.k.buffers[b].scope in ("shared", "global")
                   for b, _, w in accesses(body) if w)

    def over_cols(self, loops, frag: str, depth: int) -> None:
        """A ``T.Parallel(N)`` nest over column fragments (the layout pass's ``cols``
        nests): each thread walks the columns it holds, two adjacent ones (lanes) a step
        (the 8 lanes of a warp with one ``lane % 4``, and its other warps along M, hold
        the same columns: they compute the same values and store the same ones)."""
        k, out = self.k, self.k.out
        (loop,) = loops
        width = max(1, loop.vector_width)
        q = out.fresh("q")
        out.line(depth, f"for {q} in cutlass.range_constexpr(0, cute.size({ident(frag)}), {width}):")
        depth += 1
        out.line(depth, f"{ident(loop.var.name)} = {k.mma.cols[frag]}[{q}]")
        k.ranges[loop.var.name] = (0, int(loop.extent.value) - 1)
        k.exprs.bind(loop.var.name, Py.CUTLASS)  # (a column of the thread's)
        self.col_reg, self.line_frag = q, frag
        with self.fetched_once(loops, frag):
            self.lanes(loop, width, depth)
        self.col_reg = self.line_frag = None

    @contextmanager
    def fetched_once(self, loops, frag: str):
        """Inside a nest over an MMA row / column fragment the threads holding a row
        (column) run it alike: an atomic with a result (``T.atomic_add(..., return_prev=
        True)``) runs once, in the row's owner, and every holder gets its old value by a
        shuffle (TileLang's meaning: one atomic per logical element; its 0.1.15 CUDA runs
        one per holding thread); refused by name where the holders span warps."""
        fetched = [x for x in walk_nodes(loops[-1].body)
                   if isinstance(x, N.Call) and x.name in N.ATOMIC_RETURNS]
        how = self.k.mma.fetch_once.get(frag)
        if fetched and isinstance(how, str):
            self.k.fail(loops[0], f"T.{fetched[0].name[:-len('_ret')]}(..., return_prev=True) "
                                  f"in a nest over the MMA fragment '{frag}': {how}; run it in "
                                  "a nest over a fragment of its own (or a T.serial loop in one "
                                  "thread) and share the value through shared memory")
        saved = self.k.exprs.fetch_once
        self.k.exprs.fetch_once = how if fetched and not self.k.one_thread else None
        try:
            yield
        finally:
            self.k.exprs.fetch_once = saved

    def replicated(self, loops, depth: int) -> None:
        """Every thread runs every iteration (the nest writes only replicated fragments and
        locals); small nests unroll so fragment indices are constants."""
        total = math.prod(int(lp.extent.value) for lp in loops)
        for lp in loops:
            start, stop = int(lp.start.value), int(lp.start.value + lp.extent.value)
            rng = "cutlass.range_constexpr" if total <= REPLICATED_UNROLL else "cutlass.range"
            self.k.out.line(depth, f"for {ident(lp.var.name)} in {rng}({start}, {stop}):")
            self.k.ranges[lp.var.name] = (start, stop - 1)
            self.k.exprs.bind(lp.var.name, Py.PYTHON if rng == "cutlass.range_constexpr" else Py.CUTLASS)
            depth += 1
        drawn = [x for x in walk_nodes(loops[-1].body)
                 if isinstance(x, N.Call) and x.name in N.ATOMIC_RETURNS + N.RNG_DRAWS]
        if drawn:  # (one copy of the call would leave the other threads without its value)
            written = sorted({x.buffer for x in walk_stmts(loops[-1].body)
                              if isinstance(x, N.Store)})
            name = drawn[0].name
            form = f"T.{name[:-len('_ret')]}(..., return_prev=True)" if name.endswith("_ret") \
                else "T.rng_rand()" if name == "rng_rand" else "T.rng_rand_float()"
            self.k.fail(loops[0], f"{form} in a T.Parallel nest that every thread "
                                  f"runs whole: it writes {', '.join(map(repr, written))}, held "
                                  "whole by every thread (a thread reads it whole elsewhere), so "
                                  "each thread would update / draw once per element; keep the "
                                  "results in shared memory (T.alloc_shared, read after a "
                                  "barrier) or in a fragment no thread reads whole")
        saved, self.k.replicas = self.k.replicas, True
        self.k.body(loops[-1].body, depth)
        self.k.replicas = saved

    # ---- lanes ----------------------------------------------------------------------------
    def lanes(self, inner: N.For, width: int, depth: int) -> None:
        """The body for ``width`` consecutive iterations of ``inner`` per thread: vector
        loads into registers, the body once per lane, vector stores; a per-lane bounds-checked
        path where a vector may cross a tensor's end."""
        vec = {(v.buffer, v.indices): v.chunk for v in inner.vectors}  # the vectorize pass's
        # vector instructions and their bounds run before the body's Lets are bound: they
        # read the Lets' values (the vectorizer proved them free of loads)
        self.lets = let_values(inner.body)
        with self.k.bounds.statement():  # (the nest's hoisted index loads end with it)
            self.lanes_checked_or_fast(inner, width, vec, depth)

    def lanes_checked_or_fast(self, inner: N.For, width: int, vec, depth: int) -> None:
        known = self.k.bounds.known
        with known.scope():  # the T.assume's the body opens with hold at every lane
            for s in inner.body[:next((n for n, s in enumerate(inner.body)
                                       if not isinstance(s, N.Let) and not N.is_assume(s)), None)]:
                if N.is_assume(s):
                    known.assume(s.value.args[0], True)
            checks = self.vector_checks(inner, vec, width)
            # an index read from a tensor (a page through a block table) is read, bounds
            # checked, into a temporary before the checks: they run whole (CuTe's `and`
            # does not short-circuit), and the table's own index may be out of bounds where
            # the program's T.if_then_else would not have read it (the lanes' path reads
            # it only in bounds)
            nested = [ld for idx, _ in checks for ld in _loads_of(idx)
                      if not mentions(ld, inner.var.name)]
            if nested:
                self.k.bounds.hoist(tuple(nested), depth, set(vec))
                checks = self.vector_checks(inner, vec, width)
        conds = _texts(checks)
        if conds:
            pre = self.preload(inner, vec, width, depth)
            self.lanes_checked = True
            self.k.out.line(depth, f"if {chain('and', conds)}:")
            self.lanes_fast(inner, width, vec, depth + 1, pre)
            self.lanes_fallback(inner, width, dict(pre), conds if self.lane_invariant(inner, checks)
                                else (), depth)
            self.lanes_checked = False
        else:
            self.lanes_fast(inner, width, vec, depth)

    def lane_invariant(self, inner: N.For, checks) -> bool:
        """Whether the vector bounds ``checks`` are the same at every lane and in the
        per-lane path: no checked index reads the nest's variable, a variable its body
        binds, or a tensor its body writes."""
        body = inner.body
        bound = {inner.var.name} | {s.var.name for s in walk_stmts(body) if isinstance(s, (N.Let, N.For))}
        written = {b for b, _, w in accesses(body) if w}
        return not any(mentions(idx, name) for idx, _ in checks for name in bound) and \
            not any(ld.buffer in written for idx, _ in checks for ld in _loads_of(idx))

    def lanes_fallback(self, inner: N.For, width: int, temps, failed, depth: int) -> None:
        """The ``else`` of the vector path: the lanes one by one, each access checked.  With
        lane-invariant checks (``failed``: one of them at least is false here) a guarded
        access that needs them all never runs: it is not emitted (a global store), or
        reads its out-of-bounds value (a load); where nothing else is left (Lets of
        pure values), there is no ``else``; nor is a staged fill whose reader's store
        needs them all (``Store.feeds``).  What else the body does stays: a zero fill
        of a fragment or shared tile (TileLang's padding), a store under other guards."""
        k = self.k
        mark = k.out.mark()
        k.out.line(depth, "else:")
        saved, k.bounds.failed, k.dropped = k.bounds.failed, frozenset(failed), set()
        try:
            self.lanes_loop(inner, width, temps, depth + 1)
        finally:
            k.bounds.failed = saved
        if failed and all(id(s) in k.dropped or N.is_assume(s) or
                          isinstance(s, N.Let) and plain_statements((s,)) for s in inner.body):
            k.out.rewind(mark)
        k.dropped = set()

    def preload(self, inner: N.For, vec, width: int, depth: int) -> dict:
        """Before a bounds-checked vector path: the vector loads that read the same elements
        at every unrolled step (:meth:`reads_once`) and are in bounds themselves (a bias row
        ``b[j]`` under a tile of rows whose row count is known only at run time), read at
        the first step into registers that both paths then read."""
        if not self.steady or self.step is None:
            return {}
        out = self.k.out
        body = inner.body
        written = {b for b, _, w in accesses(body) if w}
        stored = {(s.buffer, s.indices) for s in body if isinstance(s, N.Store)} | \
            {(s.dst.buffer, s.dst.starts) for s in body if isinstance(s, N.AtomicAdd)}
        pre = {}
        for key, chunk in vec.items():
            name, indices = key
            dtype = self.k.buffers[name].dtype
            if key in stored or dtype in PACKED or not self.reads_once(name, indices, written, True) \
                    or self.vector_bounds(inner, {key: chunk}, width):
                continue
            tmp = out.fresh("vec")
            pre[key] = tmp
            out.line(depth, f"if cutlass.const_expr({self.step[0]} == 0):")
            out.line(depth + 1, f"{tmp} = cute.make_rmem_tensor(({width},), {register_type(dtype)})")
            for c in range(0, width, chunk):
                view = self.view(name, indices, chunk, c)
                out.line(depth + 1, f"{_chunk(tmp, c, chunk, width)}.store({view}.load())")
        return pre

    def vector_bounds(self, inner: N.For, vec, width: int) -> list[str]:
        """Bounds conditions of the vector accesses at the first and the last lane."""
        return _texts(self.vector_checks(inner, vec, width))

    def vector_checks(self, inner: N.For, vec, width: int) -> list[tuple]:
        """:meth:`vector_bounds`, each condition with the index (lets resolved) it checks."""
        k = self.k
        j = inner.var.name
        checks = []
        # indices grow with the lane: lower bounds at the first lane, upper at the last
        for (name, indices) in vec:
            checks += k.bounds.checks(name, self.resolve(indices), upper=width == 1)
        if width > 1:
            lo, hi = k.ranges[j]
            k.exprs.subst[j] = f"({ident(j)} + {width - 1})"
            k.ranges[j] = (lo + width - 1, hi)
            for (name, indices) in vec:
                checks += k.bounds.checks(name, self.resolve(indices), lower=False)
            k.ranges[j] = (lo, hi)
            del k.exprs.subst[j]
        return checks

    def resolve(self, indices):
        return substitute(indices, self.lets) if self.lets else indices

    def view(self, name: str, indices, chunk: int, extra: int = 0) -> str:
        if name in self.k.unshared:
            self.k.rows_read.add(name)
        return vector_view(self.k.exprs, self.k.buffers[name], self.k.layouts.get(name),
                           self.resolve(indices), chunk, extra,
                           wide=name in self.k.plan.func.wide_tensors)

    def lanes_fast(self, inner: N.For, width: int, vec, depth: int, pre=None) -> None:
        out = self.k.out
        body = inner.body
        if inner.async_copy and vec:
            (st,) = body
            chunk = vec[(st.buffer, st.indices)]
            for c in range(0, width, chunk):
                src = self.view(st.value.buffer, st.value.indices, chunk, c)
                dst = self.view(st.buffer, st.indices, chunk, c)
                bits = chunk * DTYPES[self.k.buffers[st.buffer].dtype].bits
                out.line(depth, f"tcc.copy_async({src}, {dst}, {bits})")
            out.use("copy")
            return
        temps = {}
        stores = []
        atomics = []
        touched = accesses(body)
        loaded = {(b, idx) for b, idx, w in touched if not w}
        written = {b for b, _, w in touched if w}
        for key, chunk in vec.items():
            name, indices = key
            dtype = self.k.buffers[name].dtype
            if pre and key in pre:  # (read at the first step, before the bounds check)
                temps[key] = pre[key]
                continue
            tmp = out.fresh("vec")
            temps[key] = tmp
            once = key in loaded and self.reads_once(name, indices, written)
            if not once:
                out.line(depth, f"{tmp} = cute.make_rmem_tensor(({width},), {register_type(dtype)})")
            if any(isinstance(s, N.AtomicAdd) and (s.dst.buffer, s.dst.starts) == key for s in body):
                atomics.append((key, chunk, tmp))  # the lanes' values, added after them
                continue
            if any(isinstance(s, N.Store) and (s.buffer, s.indices) == key for s in body):
                stores.append((key, chunk, tmp))
                if key not in loaded:
                    continue
                # (updated in place: read before the lanes, written after them)
            at = depth
            if once:
                # the same elements at every unrolled step (a bias row under a tile of
                # rows): read at the first step, its registers kept for the others (as
                # nvcc reuses TileLang's __restrict__ loads)
                out.line(depth, f"if cutlass.const_expr({self.step[0]} == 0):")
                out.line(depth + 1, f"{tmp} = cute.make_rmem_tensor(({width},), {register_type(dtype)})")
                at = depth + 1
            for c in range(0, width, chunk):
                view = self.view(name, indices, chunk, c)
                if dtype in PACKED:  # chunk // 2 bytes, one code per register
                    out.use("fp4")
                    out.line(at, f"tcfp4.unpack({view}, {tmp}, {c}, {chunk})")
                    continue
                part = _chunk(tmp, c, chunk, width)
                out.line(at, f"{part}.store({view}.load())")
        self.lanes_loop(inner, width, temps, depth)
        for (name, indices), chunk, tmp in atomics:
            out.use("atomic")
            for c in range(0, width, chunk):
                view = self.view(name, indices, chunk, c)
                part = _chunk(tmp, c, chunk, width)
                out.line(depth, f"tca.atomic_add_view({view}, {part})")
        for key, chunk, tmp in stores:
            name, indices = key
            for c in range(0, width, chunk):
                view = self.view(name, indices, chunk, c)
                if self.k.buffers[name].dtype in PACKED:  # whole bytes: no neighbour to keep
                    out.use("fp4")
                    out.line(depth, f"tcfp4.pack({tmp}, {c}, {chunk}, {view})")
                    continue
                part = _chunk(tmp, c, chunk, width)
                out.line(depth, f"{view}.store({part}.load())")

    def reads_once(self, name: str, indices, written: set, checked: bool = False) -> bool:
        """Is the vector load ``name[indices]`` of the nest being spread the same elements at
        every unrolled step of the thread: indices reading only steady nest variables
        (``self.steady``) and enclosing values, of a global buffer the nest does not write,
        in a nest without bounds checks (its fast path runs at every step) unless
        ``checked`` (the caller reads it before the check: :meth:`preload`)?"""
        if not self.steady or self.step is None or (self.lanes_checked and not checked) or \
                name in written or \
                self.k.buffers[name].scope != "global":
            return False
        resolved = self.resolve(indices)
        return not any(mentions(resolved, lp.var.name) for lp in self.loops
                       if lp.var.name not in self.steady) and \
            not any(ld.buffer in written for ld in _loads_of(resolved))

    def lanes_loop(self, inner: N.For, width: int, temps, depth: int) -> None:
        j = inner.var.name
        if width == 1:
            self.lane, self.vector = "0", temps
            self.k.body(inner.body, depth)
            self.lane, self.vector = None, {}
            return
        lane = self.k.out.fresh("lane")
        self.k.out.line(depth, f"for {lane} in cutlass.range_constexpr({width}):")
        self.k.exprs.subst[j] = f"({ident(j)} + {lane})"
        self.lane, self.vector = lane, temps
        self.k.body(inner.body, depth + 1)
        self.lane, self.vector = None, {}
        del self.k.exprs.subst[j]


def _loads_of(x):
    return [n for n in walk_nodes(x) if isinstance(n, N.Load)]


PICK_LIMIT = 32  # the most registers a run-time read selects among (tcr.pick); a larger
# fragment read so stays an indexed array (local memory), as TileLang's


def _inner_parallel(body) -> N.For | None:
    """The first T.Parallel loop in ``body`` (under serial loops and branches too)."""
    for s in body:
        if isinstance(s, N.For):
            if s.kind == "parallel":
                return s
            found = _inner_parallel(s.body)
        elif isinstance(s, N.If):
            found = _inner_parallel(s.then) or _inner_parallel(s.orelse)
        else:
            continue
        if found is not None:
            return found
    return None


def _chunk(tmp: str, c: int, chunk: int, width: int) -> str:
    """Registers ``c .. c + chunk`` of a lanes' register tensor ``tmp`` (``width`` long)."""
    return f"cute.make_tensor({tmp}.iterator + {c}, cute.make_layout({chunk}))" \
        if chunk < width else tmp


def _texts(checks) -> list[str]:
    """The conditions of bounds ``checks`` ((index, text) pairs), each once, in order."""
    return list(dict.fromkeys(text for _, text in checks))
