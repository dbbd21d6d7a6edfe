"""Compile options: ``tilecute.compile(func, options={...})``, TileLang's pass configs by
another name.  They are part of the cache key; the passes read them (``lower``).  Imports
nothing, so a process that finds its kernel in the cache checks them without loading the
compiler."""

from __future__ import annotations


class OptionError(ValueError):
    pass


OPTIONS = {
    "disable_tma": "no TMA: tile copies take the cp.async / vector path even on sm_90+ "
                   "(explicit T.tma_copy statements stay)",
    "disable_async_copy": "no implicit cp.async: global -> shared copies (T.copy nests and "
                          "T.Parallel loops) that would become cp.async stay plain loads and "
                          "stores; T.async_copy keeps cp.async and T.copy(..., "
                          "prefer_instruction=\"cp_async\") is refused as a conflict "
                          "(TileLang's tl.enable_async_copy=False)",
    "vectorize_verbose": "the vectorization pass prints, for each T.Parallel nest it plans, "
                         "the vector width chosen and which accesses move as vectors (on "
                         "stderr, when the kernel is compiled, not when it comes from the "
                         "cache); TileLang's tl.enable_vectorize_planner_verbose",
    "disable_wgmma": "no wgmma: T.gemm takes warp mma.sync (+ ldmatrix) even on sm_90a",
    "disable_shared_epilogue": "T.copy(accumulator, global) stays a direct register -> global "
                               "copy (by default, on sm_90+, it goes through a swizzled shared "
                               "tile and a TMA store when the shared memory fits)",
    "wide_offsets": "compute every global tensor offset in 64 bits (for tensors of more than "
                    "2**31 elements under symbolic shapes); by default offsets are 64-bit only "
                    "where a static shape needs it, and the launcher refuses a tensor past "
                    "int32 with an error naming this option",
    "disable_mma_overlap": "a pipelined loop (3 stages or more, or 2 where the GEMMs' tiles "
                           "have separate pipelines) with two chained wgmma GEMMs "
                           "and work between them (attention's S = Q K^T, softmax, O += P V) "
                           "runs them in program order; by default (sm_90a) step k's first "
                           "GEMM and step k - 1's second are issued together and run during "
                           "the softmax",
    "disable_wait_anchor": "with the MMA overlap, the wait for the second GEMM may run "
                           "where ptxas puts it, at the top of the softmax (by default it is "
                           "kept after the step's row statistics, or its row sums: see "
                           "late_wait_anchor, by a named-barrier arrival that reads them)",
    "late_wait_anchor": "with the MMA overlap, the wait for the second GEMM is kept after the "
                        "step's row sums at any width (by default, where that GEMM's "
                        "accumulator is at most 128 wide, after the row statistics that come "
                        "before the scores are rewritten: attention's exponentials then each "
                        "feed their conversion into P, FA4's schedule)",
    "disable_warpgroup_pingpong": "the MMA overlap's two compute warpgroups never take turns "
                                  "(see warpgroup_pingpong)",
    "warpgroup_pingpong": "with the MMA overlap, two or three compute warpgroups that each "
                          "hold a slice of the rows take turns issuing their GEMMs (named barriers), so one's "
                          "MMAs run during the other's softmax (FA3's ping-pong); by default "
                          "only where the second GEMM's accumulator is at most 128 wide "
                          "(attention up to head dim 128, FlashAttention's rule)",
    "rescale_before_gemm": "with the MMA overlap, the statements that only rescale the second "
                           "GEMM's accumulator (attention's O *= alpha) run in the next step "
                           "while its first GEMM runs, before the second is issued (True), or "
                           "right after the second GEMM is done (False); by default before "
                           "where that accumulator is wider than 64 (attention's head dims "
                           "above 64)",
    "fast_math": "exp2, exp, log2 and log compute with the approximate instructions that "
                 "flush subnormals (ex2/lg2.approx.ftz, as nvcc's --use_fast_math; TileLang's "
                 "tl.enable_fast_math); by default exp2 is ex2.approx without ftz",
    "disable_barrier_insertion": "the program orders its shared-memory accesses itself: no "
                                 "block barrier between statements that share a shared buffer "
                                 "(T.sync_threads where the program wrote it; tile ops keep "
                                 "their own inner barriers); TileLang's "
                                 "tl.disable_thread_storage_sync",
    "disable_load_staging": "a T.Parallel nest (or T.copy) from global tensors to a global "
                            "tensor runs as written, a thread's loads and stores in turn (by "
                            "default, where a thread has 17 to 128 bytes of results, it "
                            "loads them all into registers first, then stores them: what "
                            "TileLang's __restrict__ parameters let nvcc do)",
    "disable_repeated_load_reuse": "a T.copy that loads into a fragment the tile it "
                                   "already holds loads it again (by default it is "
                                   "dropped where nothing between the two copies "
                                   "writes the fragment or any tensor, as nvcc drops "
                                   "it for TileLang's const __restrict__ tensors)",
    "disable_in_place_column_reduce": "a column reduction (T.reduce_*(frag, out, dim=0)) of "
                                      "a fragment laid out by element moves its columns last "
                                      "through a shared tile and every thread holds the whole "
                                      "result (by default, where each round of the threads' "
                                      "registers is whole rows, each thread folds its columns "
                                      "in place and keeps only those, as TileLang lays it out)",
    "disable_shared_memory_reuse": "every shared buffer of a kernel gets bytes of its own (by "
                                   "default buffers in use at different times share bytes); "
                                   "TileLang's tl.disable_shared_memory_reuse",
    "disable_warp_specialize": "no producer warpgroup unless a T.Pipelined loop asks for one "
                               "(warp_specialize=True); TileLang's tl.disable_warp_specialized",
    "disable_warp_specialize_tail": "a T.Pipelined loop whose last wgmma T.gemm on its loaded "
                                    "tiles is followed by more than register work (stores to "
                                    "shared tiles of its own, GEMMs on them, atomics, block "
                                    "barriers: TileLang's GQA backward's dQ) gets no producer "
                                    "warpgroup (by default it gets one, as in TileLang)",
    "pdl": "Programmatic Dependent Launch (sm_90+): each kernel is launched with programmatic "
           "stream serialization, so it starts (its prologue overlaps) while the previous "
           "kernel on the stream finishes, and waits for that kernel's memory "
           "(griddepcontrol.wait) before its body; it lets the next kernel launch at once",
    "disable_dynamic_variants": "plain T.dynamic extents that decide a row stride's 16-byte "
                                "alignment build the general kernel only (by default also an "
                                "aligned variant with TMA and vector accesses, picked per call)",
    "disable_deferred_row_sums": "a running row sum of a T.gemm accumulator (T.reduce_sum "
                                 "then l = l * alpha + rowsum) adds each step's rows up whole (by "
                                 "default each thread keeps its partial of l and the partials are "
                                 "added up once, where l is next read: FlashAttention-3's)",
    "disable_tma_multicast": "in a kernel launched in clusters, every TMA load stays per block "
                             "(by default a warp-specialized loop's tile that is the same for "
                             "every block of a cluster is multicast to them, leaving L2 once)",
    "disable_rasterization": "a GEMM kernel's 2-D grid keeps its plain block order (by default "
                             "the blocks walk it in panels of 16 rows, as T.use_swizzle(16), "
                             "unless the program sets an order)",
    "ptxas_options": "a string of ptxas flags for the cubin compile (CuTe DSL's --ptxas-options): "
                     "--register-usage-level=N (0-10), --maxrregcount=N, -v (ptxas' report "
                     "of registers, spills and shared memory, printed when the cubin is "
                     "compiled), --warn-on-spills, --warn-on-local-memory-usage, "
                     "--allow-expensive-optimizations=true|false; TileLang's "
                     "tl.ptxas_register_usage_level and compile_flags' --ptxas-options map "
                     "here",
}

# ptxas flags tilecute passes on (each one whole; ptxas itself checks nothing else we pass)
_PTXAS_FLAGS = (
    r"--register-usage-level=(10|[0-9])", r"--maxrregcount=[1-9][0-9]*", r"-v", r"--verbose",
    r"--warn-on-spills", r"--warn-on-local-memory-usage",
    r"--allow-expensive-optimizations=(true|false)",
)
_NON_BOOL = {"ptxas_options"}


def _check_ptxas_options(value) -> str:
    import re

    if not isinstance(value, str):
        raise OptionError(f"compile option 'ptxas_options' takes a string of ptxas flags, got "
                          f"{value!r}")
    flags = value.split()
    for flag in flags:
        if not any(re.fullmatch(pattern, flag) for pattern in _PTXAS_FLAGS):
            raise OptionError(f"compile option 'ptxas_options': ptxas flag {flag!r} is not one "
                              f"tilecute passes on; it takes {OPTIONS['ptxas_options']}")
    return " ".join(dict.fromkeys(flags))  # one string per flag set: one cache key


def check_options(options) -> dict:
    """``options`` as a dict of known, boolean compile options (``OptionError``
    naming an unknown one)."""
    options = dict(options or {})
    for k, v in options.items():
        if k not in OPTIONS:
            raise OptionError(f"unknown compile option {k!r}; the options are "
                              + ", ".join(f"{n} ({d})" for n, d in OPTIONS.items()))
        if k == "ptxas_options":
            options[k] = _check_ptxas_options(v)
        elif not isinstance(v, bool):
            raise OptionError(f"compile option {k!r} takes True or False, got {v!r}")
    if options.get("ptxas_options") == "":
        del options["ptxas_options"]
    return options


def merge_options(*sources: dict) -> dict:
    """The options of ``sources`` in order (a later value wins), except ``ptxas_options``,
    whose flags add up (a pass config's register level and compile_flags' ptxas flags)."""
    merged: dict = {}
    for options in sources:
        for k, v in dict(options or {}).items():
            if k == "ptxas_options" and merged.get(k):
                merged[k] = f"{merged[k]} {v}"
            else:
                merged[k] = v
    return merged



class PassConfigKey(str, __import__("enum").Enum):
    """TileLang's pass-configuration keys (``tilelang.transform.PassConfigKey``), every one:
    ``@tilecute.jit(pass_configs={PassConfigKey.TL_DISABLE_TMA_LOWER: True})``.  What
    tilecute makes of each is in ``PASS_CONFIGS`` (docs/host-api.md): a tilecute option,
    or accepted at TileLang's default value (and at values whose meaning tilecute already
    has) with any other value refused by name."""

    TL_SIMPLIFY = "tl.Simplify"
    TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES = "transitively_prove_inequalities"
    TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS = "convert_boolean_to_and_of_ors"
    TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES = "apply_constraints_to_boolean_branches"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL = "propagate_knowns_to_prove_conditional"
    TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS = "propagate_knowns_to_simplify_expressions"
    TL_SIMPLIFY_ENABLE_LET_INLINE = "enable_simplify_let_inline"
    TL_DISABLE_BUFFER_INIT_CHECK = "tl.disable_buffer_init_check"
    TL_DISABLE_DATA_RACE_CHECK = "tl.disable_data_race_check"
    TL_DISABLE_PRELOWER_SEMANTIC_CHECK = "tl.disable_prelower_semantic_check"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_ENABLE_AUTO_SCHEDULE = "tl.enable_auto_schedule"  # TileLang 0.1.15's (Ascend)
    TL_ENABLE_AUTO_WARP_SPECIALIZATION = "tl.enable_auto_warp_specialization"  # 0.1.15's
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_DISABLE_FAST_MATH = "tl.disable_fast_math"  # older TileLang releases
    TL_PTXAS_REGISTER_USAGE_LEVEL = "tl.ptxas_register_usage_level"
    TL_ENABLE_PTXAS_VERBOSE_OUTPUT = "tl.enable_ptxas_verbose_output"  # older releases
    TL_DEVICE_COMPILE_FLAGS = "tl.device_compile_flags"
    TL_EMIT_LINE_DIRECTIVES = "tl.emit_line_directives"
    TL_CONFIG_INDEX_BITWIDTH = "tl.config_index_bitwidth"
    TL_ENABLE_REDUCER_PLAN_VERBOSE = "tl.enable_reducer_plan_verbose"
    TL_LAYOUT_COST_MODEL = "tl.layout_cost_model"
    TL_REDUCER_FORCE_BASELINE = "tl.reducer_force_baseline"
    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_SAFE_MEMORY_ACCESS = "tl.disable_safe_memory_legalize"
    TL_DISABLE_VECTORIZE_256 = "tl.disable_vectorize_256"
    TL_ENABLE_FP32X2_REDUCTION = "tl.enable_fp32x2_reduction"  # TileLang 0.1.15's
    TL_ENABLE_ASYNC_COPY = "tl.enable_async_copy"
    TL_ENABLE_LOWER_LDGSTG = "tl.enable_lower_ldgstg"
    TL_ENABLE_LOWER_LDGSTG_PREDICATED = "tl.enable_lower_ldgstg_predicated"
    TL_ENABLE_VECTORIZE_PLANNER_VERBOSE = "tl.enable_vectorize_planner_verbose"
    TL_DISABLE_WGMMA = "tl.disable_wgmma"
    TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS = "tl.debug_merge_shared_memory_allocations"
    TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE = "tl.enable_aggressive_shared_memory_merge"
    TL_DISABLE_SHARED_MEMORY_REUSE = "tl.disable_shared_memory_reuse"
    TL_DISABLE_SHUFFLE_ELECT = "tl.disable_shuffle_elect"
    TL_DISABLE_LOOP_UNSWITCHING = "tl.disable_loop_unswitching"
    TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE = "tl.loop_unswitching_allow_non_trivial_else"
    TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS = "tl.if_stmt_binding_inline_replayable_binds"
    TL_DISABLE_THREAD_STORAGE_SYNC = "tl.disable_thread_storage_sync"
    TL_FORCE_LET_INLINE = "tl.force_let_inline"
    TL_AST_PRINT_ENABLE = "tl.ast_print_enable"
    TL_LAYOUT_VISUALIZATION_ENABLE = "tl.layout_visualization_enable"
    TL_LAYOUT_VISUALIZATION_FORMATS = "tl.layout_visualization_formats"
    TL_STORAGE_REWRITE_DETECT_INPLACE = "tl.storage_rewrite_detect_inplace"
    TIR_ENABLE_EQUIV_TERMS_IN_CSE = "tir.enable_equiv_terms_in_cse_tir"
    TIR_DISABLE_CSE = "tirx.disable_cse_tir"
    TIR_SIMPLIFY = "tirx.Simplify"
    TIR_DISABLE_STORAGE_REWRITE = "tirx.disable_storage_rewrite"
    TIR_DISABLE_VECTORIZE = "tirx.disable_vectorize"
    TIR_USE_ASYNC_COPY = "tirx.use_async_copy"
    TIR_ENABLE_DEBUG = "tirx.enable_debug"
    TIR_MERGE_STATIC_SMEM = "tirx.merge_static_smem"
    TIR_ADD_LOWER_PASS = "tirx.add_lower_pass"
    TIR_NOALIAS = "tirx.noalias"
    CUDA_KERNELS_OUTPUT_DIR = "cuda.kernels_output_dir"
    TL_DISABLE_OUT_OF_BOUND_WARNING = "tl.disable_out_of_bound_warning"
    TL_ENABLE_DUMP_IR = "tl.enable_dump_ir"
    TL_DUMP_IR_DIR = "tl.dump_ir_path"
    TL_PASS_PROFILE = "tl.pass_profile"
    TL_PASS_PROFILE_THRESHOLD_MS = "tl.pass_profile_threshold_ms"


class _Maps:
    """A key that sets tilecute options: ``convert(value) -> dict`` (an ``OptionError``
    for a value it cannot take)."""

    def __init__(self, convert, doc: str):
        self.convert, self.doc = convert, doc


class _Keeps:
    """A key whose accepted values (``values``: TileLang's default first) mean what tilecute
    does anyway; any other value is refused, saying ``why``."""

    def __init__(self, values: tuple, why: str):
        self.values, self.why = values, why


def _flag(option: str, invert: bool = False):
    def convert(v):
        if not isinstance(v, bool):
            raise OptionError(f"takes True or False, got {v!r}")
        return {option: v != invert}

    return convert


def _register_level(v):
    if v is None:
        return {}
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 10:
        raise OptionError(f"takes an int in [0, 10] (ptxas --register-usage-level), got {v!r}")
    return {"ptxas_options": f"--register-usage-level={v}"}


def _ptxas_verbose(v):
    if not isinstance(v, bool):
        raise OptionError(f"takes True or False, got {v!r}")
    return {"ptxas_options": "-v"} if v else {}


def _index_bitwidth(v):
    if v not in (32, 64):
        raise OptionError(f"takes 32 or 64, got {v!r}")
    return {"wide_offsets": True} if v == 64 else {}


def _device_flags(v):
    import shlex

    if v is None:
        return {}
    return from_compile_flags(shlex.split(v) if isinstance(v, str) else v,
                              "pass_configs['tl.device_compile_flags']")


_SIMPLIFY_DEFAULTS = {"transitively_prove_inequalities": False,
                      "convert_boolean_to_and_of_ors": False,
                      "apply_constraints_to_boolean_branches": False,
                      "propagate_knowns_to_prove_conditional": False,
                      "propagate_knowns_to_simplify_expressions": False,
                      "enable_simplify_let_inline": True}


def _simplify(v):
    items = dict(v or {}) if isinstance(v, dict) or v is None else None
    if items is None or any(_SIMPLIFY_DEFAULTS.get(k, object()) != x for k, x in items.items()):
        raise OptionError(f"takes TileLang's default simplifier settings only ({_SIMPLIFY_DEFAULTS}); "
                          f"tilecute's simplification has no such switches, got {v!r}")
    return {}


_NO_TIR = "tilecute has no TVM TIR pipeline, so no TIR pass to configure"
_SUBKEY = ("is a key of PassConfigKey.TL_SIMPLIFY's dict, not a pass config of its own",)
K = PassConfigKey
PASS_CONFIGS = {
    K.TL_DISABLE_TMA_LOWER: _Maps(_flag("disable_tma"), "option disable_tma"),
    K.TL_DISABLE_WARP_SPECIALIZED: _Maps(_flag("disable_warp_specialize"),
                                         "option disable_warp_specialize (loops that ask "
                                         "for a producer keep it)"),
    K.TL_ENABLE_FAST_MATH: _Maps(_flag("fast_math"), "option fast_math"),
    K.TL_DISABLE_FAST_MATH: _Maps(_flag("fast_math", invert=True), "option fast_math = not v"),
    K.TL_DISABLE_WGMMA: _Maps(_flag("disable_wgmma"), "option disable_wgmma"),
    K.TL_ENABLE_VECTORIZE_PLANNER_VERBOSE: _Maps(_flag("vectorize_verbose"),
                                                 "option vectorize_verbose"),
    K.TL_ENABLE_ASYNC_COPY: _Maps(_flag("disable_async_copy", invert=True),
                                  "option disable_async_copy = not v"),
    K.TL_PTXAS_REGISTER_USAGE_LEVEL: _Maps(_register_level,
                                           "ptxas_options --register-usage-level=v"),
    K.TL_ENABLE_PTXAS_VERBOSE_OUTPUT: _Maps(_ptxas_verbose, "ptxas_options -v"),
    K.TL_DEVICE_COMPILE_FLAGS: _Maps(_device_flags, "as compile_flags"),
    K.TL_CONFIG_INDEX_BITWIDTH: _Maps(_index_bitwidth, "64: option wide_offsets; 32: default"),
    K.TL_SIMPLIFY: _Maps(_simplify, "default settings only"),
    K.TL_DISABLE_VECTORIZE_256: _Keeps((False, True), "tilecute's vector accesses are at most "
                                       "16 bytes: it never emits 256-bit LDG/STG"),
    # TileLang 0.1.15's: packed FP32x2 adds in sum/abssum reductions on SM100+ (on by
    # default; a reduction's annotations={"enable_fadd2": False} turns one off)
    K.TL_ENABLE_FP32X2_REDUCTION: _Keeps((True, False), "tilecute's reductions add one value "
                                         "at a time on every target"),
    # TileLang 0.1.15's Ascend pipeline switch (default True), which its CUDA pipeline
    # does not read
    K.TL_ENABLE_AUTO_SCHEDULE: _Keeps((True, False), "it is TileLang's Ascend pipeline "
                                      "switch; its CUDA pipeline does not read it either"),
    # TileLang 0.1.15's: the name of a scheduler ("role_based") that derives a
    # warp-specialization schedule for kernels without one (default unset: none)
    K.TL_ENABLE_AUTO_WARP_SPECIALIZATION: _Keeps((None,), "tilecute has no named "
                                                 "warp-specialization schedulers (its "
                                                 "pipelined loops get a producer warpgroup "
                                                 "by its own rule: "
                                                 "TL_DISABLE_WARP_SPECIALIZED turns it off)"),
    K.TL_DISABLE_BUFFER_INIT_CHECK: _Keeps((False, True), "tilecute has no read-before-write "
                                           "warning to silence"),
    K.TL_DISABLE_LOOP_UNSWITCHING: _Keeps((False, True), "tilecute does not unswitch loops"),
    K.TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE: _Keeps((False, True),
                                                         "tilecute does not unswitch loops"),
    K.TL_DISABLE_DATA_RACE_CHECK: _Keeps((True,), "tilecute has no data-race check to enable"),
    K.TL_DISABLE_OUT_OF_BOUND_WARNING: _Keeps((True,), "tilecute has no out-of-bound "
                                              "warnings to enable"),
    K.TL_DISABLE_PRELOWER_SEMANTIC_CHECK: _Keeps((False,), "tilecute's frontend checks cannot "
                                                 "be turned off"),
    K.TL_EMIT_LINE_DIRECTIVES: _Keeps((False,), "tilecute emits no CUDA C source to put "
                                      "#line directives in"),
    K.TL_ENABLE_REDUCER_PLAN_VERBOSE: _Keeps((False,), "tilecute has no reducer plans to log"),
    K.TL_LAYOUT_COST_MODEL: _Keeps((None,), "tilecute's layout pass has no cost models to "
                                   "choose from"),
    K.TL_REDUCER_FORCE_BASELINE: _Keeps((False, True), "tilecute's reducers always take "
                                        "TileLang's baseline plan: every thread's copy "
                                        "combined by an all-reduce over the whole block"),
    K.TL_DISABLE_SAFE_MEMORY_ACCESS: _Keeps((False,), "tilecute has no switch to drop its "
                                            "bounds guards"),
    K.TL_ENABLE_LOWER_LDGSTG: _Keeps((False,), "tilecute has no explicit LDG/STG lowering"),
    K.TL_ENABLE_LOWER_LDGSTG_PREDICATED: _Keeps((False,), "tilecute has no explicit LDG/STG "
                                                "lowering"),
    K.TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS: _Keeps((False,), "tilecute's shared-memory "
                                                       "pass prints nothing (get_source('script') "
                                                       "shows the offsets)"),
    K.TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE: _Keeps((False, True), "tilecute has one "
                                                       "shared-memory placement (by lifetimes): "
                                                       "TileLang's aggressive mode only lets "
                                                       "buffers share more bytes, results are "
                                                       "the same"),
    K.TL_DISABLE_SHARED_MEMORY_REUSE: _Maps(_flag("disable_shared_memory_reuse"),
                                            "option disable_shared_memory_reuse"),
    K.TL_DISABLE_SHUFFLE_ELECT: _Keeps((False,), "tilecute has no switch for its elected-thread "
                                       "code"),
    K.TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS: _Keeps((True,), "tilecute has no such pass"),
    K.TL_DISABLE_THREAD_STORAGE_SYNC: _Maps(_flag("disable_barrier_insertion"),
                                            "option disable_barrier_insertion"),
    K.TL_FORCE_LET_INLINE: _Keeps((False,), "tilecute has no let-inlining switch"),
    K.TL_AST_PRINT_ENABLE: _Keeps((False,), "tilecute prints nothing while lowering "
                                  "(kernel.get_source('script') is the lowered IR)"),
    K.TL_LAYOUT_VISUALIZATION_ENABLE: _Keeps((False,), "tilecute has no layout plots"),
    K.TL_LAYOUT_VISUALIZATION_FORMATS: _Keeps((None, ""), "tilecute has no layout plots"),
    K.TL_STORAGE_REWRITE_DETECT_INPLACE: _Keeps((False,), _NO_TIR),
    K.TIR_ENABLE_EQUIV_TERMS_IN_CSE: _Keeps((True,), _NO_TIR),
    K.TIR_DISABLE_CSE: _Keeps((False,), _NO_TIR),
    K.TIR_SIMPLIFY: _Keeps((True,), _NO_TIR),
    K.TIR_DISABLE_STORAGE_REWRITE: _Keeps((False,), _NO_TIR),
    K.TIR_DISABLE_VECTORIZE: _Keeps((False,), _NO_TIR + " (tilecute's vectorize pass has no "
                                    "switch)"),
    K.TIR_USE_ASYNC_COPY: _Keeps((True,), _NO_TIR),
    K.TIR_ENABLE_DEBUG: _Keeps((False,), _NO_TIR),
    K.TIR_MERGE_STATIC_SMEM: _Keeps((True,), _NO_TIR),
    K.TIR_ADD_LOWER_PASS: _Keeps((None,), _NO_TIR),
    K.TIR_NOALIAS: _Keeps((True,), _NO_TIR),
    K.CUDA_KERNELS_OUTPUT_DIR: _Keeps((None, ""), "tilecute writes its generated sources into "
                                      "the cache entry (kernel.get_source(kind), `tilecute "
                                      "show`), not into a folder of the program's choice"),
    K.TL_ENABLE_DUMP_IR: _Keeps((False,), "tilecute dumps no IR between passes (`tilecute "
                                "show KEY --kind ir` prints the lowered IR; tilecute.transform"
                                ".pipeline.run_passes(func, until=PASS) returns it after a pass)"),
    K.TL_DUMP_IR_DIR: _Keeps((None, "./dump_ir/"), "tilecute dumps no IR between passes"),
    K.TL_PASS_PROFILE: _Keeps((False,), "tilecute has no pass profile (the phases it times "
                              "are a launcher's, built with -DTILECUTE_PHASE_TIMING: "
                              "docs/performance.md)"),
    K.TL_PASS_PROFILE_THRESHOLD_MS: _Keeps((0,), "tilecute has no pass profile"),
    **{k: _Keeps((), _SUBKEY[0]) for k in K if k.name.startswith("TL_SIMPLIFY_")},
}
del K


def from_pass_configs(pass_configs, function: str = "tilecute.jit") -> dict:
    """TileLang's ``pass_configs`` as tilecute options (``PASS_CONFIGS``): a key tilecute
    maps sets its option; a key it keeps is accepted at the values it lists; anything
    else is an ``OptionError`` naming the kernel, the key and the value."""
    options: dict = {}
    for key, value in dict(pass_configs or {}).items():
        name = key.value if isinstance(key, PassConfigKey) else str(key)
        try:
            key = PassConfigKey(name)
        except ValueError:
            raise OptionError(f"{function}: pass_configs key {name!r} is not one of TileLang's "
                              f"PassConfigKey keys") from None
        rule = PASS_CONFIGS[key]
        where = f"{function}: pass_configs[PassConfigKey.{key.name}] ({name!r})"
        if isinstance(rule, _Maps):
            try:
                options = merge_options(options, rule.convert(value))
            except OptionError as e:
                raise OptionError(f"{where} {e}") from None
        elif not any(value is v or (type(value) is type(v) and value == v) for v in rule.values):
            shown = " or ".join(map(repr, rule.values)) or "no value"
            raise OptionError(f"{where} = {value!r} is not supported by tilecute: {rule.why} "
                              f"(it accepts {shown})")
    return options


# compile_flags (nvcc's) whose TileLang meaning concerns the CUDA C++ source TileLang
# generates, which tilecute does not have (it emits CuTe DSL): accepted, nothing to do.
# A -D define reaches only the C++ preprocessor: TileLang's templates read ENABLE_BF16
# (its bf16 fallback header) and TL_ENABLE_L2_PREFETCH, NDEBUG silences asserts, and the
# C++ a program imports (T.import_source) is refused by tilecute.
_SOURCE_ONLY_FLAGS = (
    r"-O3", r"-D[A-Za-z_]\w*(=\S*)?", r"-Wno-[\w-]+", r"-U__CUDA_NO_[A-Z0-9_]+__",
    r"--expt-relaxed-constexpr", r"--expt-extended-lambda", r"-std=c\+\+(17|20)",
    r"--std=c\+\+(17|20)",
)


def from_compile_flags(flags, function: str = "tilecute.jit") -> dict:
    """TileLang's ``compile_flags`` (nvcc flags for its generated CUDA C++) as tilecute
    options: ``--use_fast_math`` -> ``fast_math``; ``--ptxas-options=a,b`` / ``-Xptxas a,b``
    and ``-maxrregcount=N`` -> ``ptxas_options``; flags about C++ source that tilecute does
    not generate (``-O3``, ``-D<macro>[=value]`` such as ``-DNDEBUG`` / ``-DENABLE_BF16``,
    ``-Wno-*``, ``-U__CUDA_NO_*__``,
    ``--expt-relaxed-constexpr``, ``--expt-extended-lambda``, ``-std=c++17/20``) accepted;
    any other flag is an ``OptionError`` naming it."""
    import re

    if isinstance(flags, str):
        flags = [flags]
    options: dict = {}
    ptxas: list = []
    items = list(flags or [])
    i = 0
    while i < len(items):
        flag = items[i]
        if not isinstance(flag, str):
            raise OptionError(f"{function}: compile_flags takes strings, got {flag!r}")
        i += 1
        if flag in ("--use_fast_math", "-use_fast_math"):
            options["fast_math"] = True
        elif flag.startswith(("--ptxas-options=", "-Xptxas=")):
            ptxas += flag.split("=", 1)[1].split(",")
        elif flag in ("--ptxas-options", "-Xptxas") and i < len(items):
            ptxas += items[i].split(",")
            i += 1
        elif re.fullmatch(r"--?maxrregcount[= ]?([1-9][0-9]*)", flag):
            ptxas.append("--maxrregcount=" + re.findall(r"[0-9]+", flag)[0])
        elif flag in ("-maxrregcount", "--maxrregcount") and i < len(items):
            ptxas.append(f"--maxrregcount={items[i]}")
            i += 1
        elif not any(re.fullmatch(p, flag) for p in _SOURCE_ONLY_FLAGS):
            raise OptionError(
                f"{function}: compile_flags {flag!r} is not supported by tilecute (it compiles "
                "CuTe DSL, not CUDA C++); it takes --use_fast_math, --ptxas-options=... / "
                "-Xptxas ..., -maxrregcount=N, and accepts the C++-source flags -O3, -D<macro>, "
                "-Wno-*, -U__CUDA_NO_*__, --expt-relaxed-constexpr, --expt-extended-lambda, "
                "-std=c++17/20")
    ptxas = [f.strip() for f in ptxas if f.strip()]
    if ptxas:
        try:
            options["ptxas_options"] = _check_ptxas_options(" ".join(ptxas))
        except OptionError as e:
            raise OptionError(f"{function}: compile_flags: {e}") from None
    return options


def function_attrs(func, out_idx=None, pass_configs=None, compile_flags=None):
    """TileLang's function attributes merged with the caller's, as ``tilelang.compile``
    merges them: ``(func without them, out_idx, pass_configs, compile_flags)``.  The
    function's ``out_idx`` (its ``T.empty`` outputs, returned) is used when the caller gives
    none; a caller's ``out_idx`` too is a ``ValueError`` naming both (TileLang's "Out index
    conflict").  The caller's ``pass_configs`` override the function's
    (``T.annotate_pass_configs``) key by key; its ``compile_flags`` follow the function's
    (``T.annotate_compile_flags``)."""
    if func.out_idx is not None:
        if out_idx is not None:
            raise ValueError(f"{func.name}: Out index conflict: out_idx={out_idx!r} is given, "
                             f"and {func.name} returns its T.empty tensors (out_idx "
                             f"{list(func.out_idx)}, parameter(s) "
                             f"{', '.join(func.params[i].name for i in func.out_idx)}); "
                             "drop out_idx (as TileLang refuses both)")
        out_idx = list(func.out_idx)
    if func.pass_configs:
        pass_configs = {**dict(func.pass_configs), **dict(pass_configs or {})}
    if func.compile_flags:
        extra = [compile_flags] if isinstance(compile_flags, str) else list(compile_flags or [])
        compile_flags = list(func.compile_flags) + extra
    return func.without_attrs(), out_idx, pass_configs, compile_flags
