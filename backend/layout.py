"""``tilecute.layout``: TileLang's ``tilelang.layout`` under tilecute's name, so that

    from tilecute.layout import make_swizzled_layout       # from tilelang.layout import ...
    T.annotate_layout({A_shared: make_swizzled_layout(A_shared)})

reads as in TileLang (``import tilecute as tilelang`` then ``tilelang.layout.<name>``
too).  The constructors and what tilecute makes of each are in
:mod:`tilecute.language.layouts` and docs/tile-ops.md ("T.annotate_layout"); TileLang's
other names here (``make_volta_swizzled_layout`` ...) are
errors saying why when a prim_func uses them.  TileLang's submodules import by their paths
(``from tilecute.layout.swizzle import make_full_bank_swizzled_layout``, ``.fragment``,
``.layout``, ``.swizzle_mode``, ``.gemm_sp``), holding the same objects.

Imports only the frontend's layout module (no CUTLASS, no torch).
"""

from __future__ import annotations

from .language.layouts import CONSTRUCTORS, UNSUPPORTED

make_swizzled_layout = CONSTRUCTORS["make_swizzled_layout"]
make_wgmma_swizzled_layout = CONSTRUCTORS["make_wgmma_swizzled_layout"]
make_full_bank_swizzled_layout = CONSTRUCTORS["make_full_bank_swizzled_layout"]
make_half_bank_swizzled_layout = CONSTRUCTORS["make_half_bank_swizzled_layout"]
make_quarter_bank_swizzled_layout = CONSTRUCTORS["make_quarter_bank_swizzled_layout"]
make_linear_layout = CONSTRUCTORS["make_linear_layout"]


def Layout(shape, forward_fn):  # noqa: N802
    """TileLang's ``tilelang.layout.Layout(shape, forward_fn)`` (``T.Layout``'s index map):
    honored by ``T.annotate_layout`` on a global tensor (docs/tile-ops.md, "An index map
    on a global tensor"); on a shared buffer it is refused there."""
    from .language.values import Layout as _layout

    return _layout(shape, forward_fn)


def Fragment(shape, forward_fn=None, forward_thread_fn=None, replicate=1,  # noqa: N802
             forward_index_fn=None):
    """TileLang's ``tilelang.layout.Fragment`` (``T.Fragment``): honored by
    ``T.annotate_layout`` on a fragment and as ``T.Parallel(loop_layout=...)`` where its
    map is one of tilecute's fragment layouts (docs/ir.md, "User layouts")."""
    from .language.custom_layouts import Fragment as _fragment

    return _fragment(shape, forward_fn, forward_thread_fn, replicate, forward_index_fn)


def make_fully_replicated_layout_fragment(buffer, threads):
    """TileLang's ``make_fully_replicated_layout_fragment(buffer, threads)`` (``Fragment::
    FullyReplicated``): every one of ``threads`` threads holds the whole buffer, element
    ``idx`` at its row-major position; the ``T.Fragment`` of that map, read as tilecute's
    replicated layout."""
    dims = [int(getattr(d, "value", d)) for d in buffer.shape]

    def forward(*idx_rep):
        *idx, rep = idx_rep
        flat = 0
        for i, n in zip(idx, dims):
            flat = flat * n + i
        return rep, flat

    return Fragment(tuple(buffer.shape), forward_fn=forward, replicate=threads)


def __getattr__(name: str):
    if name in UNSUPPORTED:
        return UNSUPPORTED[name]
    raise AttributeError(f"module 'tilecute.layout' has no attribute {name!r}")


def _submodule(name: str, names: dict, refused: tuple):
    """TileLang's ``tilelang.layout.<name>`` module (``from tilelang.layout.swizzle import
    make_swizzled_layout``): the same objects as this module's, importable by that path."""
    import sys
    import types

    module = types.ModuleType(f"{__name__}.{name}", f"TileLang's tilelang.layout.{name}: "
                                                    f"the names of {__name__} it holds.")
    module.__dict__.update(names)
    module.__all__ = list(names)

    def attr(key: str):
        if key in refused:
            return UNSUPPORTED[key]
        raise AttributeError(f"module '{module.__name__}' has no attribute {key!r}")

    module.__getattr__ = attr
    sys.modules[module.__name__] = module
    return module


swizzle = _submodule("swizzle", {**CONSTRUCTORS, "make_fully_replicated_layout_fragment":
                                 make_fully_replicated_layout_fragment},
                     ("make_volta_swizzled_layout", "make_tcgen05mma_swizzled_layout",
                      "make_gemm_fragment_8x8", "make_gemm_fragment_8x8_transposed"))
fragment = _submodule("fragment", {"Fragment": Fragment}, ())
layout = _submodule("layout", {"Layout": Layout}, ())
swizzle_mode = _submodule("swizzle_mode", {}, ("SwizzleMode",))
gemm_sp = _submodule("gemm_sp", {}, ("make_cutlass_metadata_layout",))

__all__ = [*CONSTRUCTORS, "Layout", "Fragment", "make_fully_replicated_layout_fragment"]
