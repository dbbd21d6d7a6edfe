"""The pass pipeline: the whole compiler between the IR and the code generator, in
order.  Each pass is ``PrimFunc -> PrimFunc`` (``Pass.run(func, arch, options)``) and
records what it decides on the IR: MMA layouts, TMA copies, stages, roles, descriptors,
loops, fragment layouts, vector accesses, barriers, shared-memory slots.  The launch ABI
is then read off the lowered function (:mod:`.launch_abi`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..ir import nodes as N
from ..ir.validate import validate
from ..options import check_options
from . import (accumulator_views, async_pipeline, defer_row_sums, early_async_copies, fast_math,
               fragment_loop_bounds, fragment_thread_regions, hang_check,
               hoist_parallel_locals, index_width, stage_loads,
               insert_barriers, layout_inference, lower_tile_ops,
               overlap_mma, rasterize, repeated_loads, scope_safe_values, select_mma, shared_epilogue, shared_memory,
               software_pipeline, tma_copies, tma_descriptors, tma_multicast, vectorize,
               version_pipelines, warp_specialize)
from .launch_abi import KernelPlan, build_abi


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable[[N.PrimFunc, str, dict], N.PrimFunc]  # (func, arch, options) -> func


def _validate(func, arch, options):
    validate(func)
    return func


PASSES = (
    Pass("validate", _validate),
    Pass("scope_safe_values", lambda f, arch, o: scope_safe_values.scope_safe_values(f)),
    Pass("choose_index_width", lambda f, arch, o: index_width.choose_index_width(f, o)),
    Pass("select_mma", lambda f, arch, o: select_mma.select_mma(
        f, arch, wgmma=not o.get("disable_wgmma", False))),
    Pass("split_accumulator_views",
         lambda f, arch, o: accumulator_views.split_accumulator_views(f)),
    Pass("fast_math", lambda f, arch, o: fast_math.fast_math(f, o)),
    Pass("programmatic_launch", lambda f, arch, o: fast_math.programmatic_launch(f, arch, o)),
    Pass("reuse_repeated_loads", lambda f, arch, o: repeated_loads.reuse_repeated_loads(f, o)),
    Pass("rasterize", lambda f, arch, o: rasterize.rasterize(f, o)),
    Pass("stage_epilogue", lambda f, arch, o: shared_epilogue.stage_epilogue(f, arch, o)),
    Pass("lower_copies_to_tma", lambda f, arch, o: tma_copies.lower_copies_to_tma(
        f, arch, auto=not o.get("disable_tma", False))),
    Pass("warp_specialize", lambda f, arch, o: warp_specialize.warp_specialize(
        f, arch, auto=not o.get("disable_warp_specialize", False),
        compute_tail=not o.get("disable_warp_specialize_tail", False))),
    Pass("pipeline_tma_loads", lambda f, arch, o: software_pipeline.pipeline_tma_loads(f, arch)),
    Pass("version_pipelines", lambda f, arch, o: version_pipelines.version_pipelines(f)),
    Pass("overlap_mma", overlap_mma.overlap_mma),
    Pass("assign_tma_descriptors",
         lambda f, arch, o: tma_descriptors.assign_tma_descriptors(f, arch)),
    Pass("lower_tile_ops", lambda f, arch, o: lower_tile_ops.lower_tile_ops(f)),
    Pass("fragment_loop_bounds", lambda f, arch, o: fragment_loop_bounds.fragment_loop_bounds(f)),
    Pass("hoist_parallel_locals", lambda f, arch, o: hoist_parallel_locals.hoist_parallel_locals(f)),
    Pass("stage_global_loads", lambda f, arch, o: stage_loads.stage_global_loads(f, o)),
    Pass("fragment_thread_regions",
         lambda f, arch, o: fragment_thread_regions.fragment_thread_regions(f)),
    Pass("infer_layouts", lambda f, arch, o: layout_inference.infer_layouts(f, arch, o)),
    Pass("defer_row_sums", lambda f, arch, o: defer_row_sums.defer_row_sums(f, o)),
    Pass("vectorize", lambda f, arch, o: vectorize.vectorize(
        f, arch, auto_async=not o.get("disable_async_copy", False),
        verbose=o.get("vectorize_verbose", False))),
    Pass("pipeline_async_copies",
         lambda f, arch, o: async_pipeline.pipeline_async_copies(
             f, arch, reuse=not o.get("disable_shared_memory_reuse", False))),
    Pass("assign_shared_memory", lambda f, arch, o: shared_memory.assign_shared_memory(
        f, arch, reuse=not o.get("disable_shared_memory_reuse", False))),
    Pass("insert_barriers", lambda f, arch, o: insert_barriers.insert_barriers(
        f, program_orders=o.get("disable_barrier_insertion", False))),
    Pass("start_async_copies_early",
         lambda f, arch, o: early_async_copies.start_async_copies_early(f)),
    Pass("split_roles", lambda f, arch, o: warp_specialize.split_roles(f, arch)),
    Pass("multicast_tma_loads", lambda f, arch, o: tma_multicast.multicast_tma_loads(f, o)),
    Pass("check_hangs", lambda f, arch, o: hang_check.check_hangs(f, arch)),
)


def run_passes(func: N.PrimFunc, arch: str = "sm_90a", options: dict | None = None,
               until: str | None = None) -> N.PrimFunc:
    """``func`` after the passes for ``arch`` and compile ``options`` (through the pass
    named ``until``, when given: what a pass-level test or ``tilecute show`` prints)."""
    options = check_options(options)
    for p in PASSES:
        func = p.run(func, arch, options)
        if p.name == until:
            break
    return func


def lower(func: N.PrimFunc, arch: str = "sm_90a", options: dict | None = None) -> KernelPlan:
    """Run the passes for ``arch`` with compile ``options`` and read off the launch ABI."""
    return build_abi(run_passes(func, arch, options), arch)
