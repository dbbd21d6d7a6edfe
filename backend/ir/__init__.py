"""tilecute's tile IR: nodes, printer, JSON form and validator."""

from .nodes import *  # noqa: F401,F403
from .nodes import PrimFunc, KernelScope, Buffer, Var, Const  # noqa: F401
from .serialize import from_json, to_json, canonical_json, SCHEMA_VERSION  # noqa: F401
from .printer import print_func  # noqa: F401
from .validate import validate, ValidationError  # noqa: F401
