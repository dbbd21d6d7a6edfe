"""tilecute's passes (``pipeline.PASSES`` lists them in order; one module each).

As TileLang's ``tilelang.transform``, this package also serves ``PassConfigKey`` (the
pass-config keys, :mod:`tilecute.options`).  TileLang's TIR passes and pass context
(``PassContext``, ``Simplify`` ...) work on TVM TIR, which tilecute does not
have: they import, and using one is an error naming it; ``simplify_prim_func`` is
served by :mod:`tilecute.transform.simplify` (the prim_func as it is: TVM's Simplify does
not change what a program computes).  Importing this package imports no pass.
"""

from ..options import PassConfigKey  # noqa: F401
from ..refusals import refusing_getattr

_refused = refusing_getattr(__name__, {n: "it runs TVM TIR passes; tilecute has no TVM "
                                          "(its passes: tilecute.transform.pipeline)"
                                       for n in ("PassContext", "Simplify", "get_pass_context")})


def __getattr__(name: str):
    if name == "simplify_prim_func":  # imported here when asked for (no pass at import)
        from .simplify import simplify_prim_func

        return simplify_prim_func
    return _refused(name)
