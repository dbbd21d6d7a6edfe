"""TileLang's layout constructors (``tilelang.layout.make_swizzled_layout`` ...), the
values of ``T.annotate_layout({buffer: layout})``, as tilecute honors them.

A constructor is not a Python function a program calls: the parser recognises a call of
one inside a ``@T.prim_func`` body, binds its arguments to TileLang's signature and
calls :meth:`LayoutConstructor.resolve` with the buffer, which returns the
:class:`tilecute.ir.nodes.Layout` that tilecute gives the buffer (or raises a
``ValueError`` saying why it cannot).  What each one becomes:

- ``make_full_bank_swizzled_layout`` / ``make_half_bank_swizzled_layout`` /
  ``make_quarter_bank_swizzled_layout``: TileLang's 128 / 64 / 32-byte swizzles, which
  are tilecute's ``tma_swizzled`` layouts with ``swizzle`` 128 / 64 / 32 (the same XOR
  of 16-byte units by row, the last dim cut into chunks of that many bytes stored one
  after another; for a buffer of more than 2 dims tilecute puts the chunks outermost,
  TileLang the leading dims: a different placement of the same values);
- ``make_swizzled_layout`` / ``make_wgmma_swizzled_layout``: the widest of those that
  divides a row, as TileLang picks it (``MakeGemmABLayout`` /
  ``MakeGemmABLayoutHopper``); where TileLang picks a padded layout or its float64
  layouts, which tilecute does not have, an error;
- ``make_linear_layout``: ``row_major``.

Imports only the IR nodes and the dtype table (``tilecute.layout`` re-exports it).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

from ..ir import nodes as _N
from ..runtime.dtypes import DTYPES


class LayoutConstructor:
    """``tilelang.layout.<name>(buffer, ...)``: the parser binds a call to
    ``signature`` and calls :meth:`resolve` with the buffer it names."""

    def __init__(self, fn):
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        sig = inspect.signature(fn)
        self.__signature__ = sig.replace(parameters=[
            p.replace(annotation=p.empty) for p in sig.parameters.values()])
        self._fn = fn

    @property
    def signature(self) -> inspect.Signature:
        return self.__signature__

    def resolve(self, buffer: _N.Buffer, **kwargs) -> _N.Layout:
        return self._fn(buffer, **kwargs)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            f"tilecute.layout.{self.__name__}(buffer) is a layout for T.annotate_layout "
            "inside a @T.prim_func body (the frontend reads it; it is not a Python function)")

    def __repr__(self) -> str:
        return f"<tilecute.layout.{self.__name__}{self.signature}>"


@dataclass(frozen=True)
class Resolved:
    """A constructor's call in a prim_func: the buffer it was called on and its layout."""

    buffer: _N.Buffer
    layout: _N.Layout


class UnsupportedLayout:
    """A ``tilelang.layout`` name tilecute does not honor: using it in a prim_func is an
    error that says so and why."""

    def __init__(self, name: str, why: str):
        self.__name__, self.why = name, why

    def message(self) -> str:
        return (f"tilelang.layout.{self.__name__} is a TileLang layout that tilecute does not "
                f"support: {self.why}")

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(self.message())

    def __getattr__(self, name: str):  # `SwizzleMode.SWIZZLE_128B`: the same error, named
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(f"tilelang.layout.{self.__name__}.{name}: {self.message()}")

    def __repr__(self) -> str:
        return f"<tilecute.layout.{self.__name__}: not supported by tilecute>"


CONSTRUCTORS: dict[str, LayoutConstructor] = {}


def _constructor(fn):
    c = LayoutConstructor(fn)
    CONSTRUCTORS[c.__name__] = c
    return c


# ---- TileLang's rules (src/layout/gemm_layouts.cc) ----------------------------------------
_BANKS = {8: 128, 4: 64, 2: 32}  # 16-byte units a swizzle XORs -> its bytes


def _shape(form: str, buf: _N.Buffer) -> tuple[int, int, int]:
    """(rows, cols, element bits) of the last two dims, as TileLang's swizzles read them."""
    if buf.ndim < 2:
        raise ValueError(f"{form}: '{buf.name}' has {buf.ndim} dim; a swizzled layout needs 2 or "
                         "more (TileLang's rule)")
    rows, cols = (int(d.value) for d in buf.shape[-2:])
    return rows, cols, DTYPES[buf.dtype].bits


def _bank(form: str, buf: _N.Buffer, units: int) -> _N.Layout:
    rows, cols, bits = _shape(form, buf)
    vector = 128 // bits
    if not (rows == 4 or rows % 8 == 0):
        raise ValueError(f"{form}: '{buf.name}' has {rows} rows; the swizzle repeats every 8 rows, "
                         "so the rows must be a multiple of 8 (TileLang's rule)")
    if cols % (vector * units):
        raise ValueError(f"{form}: rows of '{buf.name}' are {cols} {buf.dtype} "
                         f"({cols * bits // 8} bytes), not a multiple of the swizzle's "
                         f"{_BANKS[units]} bytes")
    return _N.Layout("tma_swizzled", swizzle=_BANKS[units])


def _widest(buf: _N.Buffer, rows_ok: bool):
    rows, cols, bits = _shape("", buf)
    vector = 128 // bits
    for units in (8, 4, 2):
        if rows_ok and cols % (vector * units) == 0:
            return units
    return None


def _padded(form: str, buf: _N.Buffer, why: str) -> ValueError:
    return ValueError(f"{form}: for '{buf.name}' ({' x '.join(str(d.value) for d in buf.shape)} "
                      f"{buf.dtype}) TileLang picks {why}, which tilecute does not have; annotate "
                      "a swizzle tilecute has (make_quarter/half/full_bank_swizzled_layout, "
                      "make_linear_layout) or leave the layout to tilecute")


def _hopper(form: str, buf: _N.Buffer) -> _N.Layout:
    """``MakeGemmABLayoutHopper``: the widest bank swizzle when the rows are whole 8-row
    periods, else row-major when a row is whole 16-byte vectors."""
    rows, cols, bits = _shape(form, buf)
    if bits == 64:
        if cols % 16 == 0:
            raise _padded(form, buf, "its float64 GEMM operand layout")
        return _bank(form, buf, 2) if rows % 8 == 0 else _N.Layout("row_major")
    units = _widest(buf, rows % 8 == 0)
    if units is not None:
        return _bank(form, buf, units)
    if cols % (128 // bits) == 0:
        return _N.Layout("row_major")
    raise ValueError(f"{form}: rows of '{buf.name}' are {cols} {buf.dtype}, not whole 16-byte "
                     "vectors (TileLang has no layout for it either)")


# ---- the constructors -----------------------------------------------------------------------
@_constructor
def make_swizzled_layout(buffer, k_major=True, allow_pad=True):
    """The widest bank swizzle (128, 64 or 32 bytes) that divides a row of ``buffer``:
    TileLang's GEMM operand layout.  ``allow_pad=False``: TileLang's Hopper rule (row-major
    when no swizzle fits)."""
    form = "tilecute.layout.make_swizzled_layout"
    if not isinstance(k_major, bool) or not isinstance(allow_pad, bool):
        raise ValueError(f"{form}: k_major and allow_pad are True or False, got "
                         f"{k_major!r} and {allow_pad!r}")
    if not allow_pad:
        return _hopper(form, buffer)
    rows, cols, bits = _shape(form, buffer)
    if bits == 64:
        raise _padded(form, buffer, "its float64 GEMM operand layout")
    if bits == 8 and not k_major:
        raise _padded(form, buffer, "a padded layout (8-bit, k_major=False)")
    units = _widest(buffer, True)
    if units is None:
        raise _padded(form, buffer, "a padded layout (no swizzle divides its rows)")
    return _bank(form, buffer, units)


@_constructor
def make_wgmma_swizzled_layout(buffer, continuity=None, k_major=True):
    """TileLang's wgmma operand layout: as ``make_swizzled_layout(buffer,
    allow_pad=False)`` (``continuity`` and ``k_major`` matter to float64 only, which is
    refused: TileLang's other dtypes take the widest swizzle either way)."""
    form = "tilecute.layout.make_wgmma_swizzled_layout"
    if continuity is not None and (not isinstance(continuity, int) or isinstance(continuity, bool)):
        raise ValueError(f"{form}: continuity is an int or None, got {continuity!r}")
    if not isinstance(k_major, bool):
        raise ValueError(f"{form}: k_major is True or False, got {k_major!r}")
    return _hopper(form, buffer)


@_constructor
def make_full_bank_swizzled_layout(buffer):
    """The 128-byte swizzle (``tma_swizzled``, ``swizzle=128``)."""
    return _bank("tilecute.layout.make_full_bank_swizzled_layout", buffer, 8)


@_constructor
def make_half_bank_swizzled_layout(buffer):
    """The 64-byte swizzle (``tma_swizzled``, ``swizzle=64``)."""
    return _bank("tilecute.layout.make_half_bank_swizzled_layout", buffer, 4)


@_constructor
def make_quarter_bank_swizzled_layout(buffer):
    """The 32-byte swizzle (``tma_swizzled``, ``swizzle=32``)."""
    return _bank("tilecute.layout.make_quarter_bank_swizzled_layout", buffer, 2)


@_constructor
def make_linear_layout(buffer_or_load_or_region):
    """Row-major, unswizzled (``row_major``)."""
    return _N.Layout("row_major")


_CUSTOM = ("tilecute lays buffers out with the layouts of tilecute.ir.nodes.Layout "
           "(tilecute.layout's make_*_swizzled_layout and make_linear_layout name them); an "
           "index map of the program's own (T.Layout(shape, forward_fn)) is honored on "
           "global tensors and shared buffers")
UNSUPPORTED = {
    "make_volta_swizzled_layout": UnsupportedLayout(
        "make_volta_swizzled_layout", "it is sm_70's MMA operand layout"),
    "make_tcgen05mma_swizzled_layout": UnsupportedLayout(
        "make_tcgen05mma_swizzled_layout", "it is sm_100's MMA operand layout"),
    "make_gemm_fragment_8x8": UnsupportedLayout(
        "make_gemm_fragment_8x8", "it is mma.sync's 8x8 register layout; tilecute takes a "
        "T.Fragment whose map is its blocked or replicated layout"),
    "make_gemm_fragment_8x8_transposed": UnsupportedLayout(
        "make_gemm_fragment_8x8_transposed", "it is mma.sync's 8x8 register layout; tilecute "
        "takes a T.Fragment whose map is its blocked or replicated layout"),
    "make_cutlass_metadata_layout": UnsupportedLayout(
        "make_cutlass_metadata_layout", "tilecute has no sparse GEMM"),
    "SwizzleMode": UnsupportedLayout("SwizzleMode", "tilecute.ir.nodes.Layout names swizzles"),
}
