#!/usr/bin/env bash
# Dispatch counts of the embedded tracer against Nsight Compute (issue 26: "dispatch counts equal to ncu's"), on the
# product path's workload (eager TinyTransformer v1, B8 S128) with fewer steps, because ncu replays every kernel:
#   1. the wrapper with the lightweight tool's flags (CUPTI backend, interposer), as product_path.py runs it;
#   2. the wrapper with ncu (one metric: one replay pass per kernel) on the same command;
#   3. compare_counts.py: per kernel name and per function name (CUPTI and ncu spell template arguments apart).
# From the repository root on a CUDA machine with ncu:  STEPS=10 WARMUP=2 bash benchmarks/tracer/ncu_count.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: ncu_count.sh OUTDIR}; mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
work=$(mktemp -d)
app=(python3 "$PWD/scripts/tinytransformer/tt_harness.py" --version v1 --batch-size 8 --seq-len 128 --cuda-graphs off
     --num-steps "${STEPS:-10}" --warmup-steps "${WARMUP:-2}")
bash scripts/rocprof_wrapper.sh --profile lightweight --kernel-trace --hip-trace --stats --output-format csv \
    -d "$work/embedded" -o %hostname%/%pid% -- "${app[@]}" > "$out/embedded.log" 2>&1
echo "embedded exit $?"
MADENGINE_ROCPROF_NCU_METRICS=gpu__time_duration.sum timeout "${NCU_TIMEOUT_S:-300}" \
    python3 -m madengine_rocprof.wrapper --profiler ncu --profile compute_bound -d "$work/ncu" -- "${app[@]}" \
    > "$out/ncu.log" 2>&1
echo "ncu exit $?"
python3 benchmarks/wrapper/compare_counts.py "$work/embedded" "$work/ncu" > "$out/counts.json"
echo "counts agree: exit $?"
head -c 1500 "$out/counts.json"; echo
cat "$work"/embedded/*/*tracer_summary.json 2>/dev/null | head -c 1500 > "$out/tracer_summary.json"
