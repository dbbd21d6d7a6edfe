"""The pass pipeline: the whole compiler between the IR and the code generator, in
order.  Each pass is ``PrimFunc -> PrimFunc`` and records what it decides on the IR
(layouts, stages, descriptors, vector accesses, shared-memory slots); the launch ABI is
then read off the lowered function (:mod:`.launch_abi`)."""

from __future__ import annotations

from ..ir import nodes as N
from ..ir.validate import validate
from ..options import check_options
from ..target import check_arch
from .gemm import plan_gemm
from .launch_abi import KernelPlan, build_abi
from .layout import infer_layouts
from .shared_memory import assign_shared_memory
from .sync import insert_barriers
from .tileops import lower_tile_ops
from .software_pipeline import pipeline_tma_loads
from .tma_copies import lower_copies_to_tma
from .tma_descriptors import assign_tma_descriptors
from .vectorize import plan_vectorization
from .warp_specialize import split_roles, warp_specialize


def passes(arch: str, options: dict) -> list[tuple[str, object]]:
    """The passes for ``arch`` and compile ``options``, in order: (name, pass)."""
    return [
        ("validate", lambda f: (validate(f), f)[1]),
        ("select_mma", lambda f: plan_gemm(f, arch, wgmma=not options.get("disable_wgmma", False))),
        ("lower_copies_to_tma",
         lambda f: lower_copies_to_tma(f, arch, auto=not options.get("disable_tma", False))),
        ("warp_specialize", lambda f: warp_specialize(f, arch)),
        ("pipeline_tma_loads", lambda f: pipeline_tma_loads(f, arch)),
        ("assign_tma_descriptors", lambda f: assign_tma_descriptors(f, arch)),
        ("lower_tile_ops", lower_tile_ops),
        ("infer_layouts", infer_layouts),
        ("vectorize", lambda f: plan_vectorization(f, arch)),
        ("insert_barriers", insert_barriers),
        ("split_roles", lambda f: split_roles(f, arch)),
        ("assign_shared_memory", lambda f: assign_shared_memory(f, arch)),
    ]


def run_passes(func: N.PrimFunc, arch: str = "sm_90a", options: dict | None = None) -> N.PrimFunc:
    options = check_options(options)
    for _, p in passes(arch, options):
        func = p(func)
    return func


def lower(func: N.PrimFunc, arch: str = "sm_90a", options: dict | None = None) -> KernelPlan:
    """Run the passes for ``arch`` with compile ``options`` and read off the launch ABI."""
    return build_abi(run_passes(func, arch, options), arch)
