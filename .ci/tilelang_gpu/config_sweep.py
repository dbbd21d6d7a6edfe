"""Compile-only sweep of TileLang's autotuned examples over their config spaces and argparse
variants, on a machine with no GPU (sm_90a cubins, nothing launched):

    CUTE_DSL_ARCH=sm_90a TILECUTE_ARCH=sm_90a TILECUTE_CACHE_DIR=/tmp/x \\
        python .ci/tilelang_gpu/config_sweep.py <tilelang checkout>/examples <out dir> \\
        [--only SUBSTR] [--max N] [--variant-max N] [--timeout S]

Each run of ``PLAN`` (an example and the arguments it is run with: small sizes, since its
reference runs on the CPU; the first run of an example is its config sweep, the others its
argparse variants; ``["@call", "main(...)"]`` calls a function of the example instead of its
``__main__``) runs in a child process in compile-only mode (``compile_only.py``, so
``tilelang`` is tilecute).  There every ``@autotune`` tuner the example calls, whether the call
gives the tuned parameters or not, also builds its configs for the call's other arguments: all
of them, or a deterministic sample of ``--max`` (8; ``--variant-max``, 2, in a variant run) that
first covers every value of every tuned parameter once.  Each config is one row,
``OK`` / ``REFUSED`` (a tilecute error naming a form) / ``CRASH`` (an error inside tilecute or
CuTe DSL that is no refusal) / ``TIMEOUT`` / ``INVALID`` (the example's own factory asserts the
config away); the example's own run is a row too (as
``compile_example.py`` reports it; ``STOPPED``: the example stopped outside tilecute).

Writes ``<out>/rows.jsonl`` (a row per config and per run) and prints the table: example,
configs tried, OK / REFUSED / CRASH, then every non-OK row.  ``--child`` is the child's
entry (``config_sweep.py --child <jsonl> <example.py> [its args]``)."""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))

# example -> its runs (argv lists); the first is the config sweep (small sizes), the rest are
# argparse variants (each also sweeps --variant-max configs of each tuner it calls)
PLAN: dict[str, list[list[str]]] = {
    "flash_attention/example_mha_fwd_bhsd.py": [
        ["--batch", "1", "--heads", "2", "--seq_q", "256", "--seq_kv", "256", "--dim", "64"],
        ["--batch", "1", "--heads", "2", "--seq_q", "128", "--seq_kv", "256", "--dim", "64", "--is_causal"],
        ["--batch", "1", "--heads", "2", "--seq_q", "256", "--seq_kv", "256", "--dim", "128", "--tune"]],
    "flash_attention/example_mha_fwd_bshd.py": [
        ["--batch", "1", "--heads", "2", "--seq_len", "256", "--dim", "128"],
        ["--batch", "1", "--heads", "2", "--seq_len", "256", "--dim", "64", "--is_causal"]],
    "flash_attention/example_gqa_fwd_bshd.py": [
        ["--batch", "1", "--heads", "4", "--seq_len", "256", "--dim", "128", "--groups", "2"],
        ["--batch", "1", "--heads", "8", "--seq_len", "256", "--dim", "64", "--groups", "4", "--is_causal"]],
    "flash_attention/example_mha_fwd_varlen.py": [
        ["--batch", "2", "--heads", "2", "--seq_len", "256", "--dim", "128"],
        ["--batch", "2", "--heads", "2", "--seq_len", "256", "--dim", "64", "--is_causal"]],
    "flash_attention/example_gqa_fwd_varlen.py": [
        ["--batch", "2", "--heads", "4", "--groups", "2", "--q_seqlen", "256", "--k_seqlen", "256", "--dim", "128"],
        ["--batch", "2", "--heads", "4", "--groups", "2", "--q_seqlen", "128", "--k_seqlen", "256", "--dim", "64",
         "--is_causal"]],
    "flash_attention/example_mha_bwd_bhsd.py": [
        ["--batch", "1", "--h", "2", "--n_ctx", "256", "--d_head", "64"],
        ["--batch", "1", "--h", "2", "--n_ctx", "256", "--d_head", "128", "--causal", "1"]],
    "flash_attention/example_mha_bwd_bshd.py": [
        ["--batch", "1", "--h", "2", "--n_ctx", "256", "--d_head", "64"],
        ["--batch", "1", "--h", "2", "--n_ctx", "256", "--d_head", "128", "--causal", "1"]],
    "flash_attention/example_gqa_bwd.py": [
        ["--batch", "1", "--h", "4", "--n_ctx", "256", "--groups", "2"],
        ["--batch", "1", "--h", "4", "--n_ctx", "256", "--groups", "2", "--causal", "--use_atomic"],
        ["--batch", "1", "--h", "4", "--n_ctx", "256", "--groups", "2", "--use_split",
         "--d_head_qk", "128", "--d_head_v", "128"]],
    "flash_attention/example_gqa_bwd_tma_reduce.py": [
        ["--batch", "1", "--h", "4", "--n_ctx", "256", "--groups", "2"],
        ["--batch", "1", "--h", "4", "--n_ctx", "256", "--groups", "2", "--causal", "--use_atomic"],
        ["--batch", "1", "--h", "4", "--n_ctx", "256", "--groups", "2", "--use_split",
         "--d_head_qk", "128", "--d_head_v", "128"]],
    "flash_attention/example_gqa_bwd_tma_reduce_varlen.py": [
        ["--batch", "2", "--h", "4", "--n_ctx", "256", "--groups", "2"],
        ["--batch", "2", "--h", "4", "--n_ctx", "256", "--groups", "2", "--causal", "--use_atomic"],
        ["--batch", "2", "--h", "4", "--n_ctx", "256", "--groups", "2", "--use_split"]],
    "attention_sink/example_mha_sink_fwd_bhsd.py": [
        ["--batch", "1", "--heads", "2", "--seq_q", "256", "--seq_kv", "256", "--dim", "128"],
        ["--batch", "1", "--heads", "2", "--seq_q", "256", "--seq_kv", "256", "--dim", "64", "--window_size", "128",
         "--dtype", "bfloat16"]],
    "attention_sink/example_mha_sink_bwd_bhsd.py": [
        ["--batch", "1", "--h", "64", "--n_ctx", "256", "--d_head", "128"],
        ["--batch", "1", "--h", "64", "--n_ctx", "256", "--d_head", "64", "--window_size", "128",
         "--dtype", "bfloat16"],
        ["--batch", "1", "--h", "2", "--n_ctx", "256", "--d_head", "128"]],  # heads < block_M
    "attention_sink/example_gqa_sink_bwd_bhsd.py": [
        ["--batch", "1", "--h", "64", "--n_ctx", "256", "--d_head", "128", "--groups", "8", "--window_size", "128"],
        ["--batch", "1", "--h", "64", "--n_ctx", "256", "--d_head", "64", "--groups", "16", "--window_size", "64",
         "--dtype", "bfloat16"],
        ["--batch", "1", "--h", "4", "--n_ctx", "256", "--d_head", "128", "--groups", "2", "--window_size", "128"]],
    "attention_sink/example_gqa_sink_fwd_varlen.py": [
        ["--batch", "2", "--heads", "4", "--groups", "2", "--q_seqlen", "256", "--k_seqlen", "256", "--dim", "128"],
        ["--batch", "2", "--heads", "4", "--groups", "2", "--q_seqlen", "256", "--k_seqlen", "256", "--dim", "64",
         "--is_causal", "--window_size", "128"]],
    "attention_sink/example_gqa_sink_bwd_varlen.py": [
        ["--batch", "2", "--heads", "4", "--groups", "2", "--q_seqlen", "256", "--k_seqlen", "256", "--dim", "128"],
        ["--batch", "2", "--heads", "4", "--groups", "2", "--q_seqlen", "256", "--k_seqlen", "256", "--dim", "64",
         "--is_causal", "--window_size", "128"]],
    "flash_decoding/example_gqa_decode.py": [
        ["--batch", "1", "--heads", "8", "--groups", "2", "--kv_seqlen", "1024", "--dim", "128"],
        ["--batch", "2", "--heads", "16", "--groups", "8", "--kv_seqlen", "512", "--dim", "64"]],
    "flash_decoding/example_gqa_decode_varlen_logits.py": [
        ["--batch_size", "1", "--q_heads", "8", "--kv_heads", "2", "--k_seqlen", "512"],
        ["--batch_size", "2", "--q_heads", "8", "--kv_heads", "2", "--k_seqlen", "512", "--head_size", "64",
         "--dtype", "float16", "--test_varlen", "--test_sink"],
        ["--batch_size", "1", "--q_heads", "8", "--kv_heads", "2", "--k_seqlen", "512", "--head_size", "256",
         "--num_split", "16"]],
    "linear_attention/example_mamba_chunk_scan.py": [
        ["--batch", "1", "--heads", "2", "--seq_len", "512", "--chunk_size", "256", "--dim", "64", "--dstate", "128"],
        ["--batch", "1", "--heads", "4", "--groups", "2", "--seq_len", "256", "--chunk_size", "128", "--dim", "64",
         "--dstate", "64"]],
    "linear_attention/example_mamba_chunk_state.py": [
        ["--batch", "1", "--heads", "2", "--seq_len", "512", "--chunk_size", "256", "--dim", "64", "--dstate", "128"],
        ["--batch", "1", "--heads", "4", "--groups", "2", "--seq_len", "256", "--chunk_size", "128", "--dim", "64",
         "--dstate", "64"]],
    "blocksparse_gemm/example_blocksparse_gemm.py": [
        ["--m", "512", "--n", "512", "--k", "512", "--use_autotune"]],
    "topk/example_topk.py": [
        ["--M", "320", "--N", "128", "--topk", "6"],
        ["--M", "128", "--N", "64", "--topk", "2", "--blk_m", "32"]],
    "gemv/example_gemv.py": [
        ["--n", "1024", "--k", "1024"]],
    "dequantize_gemm/example_dequant_gemm_fp4_hopper.py": [
        ["--m", "256", "--n", "256", "--k", "256", "--tune"]],
    "dequantize_gemm/example_dequant_gemm_w4a8.py": [
        ["--m", "256", "--n", "256", "--k", "256", "--tune"]],
    "dequantize_gemm/example_dequant_gemm_bf16_fp4_hopper.py": [
        [], ["@call", "main(256, 256, 256, fast_dequant=False)"]],
    "dequantize_gemm/example_dequant_gemm_bf16_mxfp4_hopper.py": [
        [], ["@call", "main(256, 256, 256, 32, fast_dequant=False, with_bias=True)"],
        ["@call", "main(256, 256, 256, 32, fast_dequant=False, with_bias=False)"]],
    "deepseek_mhc/example_mhc_bwd.py": [[]],
    "deepseek_v32/fp8_lighting_indexer.py": [[]],
    "gdn/example_chunk_delta_h.py": [[]],
    "gemm/example_gemm_autotune.py": [
        ["--m", "512", "--n", "512", "--k", "512", "--use_autotune"],
        ["--m", "512", "--n", "512", "--k", "512", "--use_autotune", "--with_roller"]],
    "gemm/example_gemm_advanced_autotune.py": [
        ["--m", "512", "--n", "512", "--k", "512", "--use_autotune", "--enable_grouped_compile", "--use_pipeline"],
        ["--m", "512", "--n", "512", "--k", "512", "--use_autotune", "--with_roller"]],
    "convolution/example_convolution_autotune.py": [
        ["--n", "2", "--c", "64", "--h", "16", "--w", "16", "--f", "64", "--use_autotune"]],
    "gemm_fp8/example_tilelang_gemm_amd.py": [[]],
    "gemm_fp8/example_tilelang_gemm_amd_fp8_preshuffle.py": [[]],
    "gemm/example_gemm_autotune_pass_configs.py": [["--m", "512", "--n", "512", "--k", "512"]],
    "gemm/example_gemm_autotune_early_stop.py": [[]],
    "amd/example_amd_flash_attn_fwd.py": [
        ["--batch", "1", "--heads", "2", "--seq_len", "256", "--dim", "128"],
        ["--batch", "1", "--heads", "4", "--seq_len", "256", "--dim", "64", "--is_causal", "--groups", "2"]],
    "amd/example_amd_flash_attn_bwd.py": [
        ["--batch", "1", "--heads", "2", "--seq_len", "256", "--dim", "64"],
        ["--batch", "1", "--heads", "4", "--seq_len", "256", "--dim", "128", "--is_causal", "--groups", "2"]],
    "deepseek_nsa/benchmark/benchmark_nsa_fwd.py": [
        ["--batch", "2", "--seq_len", "256", "--heads", "1", "--head_query", "16", "--impl", "tilelang",
         "--iterations", "1", "--warmup", "1"]],
    # argparse variants only (no config space)
    "gemm_sp/example_gemm_sp.py": [
        ["--m", "512", "--n", "512", "--k", "512"],
        ["--m", "512", "--n", "512", "--k", "512", "--accum_dtype", "float16", "--block_M", "64", "--block_N", "128",
         "--block_K", "64", "--num_stages", "3", "--thread_num", "128"]],
    "grouped_gemm/example_grouped_gemm_fwd.py": [
        ["--batch_sizes", "64,128", "--K", "256", "--M", "256"],
        ["--batch_sizes", "64,128", "--K", "256", "--M", "256", "--trans_b"]],
    "convolution/example_convolution.py": [
        ["--n", "2", "--c", "64", "--h", "16", "--w", "16", "--f", "64"],
        ["--n", "2", "--c", "64", "--h", "17", "--w", "17", "--f", "64", "--k", "5", "--s", "2", "--d", "2", "--p", "2"]],
    "deepseek_mla/example_mla_decode.py": [
        ["--batch", "2", "--heads", "64", "--kv_ctx", "512"],
        ["--batch", "2", "--heads", "16", "--kv_heads", "1", "--kv_ctx", "512", "--dim", "256", "--pe_dim", "32"]],
    "blocksparse_attention/example_tilelang_sparse_gqa_decode_varlen_indice.py": [
        ["--batch", "2", "--heads", "8", "--heads_kv", "2", "--max_cache_seqlen", "1024", "--dim", "64", "--dim_v", "64",
         "--block_size", "64"]],
}


for _kda in ("chunk_o", "chunk_bwd_dv", "chunk_bwd_gla_dA", "chunk_bwd_intra", "chunk_bwd_dqkwg", "chunk_delta_bwd",
             "chunk_delta_h_fwd", "chunk_intra_token_parallel", "wy_fast", "wy_fast_bwd"):
    PLAN[f"kda/{_kda}.py"] = [[]]  # FLA's Kimi Delta Attention kernels (no argparse), their sizes

# folder -> packages the child replaces by inert stand-ins (references it cannot run here:
# FLA's triton kernels); a stand-in's every name is a callable returning a stand-in, so the
# TileLang kernels after the reference still compile (the run's own check may then stop it)
STUBS = {"kda/": ["FLA_KDA", "test_utils_kda"], "deepseek_v32/": ["triton"]}
SAMPLE_MAX = {"kda/": 4}
# runs whose example goes on after its kernels with work too slow for the CPU (mhc_bwd: 8192^2
# matmuls as a warm-up): a shorter limit, the timeout's row says so
RUN_TIMEOUT = {"deepseek_mhc/example_mhc_bwd.py": 150}
# example -> its @jit factories that its get_configs() configures although no @autotune reads it
FACTORIES = {"flash_decoding/example_gqa_decode_varlen_logits.py": ["flashattn"],
             "deepseek_v32/fp8_lighting_indexer.py": ["mqa_attn_return_logits"]}  # a smaller sample where each config is a large kernel


# -- the child: one example run, every tuner it calls sweeping its configs ---------------------


def classify(e: BaseException) -> str:
    """compile_example.py's rule: an error raised in tilecute's or CuTe DSL's frames is a
    refusal when a ValueError / NotImplementedError / TypeError (tilecute's errors name the
    form), else a crash."""
    tb = traceback.extract_tb(e.__traceback__)
    inside = any(os.sep + "backend" + os.sep in f.filename or "cutlass" in f.filename
                 or os.sep + "runtime" + os.sep in f.filename for f in tb[-3:])
    if isinstance(e, TimeoutError):
        return "TIMEOUT"
    if inside and isinstance(e, (ValueError, NotImplementedError, TypeError, SyntaxError)):  # FrontendError
        return "REFUSED"
    return "CRASH" if inside else "STOPPED"


def describe(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    where = " <- ".join(f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}" for f in reversed(tb[-4:]))
    return f"{type(e).__name__}: {str(e)[:700]}".replace("\n", " | ") + f" @ {where}"


def sample(configs: list[dict], k: int, seed: str) -> list[dict]:
    """At most ``k`` configs, deterministic: first ones that each bring a (parameter, value)
    pair not yet covered, in a seeded order, then the rest of that order."""
    if len(configs) <= k:
        return configs
    order = list(range(len(configs)))
    random.Random(seed).shuffle(order)
    seen, picked = set(), []
    for i in order:
        pairs = {(p, json.dumps(v, sort_keys=True, default=repr)) for p, v in configs[i].items()}
        if not pairs <= seen and len(picked) < k:
            picked.append(i)
            seen |= pairs
    picked += [i for i in order if i not in picked][: k - len(picked)]
    return [configs[i] for i in sorted(picked)]


def child(log_path: str, example: str, argv: list[str]) -> None:
    sys.path.insert(0, HERE)
    from compile_only import built, install_stubs  # noqa: F401  (installs compile-only mode)
    import inspect

    from tilecute.api import _arch
    from tilecute.api import compile as compile_func
    from tilecute.autotuner import AutoTuner, _describe, _split_config

    limit = int(os.environ.get("SWEEP_MAX", "8"))
    per_config_s = int(os.environ.get("SWEEP_CONFIG_TIMEOUT", "300"))
    log = open(log_path, "a")
    run_id = " ".join([os.environ.get("SWEEP_NAME", example), *argv])
    swept: set = set()

    def row(**kw):
        log.write(json.dumps({"example": os.environ.get("SWEEP_NAME", example), "argv": argv, **kw}, default=repr) + "\n")
        log.flush()

    def on_alarm(*_):
        raise TimeoutError(f"config compile over {per_config_s} s")

    signal.signal(signal.SIGALRM, on_alarm)
    untuned = AutoTuner.compile  # compile_only's: the call's own config

    def sweeping(self, *args, **kwargs):
        configs = self.config_list(args, kwargs)
        sig = inspect.signature(self.factory)
        try:
            given = sig.bind_partial(*args, **kwargs).arguments
        except TypeError:  # an eager kernel's call (its symbolic sizes by keyword)
            sig, given = None, {**dict(enumerate(args)), **kwargs}
        rest = {k: v for k, v in given.items() if k not in configs[0]}
        memo = (self.__name__, _describe(rest))
        if memo not in swept:
            swept.add(memo)
            chosen = sample(configs, limit, f"{example}:{self.__name__}")
            print(f"SWEEP {self.__name__}: {len(chosen)} of {len(configs)} configs", file=sys.stderr, flush=True)
            arch = _arch(self.target, self.__name__)
            for config in chosen:
                t0 = time.time()
                signal.alarm(per_config_s)
                try:
                    params, options = _split_config(config, self.options, self.__name__)
                    if sig is not None:
                        b = sig.bind_partial(*args, **kwargs)
                        b.arguments.update(params)
                        c_args, c_kwargs = b.args, b.kwargs
                    else:
                        c_args, c_kwargs = args, {**kwargs, **params}
                    if self.eager is not None:
                        kernel = self.eager.compile(*c_args, **c_kwargs)
                    else:
                        kernel = compile_func(self.factory(*c_args, **c_kwargs), out_idx=self.out_idx,
                                              target=arch, options=options)
                    kernel.ensure_cubin()
                    status, msg = "OK", ""
                except Exception as e:  # noqa: BLE001 -- every config is a row
                    status, msg = classify(e), describe(e)
                    if status == "STOPPED":  # raised in the example's own factory code: its check
                        status = "INVALID" if isinstance(e, (ValueError, AssertionError)) else "CRASH"
                finally:
                    signal.alarm(0)
                row(kind="config", run=run_id, kernel=self.__name__, space=len(configs), config=config,
                    status=status, error=msg, seconds=round(time.time() - t0, 1))
                print(f"SWEEP {self.__name__} {config}: {status} {msg[:300]}", file=sys.stderr, flush=True)
        return untuned(self, *args, **kwargs)

    AutoTuner.compile = sweeping
    tuned = [n for n in os.environ.get("SWEEP_FACTORIES", "").split(",") if n]
    if tuned:  # factories whose module's get_configs() no @autotune reads: a tuner of them
        import tilecute.jit as jit_module

        plain_jit = jit_module._jit

        def jit_tuning(fn=None, **options):
            def wrap(f):
                jitted = plain_jit(f, **options)
                if f.__name__ not in tuned:
                    return jitted
                return AutoTuner(jitted, lambda *a, **k: f.__globals__["get_configs"]())
            return wrap(fn) if fn is not None else wrap

        jit_module._jit = jit_tuning
    if os.environ.get("SWEEP_STUBS"):
        install_stubs(os.environ["SWEEP_STUBS"].split(","))
    import runpy

    sys.argv = [example, *argv]
    sys.path.insert(0, os.path.dirname(os.path.abspath(example)))
    t0 = time.time()
    try:
        if argv[:1] == ["@call"]:  # a call of the example's own function instead of its __main__
            sys.argv = [example]
            eval(argv[1], runpy.run_path(example, run_name="__sweep__"))
        else:
            runpy.run_path(example, run_name="__main__")
        status, msg = "OK", ""
    except SystemExit as e:
        status, msg = ("OK", "") if not e.code else ("STOPPED", f"exit({e.code})")
    except BaseException as e:  # noqa: BLE001
        status, msg = classify(e), describe(e)
    row(kind="run", run=run_id, kernels=len(built), status=status, error=msg, seconds=round(time.time() - t0, 1))


# -- the parent: each run in a child, the table -------------------------------------------------


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        return child(sys.argv[2], sys.argv[3], sys.argv[4:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("examples", help="TileLang's examples/ folder")
    ap.add_argument("out")
    ap.add_argument("--only", default="", help="run only examples whose path contains one of these (comma-separated)")
    ap.add_argument("--max", type=int, default=8, help="configs per tuner in a sweep run")
    ap.add_argument("--variant-max", type=int, default=2, help="configs per tuner in a variant run")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per run")
    ap.add_argument("--table-only", action="store_true", help="print the table of <out>/rows.jsonl")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    log = os.path.join(a.out, "rows.jsonl")
    if not a.table_only:
        for example, runs in PLAN.items():
            if not any(o in example for o in a.only.split(",")):
                continue
            for n, argv in enumerate(runs):
                path = os.path.join(a.examples, example)
                top = next((v for k, v in SAMPLE_MAX.items() if example.startswith(k)), a.max)
                stubs = next((v for k, v in STUBS.items() if example.startswith(k)), [])
                env = dict(os.environ, SWEEP_MAX=str(top if n == 0 or argv[:1] == ["@call"] else a.variant_max), PYTHONUNBUFFERED="1",
                           SWEEP_NAME=example, SWEEP_STUBS=",".join(stubs),
                           SWEEP_FACTORIES=",".join(FACTORIES.get(example, [])))
                t0 = time.time()
                name = example.replace("/", "_") + f".{n}.log"
                with open(os.path.join(a.out, name), "w") as out:
                    try:
                        rc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", os.path.abspath(log),
                                             os.path.abspath(path), *argv], cwd=os.path.dirname(path), stdout=out,
                                            stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT.get(example, a.timeout),
                                            env=env).returncode
                    except subprocess.TimeoutExpired:
                        rc = "timeout"
                print(f"{example} {' '.join(argv)}: rc={rc} {time.time() - t0:.0f}s", flush=True)
                if rc != 0:  # the child died before its run row (a signal, a timeout)
                    with open(log, "a") as f:
                        f.write(json.dumps({"example": example, "argv": argv, "kind": "run",
                                            "status": "TIMEOUT" if rc == "timeout" else "CRASH",
                                            "run": " ".join([example, *argv]), "error": f"child rc={rc}, see {name}"})
                                + "\n")
    table(log)


def table(log: str) -> None:
    rows = [json.loads(line) for line in open(log)]
    by: dict = {}
    for r in rows:
        s = by.setdefault(r["example"], {"configs": 0, "OK": 0, "REFUSED": 0, "CRASH": 0, "TIMEOUT": 0, "INVALID": 0,
                                         "runs": 0, "runs_ok": 0})
        if r["kind"] == "config":
            s["configs"] += 1
            s[r["status"]] = s.get(r["status"], 0) + 1
        else:
            s["runs"] += 1
            s["runs_ok"] += r["status"] == "OK"
    print(f"{'example':64} {'configs':>7} {'OK':>4} {'REF':>4} {'CRASH':>5} {'TMO':>4} {'INV':>4} {'runs ok':>8}")
    for ex, s in by.items():
        print(f"{ex:64} {s['configs']:7} {s['OK']:4} {s['REFUSED']:4} {s['CRASH']:5} {s['TIMEOUT']:4} {s['INVALID']:4} "
              f"{s['runs_ok']:>4}/{s['runs']}")
    print("\nnot OK:")
    for r in rows:
        if r["status"] != "OK":
            what = f"config {json.dumps(r['config'])}" if r["kind"] == "config" else "run"
            print(f"- {r['status']} {r['run']} [{r.get('kernel', '')}] {what}: {r['error'][:400]}")


if __name__ == "__main__":
    main()
