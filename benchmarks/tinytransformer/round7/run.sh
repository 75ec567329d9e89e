#!/usr/bin/env bash
# Round 7 (issue 11): the previous code against this round's changes and their settings, one process per variant,
# bench.py's own method, the variants interleaved (round 2 runs them in reverse order). A variant is a settings file
# in settings/ (bench.py --kernel-settings) or "old": the previous code, exported beside the repository with
#   git archive da60798 scripts/tinytransformer benchmarks/tinytransformer/bench.py | tar -x -C "$OLD"
# Usage: OUT=dir OLD=dir [VARIANTS="old new pdl2 ..."] [ROUNDS=2] [RUNS=B8_S128/v4,B32_S512/v4] [GATES=variant]
#        [DEADLINE=seconds] bash benchmarks/tinytransformer/round7/run.sh
# GATES runs bench.py --gates (B8 S128 v4) with that variant first. No new process starts after DEADLINE seconds.
set -u
OUT=${OUT:-/tmp/round7}
OLD=${OLD:-}
VARIANTS=${VARIANTS:-old new pdl1 pdl2 wgrad wgrad_all min2 min4 combo}
ROUNDS=${ROUNDS:-2}
RUNS=${RUNS:-B8_S128/v4,B32_S512/v4}
DEADLINE=${DEADLINE:-100000}
mkdir -p "$OUT"
cd "$(dirname "$0")/../../.."
here=benchmarks/tinytransformer/round7
start=$(date +%s)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"; } \
  > "$OUT/versions.txt" 2>&1

run_one() {  # variant tag [bench.py options...]
  local name=$1 tag=$2 script settings=()
  shift 2
  if (( $(date +%s) - start > DEADLINE )); then echo "$tag ($name): skipped (deadline)" >> "$OUT/summary.txt"; return; fi
  if [ "$name" = old ]; then
    script="$OLD/benchmarks/tinytransformer/bench.py"
  else
    script=benchmarks/tinytransformer/bench.py
    settings=(--kernel-settings "$here/settings/$name.json")
  fi
  local t0; t0=$(date +%s)
  timeout "${PROC_TIMEOUT:-180}" python3 "$script" --out "$OUT/$tag" "${settings[@]}" "$@" > "$OUT/$tag.log" 2>&1
  echo "$tag ($name): rc=$? $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt"
  grep -E "^\| B(8|32)_S|^gate .*FAIL|Error" "$OUT/$tag.log" | head -8 >> "$OUT/summary.txt"
}

if [ -n "${GATES:-}" ]; then run_one "$GATES" "gates_$GATES" --gates --only B8_S128/v4; fi
read -r -a order <<< "$VARIANTS"
for (( r = 1; r <= ROUNDS; r++ )); do
  if (( r % 2 == 0 )); then
    for (( i = ${#order[@]} - 1; i >= 0; i-- )); do run_one "${order[i]}" "r${r}_${order[i]}" --only "$RUNS"; done
  else
    for v in "${order[@]}"; do run_one "$v" "r${r}_$v" --only "$RUNS"; done
  fi
done
cat "$OUT/summary.txt"
