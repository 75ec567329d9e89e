#!/usr/bin/env bash
# Final single-GPU check of the committed code: `madengine-rocprof run` (local runner) for v1 and v4 under the
# lightweight and compute_bound configs, then `madengine-rocprof report` on the lightweight runs.
#   device run, kind nvidia-h100-x1, carry [".whl"], command: bash benchmarks/runner/gpu_final_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gpu_final_out}; RUNS=/tmp/runs_final; PY=python3
mkdir -p "$OUT" "$RUNS"
exec > >(tee "$OUT/gpu_final_check.log") 2>&1
export PYTHONUNBUFFERED=1
if ! "$PY" -c "import pydantic" 2>/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$PY" -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)'
git log -1 --format='commit %h %s' 2>/dev/null || true
"$PY" -m madengine_rocprof doctor --profile compute_bound
"$PY" -m madengine_rocprof run --runner local --quiet --output-dir "$RUNS/lightweight" --timeout 150 \
  --additional-context-file profiling-configs/rocprofv3_lightweight.json --tags tiny_llama_v1:num-steps=20 tiny_llama_v4:num-steps=20
echo "lightweight: exit $?"
"$PY" -m madengine_rocprof run --runner local --quiet --output-dir "$RUNS/compute_bound" --timeout 200 \
  --additional-context-file profiling-configs/rocprofv3_compute_bound.json \
  --additional-context '{"docker_env_vars": {"MADENGINE_ROCPROF_NCU_LAUNCH_COUNT": "200"}}' \
  --tags tiny_llama_v1:num-steps=3:warmup-steps=1 tiny_llama_v4:num-steps=3:warmup-steps=1
echo "compute_bound: exit $?"
"$PY" -m madengine_rocprof report "$RUNS/lightweight" "$RUNS/compute_bound" --html "$OUT/report.html" --json "$OUT/report.json" > "$OUT/report.md"
echo "report: exit $?"
cat "$RUNS"/*/perf.csv > "$OUT/perf_all.csv"
find "$RUNS" -name '*.ncu-rep' -delete
tar czf "$OUT/runs_final.tgz" -C "$RUNS" --exclude='*perfetto_trace.json' . && ls -la "$OUT"
head -30 "$OUT/report.md"
