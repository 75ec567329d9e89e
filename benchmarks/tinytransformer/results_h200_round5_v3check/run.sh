#!/usr/bin/env bash
# v3 B32 S512 no-regression check: previous round's code (fa663aa) vs main, alternating processes.
cd "$(dirname "$0")"
for i in 1 2; do
  for tree in old new; do
    python3 $tree/scripts/tinytransformer/tt_harness.py --version v3 --batch-size 32 --seq-len 512 --num-steps 50 \
      --warmup-steps 8 --json-out "$OUT/v3_b32s512_${tree}_$i.json" > "$OUT/v3_b32s512_${tree}_$i.log" 2>&1
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); m=d["metrics"]; s=m["step_time_ms"]; print(sys.argv[2], round(m["tokens_per_second"]), "median", round(s["median"],2), "p10", round(s["p10"],2), "p90", round(s["p90"],2), "min", round(s["min"],2), d["status"])' "$OUT/v3_b32s512_${tree}_$i.json" "$tree#$i"
  done
done
