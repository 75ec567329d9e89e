#!/usr/bin/env bash
# GPU check of `madengine-rocprof escalate` with the real ncu, in one device call (benchmarks/insights/README.md):
#   device run, kind nvidia-h200, carry [".whl", <this checkout>], command:
#     CAP_S=75 WHEELS=.whl bash benchmarks/insights/escalate_gpu.sh
# What it measures, on TinyTransformer v1 (eager, many distinct kernels), the same steps everywhere:
#   1. first pass: rocprofv3_lightweight (the wrapper picks nsys or the embedded tracer on NVIDIA);
#   2. escalation: top 5 kernels, one ncu pass per profile they need, kernel filter + launch skip/count;
#   3. ncu's own spellings of the kernels it profiled (--print-kernel-base function/demangled/mangled of the
#      escalation's report), to check the name key against real ncu names;
#   4. the cost it avoids: ncu compute_bound and memory_bound over EVERY kernel launch of the same run, each stopped
#      after CAP_S seconds when set (then its time is a lower bound: rc=124 in times.txt).
# It passes when every top kernel of (2) got counters and (2) costs less wall time than (4). Results: $OUT/*.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/escalate_gpu_out}
RUNS=${RUNS:-runs_escalate}
PY=${PY:-python3}
TAGS=${TAGS:-tiny_llama_v1:num-steps=5:warmup-steps=2}
WHEELS=${WHEELS:-.whl}
CAP_S=${CAP_S:-}
mkdir -p "$OUT" "$RUNS"
exec > >(tee "$OUT/escalate_gpu.log") 2>&1
export PYTHONUNBUFFERED=1
if ! "$PY" -c "import pydantic" 2>/dev/null && ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl \
    || { echo "wheel install failed"; exit 1; }
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
{
  date -u +%FT%TZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
  (ncu --version | tail -1) 2>/dev/null || echo "ncu: not found"
  git log -1 --format='commit %h %s' 2>/dev/null || true
  echo "CAP_S=${CAP_S:-none}"
} | tee "$OUT/device_env.txt"

now() { "$PY" -c 'import time; print(f"{time.monotonic():.3f}")'; }
timed() {  # timed LABEL command...: wall seconds into $OUT/times.txt (no bc on the device image)
  local label=$1; shift
  local t0; t0=$(now)
  "$@"; local rc=$?
  echo "$label rc=$rc wall_s=$("$PY" -c "print(round($(now) - $t0, 2))")" | tee -a "$OUT/times.txt"
}

timed first_pass "$PY" -m madengine_rocprof run --runner local --quiet --output-dir "$RUNS/first" --tags "$TAGS" \
  --additional-context-file profiling-configs/rocprofv3_lightweight.json
FIRST=$(ls -d "$RUNS"/first/*__rocprofv3_lightweight | head -1)
timed escalation "$PY" -m madengine_rocprof escalate "$FIRST" --runner local --quiet --top 5 \
  --launches-per-kernel 10 --launch-skip 20 --json "$OUT/escalation.json" --markdown "$OUT/escalation.md"
cp "$FIRST.escalate/escalation_plan.json" "$OUT/" 2>/dev/null
# the first pass's kernel names and calls (CUPTI's spelling) and the second pass's small files (logs, manifests)
mkdir -p "$OUT/first_pass" "$OUT/second_pass"
cp "$FIRST"/profiler/*/*_kernel_stats.csv "$FIRST/run.json" "$OUT/first_pass/" 2>/dev/null
(cd "$FIRST.escalate" && find . -type f -size -1M ! -name '*.ncu-rep' -exec cp --parents {} "$OUT/second_pass/" \;)
# ncu's spellings of what it profiled, per name base (the join and the filter are checked against these in tests)
for rep in "$FIRST".escalate/*/profiler/*/ncu_*.ncu-rep; do
  [ -f "$rep" ] || continue
  for base in function demangled mangled; do
    ncu --import "$rep" --csv --page raw --print-kernel-base "$base" 2>/dev/null | "$PY" -c '
import csv, sys
rows = [r for r in csv.reader(line for line in sys.stdin if line.startswith("\""))]
col = rows[0].index("Kernel Name")
print("\n".join(sorted({r[col] for r in rows[2:] if len(r) > col})))' > "$OUT/ncu_names_$base.txt"
  done
done
for profile in compute_bound memory_bound; do
  cap=(); [ -n "$CAP_S" ] && cap=(timeout "$CAP_S")
  timed "every_kernel_$profile" "${cap[@]}" "$PY" -m madengine_rocprof run --runner local --quiet \
    --output-dir "$RUNS/all_$profile" --tags "$TAGS" --additional-context-file "profiling-configs/rocprofv3_$profile.json"
done
"$PY" - "$OUT" <<'PY'
import json, pathlib, re, sys
out = pathlib.Path(sys.argv[1])
times = {m[0]: (int(m[1]), float(m[2])) for m in
         (re.match(r"(\S+) rc=(\d+) wall_s=([\d.]+)", l).groups() for l in (out / "times.txt").read_text().splitlines())}
esc = times["escalation"][1]
full = sum(times[f"every_kernel_{p}"][1] for p in ("compute_bound", "memory_bound"))
capped = any(times[f"every_kernel_{p}"][0] == 124 for p in ("compute_bound", "memory_bound"))
report = json.loads((out / "escalation.json").read_text())
missing = [k["name"][:60] for k in report["kernels"] if k["profile"] and not k.get("counters")]
print(f"escalation {esc:.1f}s vs every kernel {'more than ' if capped else ''}{full:.1f}s"
      f"{' (capped runs: lower bound)' if capped else ''}; top kernels without counters: {missing or 'none'}")
for k in report["kernels"]:
    print(f"  #{k['rank']} {k['name'][:70]}: joined {[(j['how'], j['dispatches']) for j in k.get('joined_from', [])]}")
print(f"not joined: {[(n['name'][:50], n['dispatches'], n['reason'][:40]) for n in report.get('not_joined', [])]}")
print("PASS" if esc < full and not missing else "FAIL")
PY
