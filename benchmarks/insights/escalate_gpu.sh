#!/usr/bin/env bash
# GPU check of `madengine-rocprof escalate` with the real ncu: NOT RUN YET (no device time was available to the
# insights helper). Run it in one device call, like benchmarks/runner/gpu_check.sh:
#   device run, kind nvidia-h200, carry [".whl"], command: bash benchmarks/insights/escalate_gpu.sh
# What it measures, on TinyTransformer v1 (eager, many distinct kernels), the same steps everywhere:
#   1. first pass: rocprofv3_lightweight (the wrapper picks nsys or the embedded tracer on NVIDIA);
#   2. escalation: top 5 kernels, one ncu pass per profile they need, kernel filter + launch skip/count;
#   3. the cost it avoids: ncu compute_bound and memory_bound over EVERY kernel launch of the same run.
# It passes when every top kernel of (2) got counters and (2) costs less wall time than (3). Results: $OUT/*.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/escalate_gpu_out}
RUNS=${RUNS:-runs_escalate}
PY=${PY:-python3}
TAGS=${TAGS:-tiny_llama_v1:num-steps=5:warmup-steps=2}
mkdir -p "$OUT" "$RUNS"
exec > >(tee "$OUT/escalate_gpu.log") 2>&1
export PYTHONUNBUFFERED=1
if ! "$PY" -c "import pydantic" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 1; }
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
{
  date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
  (ncu --version | tail -1) 2>/dev/null || echo "ncu: not found"
  git log -1 --format='commit %h %s' 2>/dev/null || true
} | tee "$OUT/device_env.txt"

timed() {  # timed LABEL command...: wall seconds into $OUT/times.txt
  local label=$1; shift
  local t0=$(date +%s.%N)
  "$@"; local rc=$?
  echo "$label rc=$rc wall_s=$(echo "$(date +%s.%N) - $t0" | bc)" | tee -a "$OUT/times.txt"
}

timed first_pass "$PY" -m madengine_rocprof run --runner local --quiet --output-dir "$RUNS/first" --tags "$TAGS" \
  --additional-context-file profiling-configs/rocprofv3_lightweight.json
FIRST=$(ls -d "$RUNS"/first/*__rocprofv3_lightweight | head -1)
timed escalation "$PY" -m madengine_rocprof escalate "$FIRST" --runner local --quiet --top 5 \
  --launches-per-kernel 10 --launch-skip 20 --json "$OUT/escalation.json" --markdown "$OUT/escalation.md"
for profile in compute_bound memory_bound; do
  timed "every_kernel_$profile" "$PY" -m madengine_rocprof run --runner local --quiet --output-dir "$RUNS/all_$profile" \
    --tags "$TAGS" --additional-context-file "profiling-configs/rocprofv3_$profile.json"
done
"$PY" - "$OUT" <<'PY'
import json, pathlib, re, sys
out = pathlib.Path(sys.argv[1])
times = dict(re.match(r"(\S+) rc=\d+ wall_s=([\d.]+)", l).groups() for l in (out / "times.txt").read_text().splitlines())
esc = float(times["escalation"]); full = float(times["every_kernel_compute_bound"]) + float(times["every_kernel_memory_bound"])
report = json.loads((out / "escalation.json").read_text())
missing = [k["name"][:60] for k in report["kernels"] if k["profile"] and not k.get("counters")]
print(f"escalation {esc:.1f}s vs every kernel {full:.1f}s; top kernels without counters: {missing or 'none'}")
print("PASS" if esc < full and not missing else "FAIL")
PY
