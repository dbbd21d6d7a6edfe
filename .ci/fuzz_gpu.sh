#!/usr/bin/env bash
# The tile fuzzer on a GPU (not part of .ci/run): random TileLang programs from seeds
# (tests/fuzz_tiles.py), each built, run and compared with its torch reference.
#
#   bash .ci/fuzz_gpu.sh [first seed] [count] [build processes]     # default: 0 300 12
#   FUZZ_FORM=new bash .ci/fuzz_gpu.sh 0 300 14    # the forms of NEW_FORMS (attention loops,
#                                                  # small-grid GEMMs, ...; see fuzz_tiles.py)
#   FUZZ_FORM=dequant bash .ci/fuzz_gpu.sh 0 200 12  # one of them alone (dequant, acc_chain,
#                                                  # gemm2, attn, conv, sparse, attn_bwd, ...)
#
# Each program runs in a child process under a per-launch limit (FUZZ_TIMEOUT, 30 s): a
# launch that does not end in time is reported as SEED NAME hang (a failure) and the next
# seed runs in a fresh child.
#
# Prints one line per program that is wrong (a silent wrong answer) or crashed -- SEED NAME
# STATUS DETAIL -- and a JSON summary; exit status 1 when any is.  Re-run one program:
#   python tests/fuzz_run.py --seeds SEED --show
# (its source, with the arguments; --dump DIR writes each failing program to DIR/NAME.py).
set -u
cd "$(dirname "$0")/.."
export TILECUTE_ARCH=${TILECUTE_ARCH:-sm_90a} CUTE_DSL_ARCH=${CUTE_DSL_ARCH:-sm_90a}
exec python3 tests/fuzz_run.py --first "${1:-0}" --count "${2:-300}" --jobs "${3:-12}" --dump "${FUZZ_DUMP:-/tmp/fuzz_failing}" \
    --timeout "${FUZZ_TIMEOUT:-30}" ${FUZZ_FORM:+--form "$FUZZ_FORM"}
