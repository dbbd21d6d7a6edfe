"""TileLang's ``tilelang.utils`` under tilecute's name: ``TensorSupplyType``,
``torch_assert_close``, ``map_torch_type``, ``make_tensor`` and the rest of
``tilelang.utils.tensor`` (:mod:`tilecute.utils.tensor`), ``deprecated``, and
``tilelang.utils.device`` (:mod:`tilecute.utils.device`, imported by name: it imports
torch).

TileLang's TIR buffer helpers (``is_shared``, ``retrieve_stride`` ...) take TVM TIR
objects, which tilecute (standalone, no TVM) does not have: they import, and using one is
an error naming it.  Imports nothing heavy (torch on use only).
"""

from __future__ import annotations

import functools
import warnings

from ..refusals import refusing_getattr
from .tensor import (  # noqa: F401
    TensorSupplyType, fp8_remove_negative_zeros_, get_tensor_supply, is_float8_dtype,
    make_tensor, map_torch_type, torch_assert_close,
)


def deprecated(method_name: str, new_method_name: str | None = None):
    """TileLang's decorator: calling the function warns (``DeprecationWarning``) that
    ``method_name`` is deprecated (in favour of ``new_method_name``)."""

    def wrap(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            hint = f"; use {new_method_name} instead" if new_method_name else ""
            warnings.warn(f"{method_name} is deprecated{hint}", DeprecationWarning, stacklevel=2)
            return fn(*args, **kwargs)

        return call

    return wrap


_TIR = "it takes TVM TIR buffers/expressions, which tilecute (standalone, no TVM) does not have"
__getattr__ = refusing_getattr(__name__, {n: _TIR for n in (
    "is_global", "is_shared", "is_shared_dynamic", "is_tensor_memory", "is_fragment",
    "is_local", "array_reduce", "retrieve_stride", "retrieve_shape",
    "retrive_ptr_from_buffer_region", "is_full_region", "to_buffer_region",
    "get_buffer_region_from_load", "get_prim_func_name", "side_effect")})
