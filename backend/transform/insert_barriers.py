"""Insert block barriers (``T.sync_threads()``) between tile statements that share a
shared buffer, and the waits for cp.async copies.

Threads of a nest touch shared elements in the nest's own mapping, so a statement that
reads a shared buffer written by an earlier statement (or writes one an earlier statement
read or wrote) since the last barrier needs a barrier first; buffers the shared-memory pass
placed on the same bytes count as one.  A barrier that follows a
cp.async copy nest waits for the copies (``wait_async=True``).  Loop bodies run again
after their end, so a body starts from the union of the state before the loop and the
body's own accesses.  Fragments and locals are per thread and need none.  Inside a
``T.ws`` region a barrier is the region's threads' own (see :meth:`_Sync.warp_groups`).
"""

from __future__ import annotations

import dataclasses

from ..ir import nodes as N
from ..ir.visitor import BODY_FIELDS, var_names, walk_nodes, walk_stmts
from .analysis import accesses, buffers_used, parallel_nest
from .shared_memory import overlapping


class BarrierError(ValueError):
    """A program whose shared accesses the barrier pass cannot order."""


class _State:
    def __init__(self):
        self.written: dict[str, bool] = {}  # shared buffer -> written by cp.async
        self.read: set[str] = set()
        self.store_pending = False  # a TMA store whose read nobody has waited for yet
        # shared buffers threads read or wrote since the last barrier that fenced them for
        # the async proxy: a TMA load into their bytes needs such a barrier first
        self.generic: set[str] = set()
        # shared buffer in read / written -> the threads' mappings of its accesses since
        # the last barrier (:meth:`_Sync.mapping`; None: any); a buffer with no entry: any
        self.maps: dict[str, set] = {}

    def copy(self) -> "_State":
        st = _State()
        st.take(self)
        return st

    def take(self, other: "_State") -> None:
        """Become a copy of ``other`` (in place: the state the caller holds)."""
        self.written, self.read = dict(other.written), set(other.read)
        self.store_pending = other.store_pending
        self.generic = set(other.generic)
        self.maps = {b: set(m) for b, m in other.maps.items()}

    def merge(self, other: "_State") -> None:
        for b, a in other.written.items():
            self.written[b] = self.written.get(b, False) or a
        self.read |= other.read
        self.store_pending |= other.store_pending
        self.generic |= other.generic
        for b, m in other.maps.items():
            self.maps[b] = self.maps.get(b, set()) | m

    def touched(self) -> set[str]:
        """Every shared buffer threads touched that no fencing barrier has ordered yet."""
        return self.read | set(self.written) | self.generic

    def clear(self, fenced: bool = False) -> None:
        """A barrier: nothing counts as touched since it; what was, still counts for the
        async proxy unless it ``fenced``."""
        self.generic = set() if fenced else self.generic | self.read | set(self.written)
        self.written.clear()
        self.read.clear()
        self.maps.clear()

    def record(self, names, mapping) -> None:
        """The accesses just counted to ``names`` were made in ``mapping``."""
        for b in names:
            self.maps.setdefault(b, set()).add(mapping)

    def warp_ordered(self, names) -> None:
        """A warp barrier ordered the accesses to ``names`` (each element's threads are
        lanes of one warp): they no longer count, except for the async proxy."""
        for b in names:
            self.read.discard(b)
            self.written.pop(b, None)
            self.maps.pop(b, None)
            self.generic.add(b)

    def barrier(self, out: list, loc, fence: bool = False) -> None:
        """A block barrier (waiting for cp.async copies when any write was one), after
        which nothing counts as touched; ``fence``: each thread first fences its shared
        accesses for the async proxy (before a TMA load into their bytes)."""
        self.wait_stores(out, loc)
        out.append(N.Barrier(any(self.written.values()), fence_proxy=fence, loc=loc))
        self.clear(fence)

    def wait_stores(self, out: list, loc) -> None:
        """Before a barrier, after which the stores' tiles may be written again: their
        issuing thread waits until TMA has read them."""
        if self.store_pending:
            out.append(N.TmaStoreWait(loc=loc))
            self.store_pending = False


class _Sync:
    def __init__(self, scope: N.KernelScope, program_orders: bool = False):
        # option disable_barrier_insertion (TileLang's tl.disable_thread_storage_sync): the
        # program's T.sync_threads order the statements; only a tile op's own barriers stay
        self.program_orders = program_orders
        self.allocs = {s.buffer.name: s for s in _allocs(scope.body)}
        self.shared = {b for b, a in self.allocs.items() if a.buffer.scope == "shared"}
        self.aliases = overlapping(scope)  # buffers placed on the same bytes
        # TMA stores may leave their wait for the shared tile's read to the next barrier
        # (see :meth:`tma_copy`) where every barrier is this pass's or the program's block
        # barrier, which the issuing thread reaches: not with T.ws regions, not when the
        # program orders the statements itself
        self.defer_stores = not program_orders and not any(
            isinstance(t, N.WarpGroups) for t in walk_stmts(scope.body))
        self.deferred = False  # a store's wait was deferred: the kernel ends with one
        # the shared buffers the program's raw cp.async (T.ptx_cp_async) and its
        # T.async_copy nests write: they land by the program's T.ptx_wait_group, after
        # which TileLang's sync pass puts a barrier; here a wait_group counts as writing
        # them (a barrier before another thread reads them)
        self.raw_cp_async = self.raw_writes(scope.body)
        self.thread_vars, self.thread_locals = _thread_values(scope.body, {
            a.buffer.name for a in _allocs(scope.body) if a.buffer.scope == "local"})

    def divergent(self, cond) -> bool:
        """Does ``cond`` read the thread index, directly or through names bound to values
        of it (``tx = T.get_thread_binding()``, ``g = bx * 128 + tx``, loop variables whose
        range reads one), through a local (``T.alloc_var``, ``T.alloc_local``) some store
        gives a value of it (``n = A[tx]``), or through a value that differs between lanes
        (a shuffle, a vote, an atomic's old value)?  Threads may then disagree on it."""
        return _reads_thread(cond, self.thread_vars, self.thread_locals)

    def divergent_loop(self, s) -> bool:
        """A ``while`` whose condition, or a serial loop whose range, threads may disagree
        on: some threads run more iterations than others."""
        if isinstance(s, N.While):
            return self.divergent(s.cond)
        return s.kind != "parallel" and self.divergent((s.start, s.extent))

    def touches(self, s):
        """Shared buffers ``s`` reads and writes, and whether its writes are cp.async.  The
        state records them as they are; a check spreads the new statement's accesses over
        the buffers on the same bytes (:meth:`spread`), so two buffers conflict when they
        share bytes, and not merely because each shares bytes with a third (``q`` and
        ``k`` side by side on the bytes of a larger ``o_shared`` that is dead while they
        live: a write of ``q`` then one of ``k`` needs no barrier between them)."""
        if isinstance(s, (N.Reduce, N.FinalizeReducer, N.CombineRows, N.SegmentReduce)):
            return set(), set(), False  # fragments; its scratch: see :meth:`reduction`
        reads, writes = set(), set()
        for b, _, w in accesses([_cp_async_dropped(_program_ordered_loads_dropped(s))]):
            if b in self.shared:
                (writes if w else reads).add(b)
        if self.raw_cp_async and not _is_call(s, "ptx_wait_group") and \
                any(_is_call(t, "ptx_wait_group") for t in walk_stmts([s])):
            writes |= self.raw_cp_async  # (a compound statement that waits inside)
        return reads, writes, _async_writes(s)

    def mapping(self, s, b: str):
        """Which threads ``s`` touches each element of shared buffer ``b`` on, where that
        is the same in every statement of the same mapping and every element's threads are
        lanes of one warp: a parallel nest indexing ``b`` by one of its variables only,
        ``b[i]``, whose fragments are MMA accumulators (or their row fragments) with the
        same MMA, warps (one along N) and rows, all indexed by ``i`` as their row (the
        codegen runs such a nest on the threads holding the rows: a quad of one warp).
        ``(mma, warps, rows, threads, first thread)``; None: any threads."""
        if not (isinstance(s, N.For) and s.kind == "parallel"):
            return None
        nest = parallel_nest(s)
        if any(loop.replicated for loop in nest):
            return None
        names = {loop.var.name for loop in nest}
        row, key = None, None
        for x, index, _ in accesses(nest[-1].body):
            if x == b:
                if len(index) != 1 or not isinstance(index[0], N.Var) or \
                        index[0].name not in names or row not in (None, index[0].name):
                    return None
                row = index[0].name
        if row is None:
            return None
        for x, index, _ in accesses(nest[-1].body):
            alloc = self.allocs.get(x)
            if alloc is None or alloc.buffer.scope in ("shared", "global", "local"):
                continue  # (none of these decides the nest's threads)
            layout = alloc.layout
            if layout is None or layout.kind not in ("mma", "mma_rows") or \
                    len(layout.warps) != 2 or layout.warps[1] != 1 or not index or \
                    not isinstance(index[0], N.Var) or index[0].name != row or \
                    (layout.kind == "mma_rows") != (len(index) == 1) or \
                    not isinstance(alloc.buffer.shape[0], N.Const):
                return None
            mine = (layout.mma, tuple(layout.warps), alloc.buffer.shape[0].value,
                    layout.threads, layout.first_thread)
            if key not in (None, mine):
                return None
            key = mine
        return key

    def body_mappings(self, body) -> dict:
        """Shared buffer -> the mappings (:meth:`mapping`) of the accesses ``body`` makes to
        it, nested statements included."""
        out: dict[str, set] = {}
        for t in body:
            if isinstance(t, N.For) and t.kind == "parallel":
                parts = {b: {self.mapping(t, b)} for b in set().union(*self.touches(t)[:2])}
            elif isinstance(t, (N.For, N.While)) and not self.divergent_loop(t):
                head = dataclasses.replace(t, body=())
                parts = {b: {None} for b in set().union(*self.touches(head)[:2])}
                for b, m in self.body_mappings(t.body).items():
                    parts[b] = parts.get(b, set()) | m
            elif isinstance(t, N.If) and not self.divergent(t.cond):
                parts = {b: {None} for b in set().union(*self.touches(N.Evaluate(t.cond))[:2])}
                for b, m in self.body_mappings(t.then + t.orelse).items():
                    parts[b] = parts.get(b, set()) | m
            else:
                parts = {b: {None} for b in set().union(*self.touches(t)[:2])}
            for b, m in parts.items():
                out[b] = out.get(b, set()) | m
        return out

    def warp_local(self, s, st: _State) -> set:
        """The shared buffers ``s`` conflicts on with what was touched since the last
        barrier, where a warp barrier orders them: every access to each since then, and
        ``s``'s, in one same :meth:`mapping` (no cp.async, no buffer on its bytes touched);
        else the empty set."""
        reads, writes, is_async = self.touches(s)
        if is_async:
            return set()
        touched = st.read | set(st.written)
        clash = (self.spread(reads) & set(st.written)) | (self.spread(writes) & touched)
        for b in clash:
            if b not in reads | writes or st.written.get(b) or \
                    (self.aliases.get(b, set()) - {b}) & (touched | reads | writes):
                return set()
            mine = self.mapping(s, b)
            if mine is None or st.maps.get(b) != {mine}:
                return set()
        return clash

    def rewritten_alike(self, loop) -> set:
        """The shared buffers ``loop``'s body only writes, by plain stores all at one same
        index (``s[ty + r * 8, tx] = ...`` in an unrolled loop of a hand-written transpose),
        touching no buffer on their bytes: a step's store and another step's at that index
        are the same statement at the same index, which TileLang's sync pass (TVM's: the
        same index is the same thread's element) does not order, so neither does this one
        (the body's own order, and the reads after the loop, still are)."""
        stores: dict[str, set] = {}  # shared buffer -> its write indices (None: a read)
        writes: dict[str, int] = {}  # buffer -> its write accesses; and its plain stores
        for b, index, write in accesses(loop.body):
            if b in self.shared:
                stores.setdefault(b, set()).add(repr(index) if write else None)
            writes[b] = writes.get(b, 0) + bool(write)
        lanes = {t.var.name for t in walk_stmts(loop.body)
                 if isinstance(t, N.For) and t.kind == "parallel"}
        plain: dict[str, int] = {}
        shared_by_all = set()  # stored at an index naming no thread
        for t in walk_stmts(loop.body):
            if isinstance(t, N.Store):
                plain[t.buffer] = plain.get(t.buffer, 0) + 1
                # (as TVM's rule, the index must name the thread: its index, or a parallel
                # nest's variable; ``s[0] = ...`` by every thread is not each one's own)
                if not (self.divergent(t.indices) or var_names(t.indices) & lanes):
                    shared_by_all.add(t.buffer)
            elif isinstance(t, (N.TmaCopy, N.ClusterCopy)) or \
                    isinstance(t, N.For) and t.async_copy:
                return set()  # (other writers of shared memory: left as they were)
        return {b for b, idx in stores.items()
                if len(idx) == 1 and None not in idx and plain.get(b) == writes[b] and
                b not in shared_by_all and
                not (self.aliases.get(b, set()) - {b}) & set(stores) and
                not _is_call_anywhere(loop.body, b)}

    def loads_onto(self, loop, touched: set) -> bool:
        """Does a TMA load in ``loop`` write the bytes of a buffer in ``touched``?"""
        return any(isinstance(t, N.TmaCopy) and t.src.buffer not in self.shared and
                   self.spread({t.dst.buffer}) & touched for t in walk_stmts(loop.body))

    def iteration_private(self, loop) -> set:
        """The shared buffers each iteration of ``loop`` touches at elements no other
        iteration touches: every access to the buffer in the body (reads and writes, and
        none to a buffer on its bytes) indexes one same dimension by the loop variable plus
        one same constant (``S[:, k]``, a row statistic kept per step).  A later iteration
        then needs no barrier for what an earlier one did there (the body's own order of
        them still does)."""
        if not isinstance(loop, N.For):
            return set()  # (a while's iterations have no index)
        var = loop.var.name
        dims: dict[str, set] = {}  # buffer -> the dimensions indexed by var (+ c) everywhere
        shifts: dict[tuple, str] = {}  # (buffer, dimension) -> its index, as text
        for b, index, _ in accesses(loop.body):
            if b not in self.shared:
                continue
            ok = set()
            for d, x in enumerate(index or ()):
                if _loop_step_index(x, var):
                    if shifts.setdefault((b, d), repr(x)) == repr(x):
                        ok.add(d)
            dims[b] = dims[b] & ok if b in dims else ok
        touched = set(dims)
        return {b for b, ok in dims.items()
                if ok and not (self.aliases.get(b, set()) & touched) - {b}}

    def spread(self, names) -> set:
        """``names`` and every buffer placed on some of their bytes."""
        out = set(names)
        for b in names:
            out |= self.aliases.get(b, set())
        return out

    def raw_writes(self, stmts) -> set:
        """The shared buffers (and those on their bytes) raw cp.async and T.async_copy
        nests in ``stmts`` write."""
        out = set()
        for t in walk_stmts(stmts):
            if _is_call(t, "ptx_cp_async"):
                b = t.value.args[0].buffer
                out |= {b} | self.aliases.get(b, set())
            elif _program_waited(t):
                for b, _, w in accesses([t]):
                    if w and b in self.shared:
                        out |= {b} | self.aliases.get(b, set())
        return out

    def block(self, body, st: _State) -> tuple:
        out = []
        run = None  # the run of side-by-side T.ws regions just placed (see warp_groups)
        for s in body:
            if not isinstance(s, (N.WarpGroups, N.Allocate)):  # (an allocation touches nothing)
                run = None
            if isinstance(s, N.TmaCopy):
                self.tma_copy(s, st, out)
                continue
            if isinstance(s, N.TmaStoreWait) and s.program and s.count == 0:
                st.store_pending = False  # (the program's wait for all its stores' reads)
            if isinstance(s, N.Barrier) or isinstance(s, N.NamedBarrier) and s.program \
                    and not s.arrive:
                # the program's partial barrier (T.sync_threads(id, count)) syncs the threads
                # that share data across it; the program orders them, as TileLang's sync
                # pass takes an existing storage sync.  A block barrier after cp.async
                # copies waits for them
                if isinstance(s, N.Barrier) and any(st.written.values()) and not s.wait_async:
                    s = dataclasses.replace(s, wait_async=True)
                st.wait_stores(out, s.loc)
                st.clear(isinstance(s, N.Barrier) and s.fence_proxy)
                out.append(s)
                continue
            if isinstance(s, (N.For, N.While)) and self.divergent_loop(s):
                # threads run different numbers of iterations: a barrier inside would not be
                # reached as often by every thread (a hang), so the loop counts as one
                # statement, ordered before it and, by its accesses, before what follows
                # (as TileLang hoists a barrier out of a branch threads disagree on; what
                # its iterations share among threads, the program orders)
                self.barrier_if_needed(_mbarrier_ordered_loads_dropped(s), st, out)
            elif isinstance(s, N.While) or isinstance(s, N.For) and s.kind != "parallel":
                # a while's condition is read before every iteration too; a loop's range
                # (`T.serial(cnt[0])`) once, before it
                self.barrier_if_needed(dataclasses.replace(s, body=()), st, out)
            if isinstance(s, N.AsyncCopyWait):
                # this thread's cp.async copies have landed (the cp.async pipelining pass's
                # wait before its prologue for copies issued earlier): the next barrier
                # orders them for the other threads and need not wait
                st.written = dict.fromkeys(st.written, False)
                out.append(s)
                continue
            if _is_call(s, "ptx_wait_group"):
                # the program's raw cp.async have landed (TileLang syncs after every
                # wait_group): a read of them by other threads needs a barrier after it
                for b in self.raw_cp_async:
                    st.written[b] = st.written.get(b, False)
                st.record(self.raw_cp_async, None)
                out.append(s)
                continue
            if _is_call(s, "ptx_cp_async") or _program_waited(s):
                # the program's raw cp.async (or T.async_copy): ordered after earlier reads
                # and writes of its buffer (TileLang's sync pass counts its write at
                # issue); its write counts where it lands, at the program's T.ptx_wait_group
                self.barrier_if_needed(s, st, out)
                out.append(s)
                continue
            if isinstance(s, (N.For, N.While)) and getattr(s, "kind", "") != "parallel" \
                    and not self.divergent_loop(s):
                raw = self.raw_writes([s])
                if raw & (st.read | set(st.written)) and not self.program_orders:
                    # raw cp.async in the loop would overwrite what was touched before it:
                    # one barrier before the loop (not one per copy)
                    st.barrier(out, s.loc)
                # a body runs after its own end: start it from everything it touches
                summary = _State()
                summary.store_pending = self.defer_stores and any(
                    isinstance(t, N.TmaCopy) and t.src.buffer in self.shared
                    for t in walk_stmts(s.body))  # (a store at its end, before the start)
                reads, writes, _ = self.touches(s)
                # (no iteration touches another's; or each rewrites what it wrote before)
                private = self.iteration_private(s) | self.rewritten_alike(s)
                summary.read |= reads - private
                for b in writes - private:
                    summary.written[b] = _async_writes(s)
                for b, maps in self.body_mappings(s.body).items():
                    for m in maps if b not in private else ():
                        summary.record([b], m)
                entry = st.copy()
                entry.merge(summary)
                before = st.copy()
                new_body = self.block(s.body, entry)
                loads = self.loads_onto(s, before.touched())
                if not self.program_orders and (self.conflicts(s, before) or loads):
                    # what was touched before the loop needs a barrier in its body (a tile
                    # cp.async-copied before a loop that reads it, a tile a TMA load in the
                    # body overwrites, one chunk a step): one barrier before the loop
                    # instead (fencing, for TMA), where that leaves the body fewer (it
                    # runs every step)
                    pre: list = []
                    before.barrier(pre, s.loc, fence=loads)
                    entry2 = before.copy()
                    entry2.merge(summary)
                    body2 = self.block(s.body, entry2)
                    if _barriers(body2) < _barriers(new_body):
                        out += pre
                        st.take(before)
                        new_body, entry = body2, entry2
                if isinstance(s, N.While):
                    # the condition is read again after the body's end, before its first
                    # barrier: a shared write at the end of the body it reads needs one there
                    # (`if tx == 0: head[0] += n` under `while head[0] < m:`)
                    tail: list = []
                    self.barrier_if_needed(dataclasses.replace(s, body=()), entry, tail)
                    new_body = tuple(new_body) + tuple(tail)
                out.append(dataclasses.replace(s, body=new_body))
                st.merge(entry)
                continue
            if isinstance(s, N.WarpGroups):
                run = self.warp_groups(s, st, out, run)
                continue
            if isinstance(s, (N.Reduce, N.FinalizeReducer, N.CombineRows)):
                self.reduction(s, st, out)
                continue
            if isinstance(s, N.SegmentReduce):  # writes its runs, then its threads meet
                # at a barrier (runtime.cute.rows.reduce_segments): the reads after it
                # are ordered; its writes wait for the reads of the runs before
                self.reduction(N.Reduce(s.kind, s.src, s.src, 1, scratch=s.dst, loc=s.loc),
                               st, out)
                out[-1] = s
                continue
            if isinstance(s, N.ThreadAllReduce):  # its values may read shared memory
                self.barrier_if_needed(s, st, out)
                st.read |= self.touches(s)[0]
                st.record(self.touches(s)[0], None)
                for name in s.scratch:
                    self.reduction(dataclasses.replace(s, scratch=name), st, out)
                    out.pop()
                out.append(s)
                continue
            if isinstance(s, N.If) and self.divergent(s.cond):
                # threads take different branches: a barrier inside would not be reached by
                # every thread, so the branch counts as one statement, ordered before it;
                # where its body shares shared data among its threads, it is split there
                # with a barrier between the halves (see :meth:`divergent_parts`)
                for k, part in enumerate(self.divergent_parts(s)):
                    if k:
                        st.barrier(out, part.loc)
                    self.barrier_if_needed(_mbarrier_ordered_loads_dropped(part), st, out)
                    self.ordered(part, st, out)
                continue
            elif isinstance(s, N.If):
                self.barrier_if_needed(N.Evaluate(s.cond), st, out)  # (its condition)
                a, b = st.copy(), st.copy()
                then, orelse = self.block(s.then, a), self.block(s.orelse, b)
                a.merge(b)
                st.written, st.read, st.generic, st.maps = a.written, a.read, a.generic, a.maps
                out.append(dataclasses.replace(s, then=then, orelse=orelse))
                continue
            self.ordered(s, st, out)
        return tuple(out)

    def ordered(self, s, st: _State, out: list) -> None:
        """``s`` appended after the barrier its accesses need, and counted as touching them."""
        self.barrier_if_needed(s, st, out)
        reads, writes, is_async = self.touches(s)
        st.read |= reads
        for b in writes:
            st.written[b] = st.written.get(b, False) or is_async
        for b in reads | writes:
            st.record([b], self.mapping(s, b))
        out.append(s)

    def divergent_parts(self, s: N.If) -> list:
        """``s`` (an ``if`` threads may disagree on) as the ``if``s to run one after the
        other with a block barrier between each two.  TileLang's sync pass orders the
        shared accesses inside such a branch too (``if tx < n: s[tx] = v; B[tx] =
        s[n - 1 - tx]`` reads what another thread of the branch wrote): where a statement
        of the body reads or writes a shared element that an earlier one of the body wrote
        (or writes one it read) at another index, or through a tile statement whose
        elements are spread over the threads, the body is split there, under the same
        condition, and the barrier goes between the two ``if``s, where every thread
        reaches it.  A body whose accesses are each thread's own (``s[tx]`` written, then
        read) stays one.  Where the split would change the program (a condition reading
        what the first half, or the ``else``, which runs in the first ``if``, writes; a
        name bound there from memory or an allocation there that the second half reads), a
        read after another thread's write is refused by name; a write after reads (``ov =
        vs[tx + stride]`` then ``vs[tx] = ...`` in a tree, whose threads read elements none
        of them writes) stays one statement, as before."""
        point = None if self.program_orders else self.sharing_point(s.then)
        if point is None:
            if not self.program_orders and s.orelse:
                other = self.sharing_point(s.orelse)
                if other is not None and other[1]:
                    self.refuse(s, "its else branch shares shared memory among its threads")
            return [s]
        cut, after_write = point
        head, tail = s.then[:cut], s.then[cut:]
        written = {b for b, _, w in accesses(head + s.orelse) if w}
        why = None
        if written & buffers_used(N.Evaluate(s.cond)):
            why = "its condition reads what the first part writes"
        lets = [t for t in head if isinstance(t, N.Let)]
        later = var_names(tail)
        for t in lets:  # a name the rest reads: bound again there when its value reads
            if t.var.name in later and buffers_used(N.Evaluate(t.value)):  # no memory
                why = why or f"'{t.var.name}' is bound in the first part from memory"
        allocs = {a.buffer.name for a in _allocs(head)} & buffers_used(tail)
        if allocs:
            why = why or f"the first part allocates {sorted(allocs)}"
        if why:
            if after_write:
                self.refuse(s, why)
            return [s]
        carried = tuple(t for t in lets if t.var.name in later)
        rest = dataclasses.replace(s, then=carried + tail, orelse=())
        return [dataclasses.replace(s, then=head)] + self.divergent_parts(rest)

    def sharing_point(self, body):
        """``(k, after_write)``: ``k`` the index of the first statement of ``body`` that
        touches a shared element an earlier statement of it wrote (``after_write``), or
        writes one it read, at another index or through a spread parallel nest: threads
        of the branch share data there.  None where every shared access repeats one index
        expression (each thread its own element)."""
        seen: dict[str, list] = {}
        for k, t in enumerate(body):
            spread = any(isinstance(x, N.For) and x.kind == "parallel" and not x.replicated
                         for x in walk_stmts([t])) or not isinstance(
                t, (N.Store, N.Let, N.Evaluate, N.If, N.For, N.While, N.AtomicAdd))
            mine = [(b, None if spread else idx, w)
                    for b, idx, w in accesses([t]) if b in self.shared]
            hit = None
            for b, idx, w in mine:
                for b2 in self.spread({b}):
                    for idx2, w2 in seen.get(b2, ()):
                        if (w or w2) and (idx is None or idx2 is None or b2 != b or idx2 != idx) \
                                and not (b2 == b and _apart(idx, idx2)):
                            hit = hit or w2
            if hit is not None:
                return k, hit
            for b, idx, w in mine:
                seen.setdefault(b, []).append((idx, w))
        return None

    def refuse(self, s: N.If, why: str):
        where = f"{s.loc}: " if s.loc else ""
        raise BarrierError(
            f"{where}an `if` on a condition threads may disagree on (it reads the thread "
            "index) writes shared memory in its body and then reads or writes it at another "
            "thread's element: the two need a block barrier between them, which threads "
            "outside the branch would not reach.  tilecute splits such a branch in two at "
            f"that point (the barrier between the halves) but cannot here: {why}.  Move the "
            "part after the exchange into its own `if` after the first")

    def warp_groups(self, s: N.WarpGroups, st: _State, out: list, run):
        """A ``T.ws`` region runs on some of the block's threads: a block barrier before it
        orders it after the block's earlier statements (every thread reaches it); inside,
        barriers are the region's own (named barriers over its threads, codegen), starting
        afresh; after it, everything it touched counts as touched since the last block
        barrier.  The shared writes of its TMA loads are the program's to order: the
        region's readers wait on the loads' mbarriers, and the program's mbarriers say when
        a buffer may be loaded again (TileLang's explicit warp specialization).

        Consecutive regions on disjoint threads (the branches of TileLang's ``if tx < 128:
        ... else: ...``, or ``with T.ws(0):`` then ``with T.ws(1):``) run side by side: the
        program orders them with its mbarriers (a block barrier between them would wait
        for the first region to end, which may wait on the second).  So a barrier a region
        of the run needs against the statements before the run goes before the run's first
        region, and none goes between them.  ``run``: the run so far ((its regions' thread
        ranges, the state before it, its position in ``out``), or None); returns the run
        with ``s``.  A region the compiler made for a fragment's threads (``synced``)
        starts a run of its own: a barrier orders it after its neighbour."""
        reads, writes, _ = self.touches(s)
        is_async = _async_writes(s)
        lo, hi = s.first_thread, s.first_thread + s.num_threads
        if run is None or s.synced or any(lo < b and a < hi for a, b in run[0]):
            run = ([], st.copy(), len(out))
        ranges, before, at = run
        if (self.spread(reads) & set(before.written) or
                self.spread(writes) & (before.read | set(before.written))) and \
                not self.program_orders:
            head: list = []
            before.barrier(head, s.loc)
            out[at:at] = head
            st.clear()  # (what the run's earlier regions touched counts again below)
            for t in out[at + len(head):]:
                r, w, _ = self.touches(t)
                st.read |= r
                for b in w:
                    st.written[b] = st.written.get(b, False) or _async_writes(t)
                st.record(r | w, None)
            at += len(head)
        body = self.block(s.body, _State())
        st.read |= reads
        for b in writes:
            st.written[b] = st.written.get(b, False) or is_async
        st.record(reads | writes, None)
        out.append(dataclasses.replace(s, body=body))
        return (ranges + [(lo, hi)], before, at)

    def tma_copy(self, s: N.TmaCopy, st: _State, out: list) -> None:
        """A TMA load may overwrite its shared buffer only after every thread is done with
        it (a barrier when it, or a buffer on its bytes, was read or written since the
        last one), and only after those accesses are fenced for the async proxy: TMA
        writes shared memory by another path than the threads' loads and stores, which a
        block barrier alone does not order it after (measured: FLA's KDA
        ``chunk_bwd_intra`` read ``q``'s tile, synchronised, and TMA-loaded ``dq`` onto
        its bytes; some of the reads saw ``dq``, a nondeterministic wrong ``dg``).  So
        that barrier fences first (``Barrier.fence_proxy``), and where the accesses were
        ordered by a barrier that did not fence, a fencing one is added; threads see the
        data after the mbarrier wait, so it leaves nothing to order.  A TMA store fences
        and synchronises the block itself (codegen) and then reads its buffer.  Its issuing
        thread does not wait for that read right away but before the next barrier
        (``TmaStoreWait``), the one before the buffer is written again: in a persistent
        kernel the read overlaps the next tile's main loop.  (A store is reached by the
        whole block, or its own barrier would hang: so are the barriers after it.)"""
        if s.src.buffer in self.shared:  # store
            st.clear(fenced=True)  # (the store fences and synchronises the block itself)
            st.read.add(s.src.buffer)
            st.record([s.src.buffer], None)
            if self.defer_stores:
                s = dataclasses.replace(s, wait_read=False)
                st.store_pending = self.deferred = True
        elif ({s.dst.buffer} | self.aliases.get(s.dst.buffer, set())) & st.touched() \
                and not self.program_orders:
            st.barrier(out, s.loc, fence=True)
        out.append(s)

    def reduction(self, s, st: _State, out: list) -> None:
        """A reduction across warps writes its shared ``scratch`` first and then
        synchronises (tilecute.runtime.cute.reduce / rows: a barrier after the writes and
        one after the reads), so its own reuse of the scratch and everything after it are
        ordered.  The scratch may share bytes with a buffer whose life ended just before
        (the shared-memory pass places them so): when that buffer was read or written since
        the last barrier, the scratch writes need a barrier first."""
        writes = {s.scratch} | self.aliases.get(s.scratch, set()) if s.scratch else set()
        if writes & (st.read | set(st.written)):
            st.barrier(out, s.loc)
        out.append(s)

    def conflicts(self, s, st: _State) -> bool:
        """Does ``s`` read a shared buffer written, or write one touched, since the last
        barrier?  (A buffer placed on some of another's bytes counts as that one.)"""
        reads, writes, _ = self.touches(s)
        reads, writes = self.spread(reads), self.spread(writes)
        return bool(reads & set(st.written) or writes & (st.read | set(st.written)))

    def barrier_if_needed(self, s, st: _State, out: list) -> None:
        """A barrier before ``s`` where it reads (writes) what was written (touched) since
        the last one.  It goes above the warpgroup turn waits just before ``s`` (the MMA
        overlap's named-barrier waits: each compute warpgroup waits there for the other's
        GEMMs to be issued): a barrier of all compute threads between a turn's wait and
        the GEMMs that end it waits for the warpgroup whose turn has not come, forever
        (a packed-GQA program whose Q tile the threads gather into shared memory hung the
        H100 there)."""
        if self.program_orders:
            return
        if self.conflicts(s, st):
            lanes = self.warp_local(s, st)
            if lanes:
                out.append(N.WarpSync(loc=getattr(s, "loc", None)))
                st.warp_ordered(lanes)
                return
            at = len(out)
            while at and isinstance(out[at - 1], N.NamedBarrier) and not out[at - 1].arrive:
                at -= 1
            placed: list = []
            st.barrier(placed, getattr(s, "loc", None))
            out[at:at] = placed


def _apart(a, b) -> bool:
    """Are index tuples ``a`` and ``b`` constants naming different elements (``pair[0]``
    then ``pair[1]``): no thread touches the other's element, whichever threads run them."""
    return a is not None and b is not None and len(a) == len(b) and \
        all(isinstance(x, N.Const) for x in (*a, *b)) and \
        any(x.value != y.value for x, y in zip(a, b))


def _is_call_anywhere(body, name: str) -> bool:
    """Does a call in ``body`` take buffer ``name`` (an atomic, a raw cp.async)?"""
    return any(isinstance(x, N.Call) and any(isinstance(a, N.Load) and a.buffer == name
                                             for a in x.args) for x in walk_nodes(body))


def _loop_step_index(x, var: str) -> bool:
    """Is ``x`` the loop variable ``var``, or it plus or minus a constant?"""
    if isinstance(x, N.Var):
        return x.name == var
    return isinstance(x, N.BinOp) and x.op in ("add", "sub") and isinstance(x.a, N.Var) and \
        x.a.name == var and isinstance(x.b, N.Const)


def _barriers(body) -> int:
    """The block barriers written in ``body`` (nested statements included)."""
    return sum(isinstance(t, N.Barrier) for t in walk_stmts(body))


def _program_ordered_loads_dropped(s):
    """``s`` without the TMA loads of its ``T.ws`` regions, whose shared writes the
    program orders with its mbarriers."""
    if isinstance(s, N.WarpGroups):
        return dataclasses.replace(s, body=tuple(
            _program_ordered_loads_dropped(t) for t in s.body
            if not (isinstance(t, N.TmaCopy) and t.barrier is not None)))
    names = BODY_FIELDS.get(type(s))
    if not names or not any(isinstance(t, N.WarpGroups) for t in walk_stmts([s])):
        return s
    return dataclasses.replace(s, **{n: tuple(_program_ordered_loads_dropped(t)
                                              for t in getattr(s, n)) for n in names})


def _is_call(s, name: str) -> bool:
    return isinstance(s, N.Evaluate) and isinstance(s.value, N.Call) and s.value.name == name


def _program_waited(s) -> bool:
    """Is ``s`` a T.async_copy nest: cp.async copies the program waits for itself
    (``T.ptx_wait_group``)?"""
    return isinstance(s, N.For) and s.kind == "parallel" and \
        parallel_nest(s)[-1].copy_instruction == N.ASYNC_COPY


def _cp_async_dropped(s):
    """``s`` without its ``T.ptx_cp_async`` statements and T.async_copy nests: the
    program's cp.async, whose writes land whenever they complete, which the program waits
    for itself (``T.cp_async_barrier_noinc`` on an mbarrier, or ``T.ptx_wait_group``,
    which counts as their write: see ``_Sync.raw_cp_async``); a block barrier would not
    order them."""
    def raw(t):
        return isinstance(t, N.Evaluate) and isinstance(t.value, N.Call) and \
            t.value.name == "ptx_cp_async" or _program_waited(t)
    if _program_waited(s):
        return s  # (the nest itself: what it writes, for the barrier before it is issued)
    names = BODY_FIELDS.get(type(s))
    if not names or not any(raw(t) for t in walk_stmts([s])):
        return s
    return dataclasses.replace(s, **{n: tuple(_cp_async_dropped(t) for t in getattr(s, n)
                                              if not raw(t)) for n in names})


def _async_writes(s) -> bool:
    """Does ``s`` hold a cp.async copy nest the passes wait for (not a T.async_copy's)?"""
    if isinstance(s, N.For) and s.kind == "parallel":
        return parallel_nest(s)[-1].async_copy and not _program_waited(s)
    if isinstance(s, (N.For, N.While)):
        return any(_async_writes(t) for t in s.body)
    if isinstance(s, N.If):
        return any(_async_writes(t) for t in s.then + s.orelse)
    if isinstance(s, N.WarpGroups):
        return any(_async_writes(t) for t in s.body)
    return False


# intrinsics whose value differs between the threads of a block: the thread index, a
# lane's shuffled or voted value, an atomic's old value, a random draw
_THREAD_VALUED = ("thread_idx", "activemask", "warp_activemask", "elect_one_sync") + \
    N.SHUFFLES + N.WARP_MATCHES + N.WARP_VOTES + N.WARP_REDUCTIONS + N.ATOMIC_RETURNS + N.RNG_DRAWS


def _reads_thread(e, names: set[str], locals_: frozenset = frozenset()) -> bool:
    return any(isinstance(x, N.Call) and x.name in _THREAD_VALUED or
               isinstance(x, N.Var) and x.name in names or
               isinstance(x, N.Load) and x.buffer in locals_ for x in walk_nodes(e))


def _thread_values(body, local: set[str]) -> tuple[set[str], set[str]]:
    """The names of ``body`` whose values differ between threads (``Let``s of expressions
    that read the thread index or such a name or local, the variables of loops whose
    start or extent does, and of the parallel nests spread over the threads), and its
    ``local`` buffers that may hold different values in different threads: one stored
    a value or at an index that reads such a name, or stored under a condition, in a
    loop or a region that some threads do not run alike.  A fragment's element is one
    value (the tile's), whichever thread reads it; shared and global loads at the same
    index are too."""
    names: set[str] = set()
    locals_: set[str] = set()

    def reads(e) -> bool:
        return _reads_thread(e, names, locals_)

    def visit(stmts, diverged: bool) -> None:
        for s in stmts:
            if isinstance(s, N.Let):
                if reads(s.value):
                    names.add(s.var.name)
            elif isinstance(s, N.Store):
                if s.buffer in local and (diverged or reads((s.indices, s.value))):
                    locals_.add(s.buffer)
            elif isinstance(s, N.For):
                spread = s.kind == "parallel" and not s.replicated
                if spread or reads((s.start, s.extent)):
                    names.add(s.var.name)
                visit(s.body, diverged or spread or reads((s.start, s.extent)))
            elif isinstance(s, N.While):
                visit(s.body, diverged or reads(s.cond))
            elif isinstance(s, N.If):
                d = diverged or reads(s.cond)
                visit(s.then, d)
                visit(s.orelse, d)
            elif isinstance(s, N.WarpGroups):
                visit(s.body, True)
            else:
                for name in BODY_FIELDS.get(type(s), ()):
                    visit(getattr(s, name), diverged)
    size = -1
    while size != len(names) + len(locals_):  # until a pass adds nothing
        size = len(names) + len(locals_)
        visit(body, False)
    return names, locals_


def _mbarrier_ordered_loads_dropped(s):
    """``s`` without its TMA loads that signal an mbarrier: a pipeline's refill under
    ``if thread_idx == 0:``, whose overwrite of a stage the pipeline's empty mbarriers
    order (the wait before it), not a block barrier."""
    names = BODY_FIELDS.get(type(s))
    if not names:
        return s
    return dataclasses.replace(s, **{n: tuple(
        _mbarrier_ordered_loads_dropped(t) for t in getattr(s, n)
        if not (isinstance(t, N.TmaCopy) and t.barrier is not None)) for n in names})


def _allocs(body):
    for s in body:
        if isinstance(s, N.Allocate):
            yield s
        elif isinstance(s, (N.For, N.While)):
            yield from _allocs(s.body)
        elif isinstance(s, N.If):
            yield from _allocs(s.then + s.orelse)
        elif isinstance(s, N.WarpGroups):
            yield from _allocs(s.body)


def insert_barriers(func: N.PrimFunc, program_orders: bool = False) -> N.PrimFunc:
    """``program_orders``: option disable_barrier_insertion (see :class:`_Sync`)."""
    kernels = []
    for scope in func.kernels:
        sync = _Sync(scope, program_orders)
        body = sync.block(scope.body, _State())
        body, _ = _async_copy_waits(body, False)
        if sync.deferred:  # no block exits before TMA has read its stores' tiles
            body += (N.TmaStoreWait(loc=scope.loc),)
        accs = {s.buffer.name for s in _allocs(scope.body)
                if s.layout is not None and s.layout.kind == "mma"}
        body = _exchange_syncs(body, accs, sync.aliases, loop=False)
        kernels.append(dataclasses.replace(scope, body=body))
    return dataclasses.replace(func, kernels=tuple(kernels))


def _hands_on(s) -> bool:
    """Does ``s`` hand this thread's shared writes to other threads or to the async proxy
    without a block barrier: an mbarrier arrive (TileLang's ``T.mbarrier_arrive`` /
    ``T.barrier_arrive``, not ``T.cp_async_barrier_noinc``, which waits for the copies
    itself), the program's ``T.sync_threads(id, count)``, ``T.fence_proxy_async()``, a
    TMA store (TMA reads the tile)?"""
    if isinstance(s, N.MBarrierArrive):
        return not s.cp_async
    if isinstance(s, N.NamedBarrier):
        return s.program
    if isinstance(s, N.Evaluate):
        return isinstance(s.value, N.Call) and s.value.name == "fence_proxy_async"
    return isinstance(s, N.TmaCopy) and s.barrier is None  # (a load has its mbarrier)


def _async_copy_waits(body, pending: bool) -> tuple[tuple, bool]:
    """``body`` with an ``AsyncCopyWait`` before each statement that hands this thread's
    shared writes on without a block barrier (:func:`_hands_on`) while a cp.async copy
    nest before it may still be in flight (``pending``), and whether one may be in flight
    at its end.  A program's ``T.copy`` into shared memory is synchronous: TileLang's
    ``T.copy; T.mbarrier_arrive(full)`` publishes the tile, and ``T.copy(A, s);
    T.copy(s, B)`` through a TMA store stores what was loaded.  A block barrier waits for
    the copies itself (``Barrier.wait_async``)."""
    out = []
    for s in body:
        if isinstance(s, N.Barrier):
            if pending and not s.wait_async:
                s = dataclasses.replace(s, wait_async=True)
            pending = False
        elif isinstance(s, N.For) and s.kind == "parallel":
            pending = pending or _async_writes(s)
        elif isinstance(s, (N.For, N.While)):
            entry = pending or _async_writes(s)  # (the copies of the step before)
            new, end = _async_copy_waits(s.body, entry)
            s = dataclasses.replace(s, body=new)
            pending = pending or end
        elif isinstance(s, N.If):
            then, a = _async_copy_waits(s.then, pending)
            orelse, b = _async_copy_waits(s.orelse, pending)
            s = dataclasses.replace(s, then=then, orelse=orelse)
            pending = a or b
        elif isinstance(s, N.WarpGroups):
            new, end = _async_copy_waits(s.body, pending)
            s = dataclasses.replace(s, body=new)
            pending = pending or end
        elif isinstance(s, N.AsyncCopyWait) or _is_call(s, "ptx_wait_group") and \
                s.value.args[0].value == 0:  # (the program's wait for all its groups)
            pending = False
        elif pending and _hands_on(s):
            out.append(N.AsyncCopyWait(loc=s.loc))
            pending = False
        out.append(s)
    return tuple(out), pending


def _exchange_syncs(body, accs: set[str], aliases: dict, loop: bool) -> tuple:
    """The rows reductions of MMA accumulators across warps (``runtime.cute.rows``: write
    the partials to the scratch, barrier, read them, barrier) whose second barrier another
    one makes redundant: a block barrier (or the first barrier of another such reduction)
    comes after it before anything touches its scratch again, in this body and, in a
    loop, around to the reduction itself.  Those get ``sync_after=False`` (MLA decode's
    row max and sum: 4 barriers per step instead of 6).  Compound statements count as
    touching what they touch anywhere inside, and as no barrier."""
    out = list(body)

    def synced(stmts, touched) -> bool:
        for t in stmts:
            if isinstance(t, N.Barrier):
                return True
            used = buffers_used(t)
            if used & touched:
                return False
            if isinstance(t, N.Reduce) and t.scratch and t.src in accs:
                return True  # (its partials go to its own scratch, then it syncs)
        return False
    for i, s in enumerate(out):
        if isinstance(s, N.Reduce) and s.scratch and s.src in accs:
            touched = {s.scratch} | aliases.get(s.scratch, set())
            if synced(out[i + 1:] + (out[:i + 1] if loop else []), touched):
                out[i] = dataclasses.replace(s, sync_after=False)
        elif isinstance(s, (N.For, N.While)) and getattr(s, "kind", "") != "parallel":
            out[i] = dataclasses.replace(s, body=_exchange_syncs(s.body, accs, aliases, True))
        elif isinstance(s, N.If):
            out[i] = dataclasses.replace(s, then=_exchange_syncs(s.then, accs, aliases, False),
                                         orelse=_exchange_syncs(s.orelse, accs, aliases, False))
    return tuple(out)
