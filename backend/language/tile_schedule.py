"""TileLang's ``T.PersistentTileScheduler``: a persistent kernel's walk over a 2-D grid of
tiles, as parse-time Python that builds IR expressions.

A persistent kernel launches a fixed number of workers (blocks, or clusters of blocks)
and has each walk the tiles ``w, w + num_workers, w + 2 * num_workers, ...`` of the
grid flattened into one linear order.  The scheduler decodes a linear tile index into
the tile's ``(m, n)`` in TileLang's order (``coord``); its stateful form keeps the
cursor in four ``int32`` ``T.alloc_var``s, which the parser allocates where the
scheduler is assigned (``sched = T.PersistentTileScheduler(...)`` inside a
``T.Kernel``) and which ``init`` / ``next_tile`` store into::

    sched = T.PersistentTileScheduler(m_blocks, n_blocks, num_workers=sms, swizzle_size=8)
    sched.init(block_id)
    while sched.valid():
        bx, by = sched.m_idx, sched.n_idx
        ...
        sched.next_tile()

The order (TileLang's): clustering along M first reshapes the grid to
``ceildiv(num_m_tiles, cluster_size) x num_n_tiles``; the "fast" axis (M with
``column_major``, else N) is swept whole for each panel of ``swizzle_size`` tiles of the
slow axis, the last panel narrower where ``swizzle_size`` does not divide it.

This module imports the IR and the expression helpers only (no parser, no compiler).
"""

from __future__ import annotations

from ..ir import nodes as N
from . import ops


class StateStores(tuple):
    """What ``init`` / ``next_tile`` make: ``(buffer, value)`` stores into the scheduler's
    one-element state buffers, in order; the parser turns each into a ``Store`` at the
    call's line (a read of a buffer stored earlier in the tuple reads the new value, as
    TileLang's inlined method reads it)."""


_STATE = ("m_idx", "n_idx", "linear_idx", "current_iter")


def _positive_int(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"T.PersistentTileScheduler: {name} must be a positive int known "
                         f"when the kernel is built, got {v!r}")
    return v


def _tile_count(name: str, v):
    if isinstance(v, bool) or not isinstance(v, (int, N.Expr)) or \
            isinstance(v, N.Expr) and not N.is_int(v.dtype):
        raise ValueError(f"T.PersistentTileScheduler: {name} must be an integer (an int or an "
                         f"integer expression), got {v!r}")
    return v


def _device_sms() -> int:
    """TileLang's ``driver.get_num_sms()``: CUDA device 0's SM count, read through torch
    (as ``tilecute.carver.arch.driver`` reads it; that module stands later in the
    pipeline than the frontend)."""
    import torch

    if not torch.cuda.is_available():
        raise ValueError("T.PersistentTileScheduler: num_workers=None is the GPU's SM count "
                         "// cluster_size (TileLang reads it from the device when the kernel "
                         "is built), and no CUDA GPU is available: give num_workers")
    return torch.cuda.get_device_properties(0).multi_processor_count


class PersistentTileScheduler:
    """TileLang's ``T.PersistentTileScheduler(num_m_tiles, num_n_tiles, num_workers=None,
    swizzle_size=1, column_major=True, cluster_size=1, stateful=True, name=None)``.

    ``num_workers`` defaults, as TileLang's, to the GPU's SM count ``// cluster_size``
    (read from the device when the kernel is built; without a GPU that is an error
    naming it).  With ``stateful=False`` only ``coord`` (and the parse-time attributes)
    may be used; with ``stateful=True`` the state is the parser's to allocate
    (:meth:`bind_state`), and ``m_idx`` / ``n_idx`` / ``linear_idx`` / ``current_iter``
    read it."""

    def __init__(self, num_m_tiles, num_n_tiles, num_workers=None, swizzle_size: int = 1,
                 column_major: bool = True, cluster_size: int = 1, stateful: bool = True,
                 name: str | None = None):
        num_m_tiles = _tile_count("num_m_tiles", num_m_tiles)
        num_n_tiles = _tile_count("num_n_tiles", num_n_tiles)
        self.cluster_size = _positive_int("cluster_size", cluster_size)
        self.swizzle_size = _positive_int("swizzle_size", swizzle_size)
        for what, v in (("column_major", column_major), ("stateful", stateful)):
            if not isinstance(v, bool):
                raise ValueError(f"T.PersistentTileScheduler: {what} must be a bool known when "
                                 f"the kernel is built, got {v!r}")
        if name is not None and not (isinstance(name, str) and name.isidentifier()):
            raise ValueError(f"T.PersistentTileScheduler: name must be an identifier, got "
                             f"{name!r}")
        if num_workers is None:
            num_workers = _device_sms() // self.cluster_size
        self.num_workers = _tile_count("num_workers", num_workers)
        self.stateful, self.name = stateful, name
        self._column_major = column_major
        m_clusters = num_m_tiles if self.cluster_size == 1 else \
            ops.ceildiv(num_m_tiles, self.cluster_size)
        self._total_tiles = m_clusters * num_n_tiles
        # the fast axis is swept whole inside a panel of `swizzle_size` slow-axis tiles
        self._primary, self._secondary = (m_clusters, num_n_tiles) if column_major \
            else (num_n_tiles, m_clusters)
        self._state: dict[str, N.Buffer] | None = None

    # ---- state (allocated by the parser) ---------------------------------------------
    def state_names(self) -> tuple[str, ...]:
        """The names the parser gives the state buffers (``sched_m_idx`` ... with
        ``name="sched"``, as TileLang names them; plain ``m_idx`` ... without)."""
        return tuple(f"{self.name}_{s}" if self.name else s for s in _STATE)

    def bind_state(self, buffers: tuple[N.Buffer, ...]) -> None:
        self._state = dict(zip(_STATE, buffers))

    def _buffer(self, what: str) -> N.Buffer:
        if not self.stateful:
            raise AttributeError(f"T.PersistentTileScheduler(stateful=False) has no "
                                 f"{what}: a stateless scheduler only decodes tiles "
                                 "(`bx, by = sched.coord(tile_id)`)")
        if self._state is None:
            raise AttributeError(f"T.PersistentTileScheduler's {what}: its state is "
                                 "allocated where it is assigned to a name inside a T.Kernel "
                                 "(`sched = T.PersistentTileScheduler(...)`)")
        return self._state[what]

    def _load(self, what: str) -> N.Expr:
        buf = self._buffer(what)
        return N.Load(buf.name, (N.Const(0, "int32"),), buf.dtype)

    @property
    def m_idx(self) -> N.Expr:
        """The current tile's row (the cluster row when ``cluster_size > 1``)."""
        return self._load("m_idx")

    @property
    def n_idx(self) -> N.Expr:
        return self._load("n_idx")

    @property
    def linear_idx(self) -> N.Expr:
        return self._load("linear_idx")

    @property
    def current_iter(self) -> N.Expr:
        """How many tiles this worker has moved past (0 at the first)."""
        return self._load("current_iter")

    # ---- the walk --------------------------------------------------------------------
    def coord(self, tile_id):
        """``(m, n)`` of linear tile ``tile_id`` (expressions; stores nothing)."""
        if isinstance(tile_id, bool) or not isinstance(tile_id, (int, N.Expr)):
            raise ValueError(f"T.PersistentTileScheduler.coord: tile_id must be an integer, "
                             f"got {tile_id!r}")
        primary, secondary, swizzle = self._primary, self._secondary, self.swizzle_size
        group = tile_id // (primary * swizzle)
        base = group * swizzle
        # the panel's width along the slow axis: narrower for a ragged last panel, and at
        # least 1 so that a tile past the end never divides by zero
        width = ops.max(1, ops.min(swizzle, secondary - base))
        in_group = tile_id - group * (primary * swizzle)
        fast = in_group // width
        slow = base + in_group % width
        return (fast, slow) if self._column_major else (slow, fast)

    def valid(self):
        """This worker's cursor is still inside the grid."""
        return self.linear_idx < self._total_tiles

    def update_current_idx(self, linear_idx) -> StateStores:
        """Set ``m_idx`` / ``n_idx`` to tile ``linear_idx``'s coordinates."""
        return self._update([], linear_idx)

    def _update(self, stores: list, linear_idx=None) -> StateStores:
        m, n = self.coord(self.linear_idx if linear_idx is None else linear_idx)
        stores += [(self._buffer("m_idx"), m), (self._buffer("n_idx"), n)]
        return StateStores(stores)

    def init(self, worker_id) -> StateStores:
        """Start the walk at tile ``worker_id`` (the block, or cluster, index)."""
        return self._update([(self._buffer("current_iter"), 0),
                             (self._buffer("linear_idx"), worker_id)])

    def next_tile(self) -> StateStores:
        """Move ``num_workers`` tiles on."""
        return self._update([(self._buffer("current_iter"), self.current_iter + 1),
                             (self._buffer("linear_idx"), self.linear_idx + self.num_workers)])
