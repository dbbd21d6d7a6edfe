"""TileLang's ``tilelang.autotuner.param``: the compile and profile arguments of a tuning
run as frozen records, and :class:`AutotuneResult` (with ``save_to_disk`` /
``load_from_disk``).  tilecute's :class:`~tilecute.autotuner.AutoTuner` takes the same
values through ``set_compile_args`` / ``set_profile_args``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..utils import TensorSupplyType
from . import AutotuneResult  # noqa: F401  (TileLang's name here)


@dataclass(frozen=True)
class CompileArgs:
    """``tilecute.compile``'s arguments for every config of a run (TileLang's fields and
    defaults); ``compile_program(func)`` compiles one."""

    out_idx: Any = None
    execution_backend: str = "auto"
    target: Any = "auto"
    target_host: Any = None
    verbose: bool = False
    pass_configs: Optional[dict] = None

    def compile_program(self, program):
        from ..api import compile as compile_func

        return compile_func(program, out_idx=self.out_idx,
                            execution_backend=self.execution_backend, target=self.target,
                            target_host=self.target_host, verbose=self.verbose,
                            pass_configs=self.pass_configs)


@dataclass(frozen=True)
class ProfileArgs:
    """``AutoTuner.set_profile_args``'s values (TileLang's fields and defaults)."""

    warmup: int = 25
    rep: int = 100
    timeout: int = 30
    backend: str = "event"
    supply_type: TensorSupplyType = TensorSupplyType.Auto
    ref_prog: Optional[Callable] = None
    supply_prog: Optional[Callable] = None
    rtol: float = 1e-2
    atol: float = 1e-2
    max_mismatched_ratio: float = 0.01
    skip_check: bool = False
    manual_check_prog: Optional[Callable] = None
    cache_input_tensors: bool = True
