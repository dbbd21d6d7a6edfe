#!/usr/bin/env bash
# TileLang's kernel files that are not example_*.py (run.sh runs only those), on a GPU under
# tilecute, each with its own checks (see nonexample_kernels in the notes for what each is):
#
#   bash .ci/tilelang_gpu/run_nonexample.sh <tilelang checkout> <out dir> [parallel jobs]
#
# Writes <out>/nonexample.txt: a RESULT line per run (with the CHECK lines of the KDA files,
# whose own comparison only prints) and <out>/logs/.  KDA_CONFIGS (default "default 0"):
# which autotune configs of each KDA kernel to check (TL_CONFIG of run_kernel_file.py;
# "tune" runs the file as written: every config compiled, the fastest checked).  JOBS: a
# grep -E pattern matched at the start of "folder|name" (default: all jobs), to split the runs
# (a device command has 10 minutes), e.g. JOBS=kda and JOBS='deepseek|seer|online|dsa|gdn'.
# Needs triton on the GPU machine (the KDA references are FLA's triton kernels).
set -u
TL=$(cd "$1" && pwd); OUT=$(mkdir -p "$2/logs" && cd "$2" && pwd); P=${3:-4}
HERE=$(cd "$(dirname "$0")" && pwd)
RUN="python3 $HERE/run_kernel_file.py"
jobs=$OUT/jobs.txt; : > "$jobs"
for f in chunk_o chunk_bwd_dv chunk_bwd_gla_dA chunk_bwd_intra chunk_bwd_dqkwg chunk_delta_bwd \
         chunk_delta_h_fwd chunk_intra_token_parallel wy_fast wy_fast_bwd; do
  for c in ${KDA_CONFIGS:-default 0}; do
    if [ "$c" = tune ]; then echo "kda|$f.tune|$RUN $f.py" >> "$jobs"
    else echo "kda|$f.cfg$c|TL_CONFIG=$c $RUN $f.py" >> "$jobs"; fi
  done
done
cat >> "$jobs" <<EOF
kda|chunk_inter_solve_fused|$RUN chunk_inter_solve_fused.py
deepseek_v4|act_quant|$RUN act_quant.py
deepseek_v4|sparse_attn_h8_64_128|$RUN sparse_attn_fwd_sm90.py --call test_correctness --call "test_correctness(H=64)" --call "test_correctness(H=128, N_KV=2048)"
deepseek_v4|sparse_attn_main_h128_d512|$RUN sparse_attn_fwd_sm90.py
seer_attention|block_sparse_attn_tilelang|$RUN block_sparse_attn_tilelang.py
online_softmax|online_softmax|$RUN online_softmax.py
dsa_sparse_finetune|dsa|$RUN dsa.py
deepseek_v32|tests|PYTHONPATH=$HERE python3 -m pytest -q -p tlalias -p no:cacheprovider -o addopts= -c /dev/null test_tilelang_example_deepseek_v32.py -rf --tb=short
gdn|compilation_tests|PYTHONPATH=$HERE python3 -m pytest -q -p tlalias -p no:cacheprovider -o addopts= -c /dev/null test_example_gdn_compilation.py -rf --tb=short
EOF
# each job (folder|name|command) becomes a script; its log keeps everything, the summary the
# RESULT / CHECK / pytest lines
mkdir -p "$OUT/jobs"
while IFS='|' read -r dir name cmd; do
  printf 'cd "%s/examples/%s" || exit 1\n%s\n' "$TL" "$dir" "$cmd" > "$OUT/jobs/$dir.$name.sh"
done < <(grep -E "^(${JOBS:-.})" "$jobs")
ls "$OUT/jobs" | xargs -P "$P" -I{} sh -c \
  'timeout ${TMO:-600} bash "'"$OUT"'/jobs/{}" > "'"$OUT"'/logs/{}.log" 2>&1;
   s=$(grep -aE "^(RESULT|CHECK|TL_CONFIG|CALL)|passed|failed|ratio" "'"$OUT"'/logs/{}.log" | tail -14 | tr "\n" " ");
   echo "{} ${s:-RESULT TIMEOUT/CRASH}" | cut -c1-1500' > "$OUT/nonexample.txt"
grep -c "RESULT OK\| passed" "$OUT/nonexample.txt"
