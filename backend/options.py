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
    "disable_warpgroup_pingpong": "the MMA overlap's two compute warpgroups never take turns "
                                  "(see warpgroup_pingpong)",
    "warpgroup_pingpong": "with the MMA overlap, two compute warpgroups that each hold half "
                          "the rows take turns issuing their GEMMs (named barriers), so one's "
                          "MMAs run during the other's softmax (FA3's ping-pong); by default "
                          "only where the second GEMM's accumulator is at most 128 wide "
                          "(attention up to head dim 128, FlashAttention's rule)",
    "fast_math": "exp2, exp, log2 and log compute with the approximate instructions that "
                 "flush subnormals (ex2/lg2.approx.ftz, as nvcc's --use_fast_math; TileLang's "
                 "tl.enable_fast_math); by default exp2 is ex2.approx without ftz",
    "disable_warp_specialize": "no producer warpgroup unless a T.Pipelined loop asks for one "
                               "(warp_specialize=True); TileLang's tl.disable_warp_specialized",
    "pdl": "Programmatic Dependent Launch (sm_90+): each kernel is launched with programmatic "
           "stream serialization, so it starts (its prologue overlaps) while the previous "
           "kernel on the stream finishes, and waits for that kernel's memory "
           "(griddepcontrol.wait) before its body; it lets the next kernel launch at once",
    "disable_dynamic_variants": "plain T.dynamic extents that decide a row stride's 16-byte "
                                "alignment build the general kernel only (by default also an "
                                "aligned variant with TMA and vector accesses, picked per call)",
    "disable_rasterization": "a GEMM kernel's 2-D grid keeps its plain block order (by default "
                             "the blocks walk it in panels of 16 rows, as T.use_swizzle(16), "
                             "unless the program sets an order)",
}


def check_options(options) -> dict:
    """``options`` as a dict of known, boolean compile options (``OptionError``
    naming an unknown one)."""
    options = dict(options or {})
    for k, v in options.items():
        if k not in OPTIONS:
            raise OptionError(f"unknown compile option {k!r}; the options are "
                              + ", ".join(f"{n} ({d})" for n, d in OPTIONS.items()))
        if not isinstance(v, bool):
            raise OptionError(f"compile option {k!r} takes True or False, got {v!r}")
    return options


class PassConfigKey(str, __import__("enum").Enum):
    """TileLang's pass-configuration keys that tilecute maps onto its options
    (``@tilecute.jit(pass_configs={PassConfigKey.TL_DISABLE_TMA_LOWER: True})``)."""

    TL_DISABLE_TMA_LOWER = "tl.disable_tma_lower"
    TL_DISABLE_WARP_SPECIALIZED = "tl.disable_warp_specialized"
    TL_ENABLE_FAST_MATH = "tl.enable_fast_math"
    TL_DISABLE_FAST_MATH = "tl.disable_fast_math"


# TileLang key -> (tilecute option, the option's value for a config value v)
_PASS_CONFIGS = {
    "tl.disable_tma_lower": ("disable_tma", lambda v: v),
    "tl.disable_warp_specialized": ("disable_warp_specialize", lambda v: v),
    "tl.enable_fast_math": ("fast_math", lambda v: v),
    "tl.disable_fast_math": ("fast_math", lambda v: not v),
}


def from_pass_configs(pass_configs, function: str = "tilecute.jit") -> dict:
    """TileLang's ``pass_configs`` as tilecute options; a key tilecute has no meaning for
    is an ``OptionError`` naming it and the kernel."""
    options = {}
    for key, value in dict(pass_configs or {}).items():
        name = key.value if isinstance(key, PassConfigKey) else str(key)
        if name not in _PASS_CONFIGS:
            raise OptionError(f"{function}: pass_configs key {name!r} is not supported by "
                              f"tilecute; the ones it maps are "
                              + ", ".join(f"{k} (-> {o})" for k, (o, _) in _PASS_CONFIGS.items()))
        if not isinstance(value, bool):
            raise OptionError(f"{function}: pass_configs[{name!r}] takes True or False, got "
                              f"{value!r}")
        option, convert = _PASS_CONFIGS[name]
        options[option] = convert(value)
    return options
