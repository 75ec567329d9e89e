#!/usr/bin/env bash
# GPU measurements for the wrapper (run from the repository root on a CUDA machine with ncu; results to $RESULTS):
#  1. versions; 2. embedded tracer and ncu (compute_bound, through the wrapper) on the same short TinyTransformer
#  run, kernel counts compared per name; 3. lightweight tracing overhead vs no profiler, in one process.
set -uo pipefail
RESULTS="${RESULTS:-${OUT:-/tmp/wrapper_gpu}}"
mkdir -p "$RESULTS"
REPO="$(cd "$(dirname "$0")/../.." && pwd)"
export PYTHONPATH="$REPO" PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)'
  ncu --version | tail -1
} > "$RESULTS/versions.txt" 2>&1
cat "$RESULTS/versions.txt"

# Keep only the compute_bound metrics this ncu knows (a missing one would fail the whole run); report the rest.
ncu --query-metrics > /tmp/ncu_metrics.txt 2>&1
MADENGINE_ROCPROF_NCU_METRICS=$(python3 - /tmp/ncu_metrics.txt <<'PY'
import sys
from madengine_rocprof.wrapper.nvidia import NCU_METRICS
known = {line.split()[0] for line in open(sys.argv[1]) if line.strip()}
ok = [m for m in NCU_METRICS["compute_bound"] if m.split(".")[0] in known]
print("missing on this ncu:", [m for m in NCU_METRICS["compute_bound"] if m not in ok], file=sys.stderr)
print(",".join(ok))
PY
)
export MADENGINE_ROCPROF_NCU_METRICS
SMALL=(--version v1 --num-layers 2 --num-steps 2 --warmup-steps 1 --batch-size 4 --seq-len 64 --cuda-graphs off)
work=$(mktemp -d)
cd "$work"
time python3 -m madengine_rocprof.wrapper --profiler embedded --profile lightweight --kernel-trace --stats \
    -d "$work/embedded" -- bash "$REPO/scripts/tinytransformer/run.sh" "${SMALL[@]}" > "$RESULTS/embedded.log" 2>&1
echo "embedded exit $?"
time timeout 300 python3 -m madengine_rocprof.wrapper --profiler ncu --profile compute_bound --kernel-trace \
    -d "$work/ncu" -- bash "$REPO/scripts/tinytransformer/run.sh" "${SMALL[@]}" > "$RESULTS/ncu.log" 2>&1
echo "ncu exit $?"
tail -n 5 "$RESULTS/embedded.log" "$RESULTS/ncu.log"
python3 "$REPO/benchmarks/wrapper/compare_counts.py" "$work/embedded" "$work/ncu" > "$RESULTS/counts.json"
echo "counts agree: exit $?"
head -12 "$RESULTS/counts.json"
python3 - "$work" "$RESULTS/manifests.json" <<'PY'
import json, sys, glob, os
w = sys.argv[1]
m = {k: json.load(open(os.path.join(w, k, "manifest.json"))) for k in ("embedded", "ncu")}
json.dump(m, open(sys.argv[2], "w"), indent=2)
for k, v in m.items():
    print(k, v["outcome"], v["exit_code"], v["dispatch_count"], [o["path"] for o in v["outputs"]][:6], v["messages"][:4])
PY
head -3 "$work"/ncu/*/*_counter_collection.csv | cut -c1-300
cd "$REPO"
python3 benchmarks/wrapper/launch_overhead.py > "$RESULTS/launch_overhead.json"
cat "$RESULTS/launch_overhead.json"
# Overhead in one process: untraced steps, then traced steps (tracer starts after optimizer step 45), plus plain
# processes as the drift control (see README section 2).
time python3 benchmarks/wrapper/overhead_inprocess.py --out "$RESULTS" --procs "${PROCS:-3}" > "$RESULTS/table.txt" \
    2> "$RESULTS/overhead_stderr.log"
cat "$RESULTS/table.txt"
