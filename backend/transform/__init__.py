"""tilecute's passes (``pipeline.PASSES`` lists them in order; one module each).

As TileLang's ``tilelang.transform``, this package also serves ``PassConfigKey`` (the
pass-config keys, :mod:`tilecute.options`).  TileLang's TIR passes and pass context
(``simplify_prim_func``, ``PassContext`` ...) work on TVM TIR, which tilecute does not
have: they import, and using one is an error naming it.  Importing this package imports
no pass.
"""

from ..options import PassConfigKey  # noqa: F401
from ..refusals import refusing_getattr

__getattr__ = refusing_getattr(__name__, {n: "it runs TVM TIR passes; tilecute has no TVM "
                                             "(its passes: tilecute.transform.pipeline)"
                                          for n in ("simplify_prim_func", "PassContext",
                                                    "Simplify", "get_pass_context")})
