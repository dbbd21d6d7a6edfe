#!/usr/bin/env bash
# TileLang's own programs on a GPU under tilecute: its examples (each example's reference check
# decides) and its tests (language/, issue/, kernel/, jit/, layout/, ... listed below; pytest with
# `tilelang` aliased to `tilecute`).  Not part of .ci/run (it needs a GPU and a TileLang
# checkout, whose code is TileLang's, never ours):
#
#   bash .ci/tilelang_gpu/run.sh <tilelang checkout> <out dir> [parallel jobs]
#
# Writes <out>/examples.txt (a RESULT line per example) and <out>/tests/ (a log per test file,
# summary.txt).  A "RESULT FAIL ... not close" or a failed numeric assert is a wrong answer to
# chase; refusals name the form tilecute does not take.  "RESULT FAIL-CHECK printed: ..." is an
# example whose own check printed its failure instead of raising (gdn, blocksparse_attention).
#
# Where flash_attn / fla (the references of the varlen, paged-decode, gdn, linear-attention and
# NSA examples) are not installed, run_example.py supplies torch references of the functions those
# examples import from shims/ (only for a package that is absent; TILECUTE_TL_SHIMS=0: none), and
# the RESULT line ends with shims=<packages used>.
#
# EXAMPLES=<file> runs only the examples it lists (paths under examples/, one a line, e.g.
# .ci/tilelang_gpu/shim_examples.list) and skips the tests; each example's whole output goes
# to <out>/logs/.  TMO: seconds per example (240).  TILECUTE_TL_BENCH_ARGS=1: see run_example.py
# (lets gdn's chunk_delta_h / chunk_delta_bwd, which misuse do_bench, reach their checks).
set -u
TL=$(cd "$1" && pwd); OUT=$(mkdir -p "$2" && cd "$2" && pwd); P=${3:-6}
HERE=$(cd "$(dirname "$0")" && pwd)
LIST=${EXAMPLES:+$(cd "$(dirname "$EXAMPLES")" && pwd)/$(basename "$EXAMPLES")}
mkdir -p "$OUT/logs"
cd "$TL/examples"
if [ -n "$LIST" ]; then sed 's|^|./|' "$LIST"; else find . -name "example_*.py" | sort; fi | xargs -P "$P" -I{} sh -c \
  'n=$(echo {} | cut -c3- | tr / _); r=$(cd $(dirname {}) && timeout ${TMO:-240} python3 '"$HERE"'/run_example.py $(basename {}) 2>&1 | tee '"$OUT"'/logs/$n.log | grep -a "^RESULT" | tail -1); echo "{} ${r:-RESULT TIMEOUT/CRASH}" | cut -c1-900' \
  > "$OUT/examples.txt"
[ -n "$LIST" ] && { grep -c "RESULT OK" "$OUT/examples.txt"; exit 0; }
mkdir -p "$OUT/tests"
cd "$TL/testing/python"
# the directories whose tests build T.* programs; of transform/ and analysis/ (mostly TileLang's
# own passes on TIR) the files that compile or run kernels (TRANSFORM_TESTS)
TRANSFORM_TESTS="transform/test_nullable_buffer_params.py transform/test_readonly_param_const_codegen.py
  transform/test_tilelang_transform_config_index_bitwidth.py transform/test_tilelang_transform_decouple_type_cast.py
  transform/test_tilelang_transform_disable_memory_reuse.py transform/test_tilelang_transform_hoist_broadcast_values.py
  transform/test_tilelang_transform_lexical_alloc_scope.py transform/test_tilelang_transform_loop_unswitching.py
  transform/test_tilelang_transform_lower_ldgstg.py transform/test_tilelang_transform_preserve_loop_step.py
  transform/test_tilelang_transform_verify_buffer_init.py analysis/test_tilelang_fragment_loop_checker.py
  analysis/test_tilelang_nested_loop_checker.py analysis/test_tilelang_parallel_local_index_checker.py"
ls language/test_*.py issue/test_*.py kernel/test_*.py jit/test_*.py layout/test_*.py autotune/test_*.py \
  cuda/test_*.py components/test_*.py debug/test_*.py fastmath/test_*.py math/test_*.py quantize/test_*.py \
  tilelibrary/test_*.py cache/test_*.py profiler/test_*.py runtime/test_*.py utils/test_*.py $TRANSFORM_TESTS \
  2>/dev/null | xargs -P "$P" -I{} sh -c \
  'n=$(echo {} | tr / _); cd $(dirname {}) && PYTHONPATH='"$HERE"':${PYTHONPATH:-} timeout ${TMO:-240} python3 -m pytest -q -p tlalias -p no:cacheprovider -o addopts="" -c /dev/null $(basename {}) -rf --tb=short > '"$OUT"'/tests/$n.txt 2>&1; echo "{} $(tail -1 '"$OUT"'/tests/$n.txt)" >> '"$OUT"'/tests/summary.txt'
grep -c "RESULT OK" "$OUT/examples.txt"
