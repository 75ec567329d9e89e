#!/usr/bin/env bash
# Round 6 (issue 11): the landed launch settings (RMSNorm backward, attention forward tiles) against round 5's, four
# processes alternating A/B/A/B on one GPU, bench.py's own method. Usage: OUT=dir bash benchmarks/tinytransformer/round6/run.sh
set -u
OUT=${OUT:-/tmp/round6}
mkdir -p "$OUT"
cd "$(dirname "$0")/../../.."
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"; } \
  > "$OUT/versions.txt" 2>&1
runs="B8_S128/v4,B32_S512/v4,B8_S128/v3,B32_S512/v3"
for i in 1 2 3 4; do
  if (( i % 2 )); then name=round5; extra=(--kernel-settings benchmarks/tinytransformer/round6/round5_settings.json)
  else name=landed; extra=(); fi
  gates=(); (( i == 2 )) && gates=(--gates)
  python3 benchmarks/tinytransformer/bench.py --out "$OUT/p$i" "${gates[@]}" "${extra[@]}" --only "$runs" \
    > "$OUT/p$i.log" 2>&1
  echo "process $i ($name ${gates[*]}): rc=$?" | tee -a "$OUT/summary.txt"
  grep -E "^\| B(8|32)_S|^gate .*FAIL" "$OUT/p$i.log" | tee -a "$OUT/summary.txt"
done
