#!/usr/bin/env bash
# GPU check of `madengine-rocprof run` in ONE device call (no docker there: local runner, same chain).
#   device run, kind nvidia-h200-x2, carry [".whl"], command: bash benchmarks/runner/gpu_check.sh
# .whl/ holds the cp312 wheels the device image lacks (pydantic, pydantic_core, annotated_types, typing_inspection,
# typing_extensions; see docs/runner.md "GPU check"). Phases, in priority order, each with its own time limit, and
# none started after BUDGET_S: lightweight v1+v4, compute_bound v1+v4, multi_gpu (2 GPUs, torchrun), lightweight
# v2+v3 (so the lightweight perf.csv has v1..v4 for the reports). Run directories are tarred into $OUT per phase.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gpu_check_out}
RUNS=${RUNS:-runs_gpu}
BUDGET_S=${BUDGET_S:-480}          # the device call allows 600 s; leave room for packing
MAX_TAR=$((15 * 1024 * 1024))      # the device returns files of at most 16 MiB
PY=${PY:-python3}
mkdir -p "$OUT" "$RUNS"
exec > >(tee "$OUT/gpu_check.log") 2>&1
start=$(date +%s)
export PYTHONUNBUFFERED=1

if ! "$PY" -c "import pydantic" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 1; }
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

{
  date -u +%FT%TZ; uname -a; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv
  "$PY" -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__, "gpus", torch.cuda.device_count())'
  "$PY" -c 'import pydantic; print("pydantic", pydantic.VERSION)'; "$PY" -c 'import pynvml; print("pynvml ok")'
  (ncu --version | tail -1) 2>/dev/null || echo "ncu: not found"
  (nsys --version) 2>/dev/null || echo "nsys: not found"
  git log -1 --format='commit %h %s' 2>/dev/null || true
} | tee "$OUT/device_env.txt"

run() {  # run LABEL TIMEOUT_S CONFIG [extra madengine-rocprof run args...]
  local label=$1 limit=$2 config=$3; shift 3
  local now=$(( $(date +%s) - start ))
  if [ "$now" -ge "$BUDGET_S" ]; then echo "=== SKIP $label: ${now}s used of ${BUDGET_S}s"; return; fi
  echo "=== $label (t=${now}s)"
  "$PY" -m madengine_rocprof run --runner local --quiet --output-dir "$RUNS/$label" --timeout "$limit" \
    --additional-context-file "profiling-configs/$config.json" "$@"
  echo "=== $label: exit $? after $(( $(date +%s) - start - now ))s"
}

run lightweight 120 rocprofv3_lightweight --tags tiny_llama_v1 tiny_llama_v4
# ncu replays every kernel it profiles: profile the first NCU_LAUNCHES launches only (the wrapper's knob).
NCU_LAUNCHES=${NCU_LAUNCHES:-400}
run compute_bound 150 rocprofv3_compute_bound --tags tiny_llama_v1:num-steps=3:warmup-steps=1 tiny_llama_v4:num-steps=3:warmup-steps=1 \
  --additional-context "{\"docker_env_vars\": {\"MADENGINE_ROCPROF_NCU_LAUNCH_COUNT\": \"$NCU_LAUNCHES\"}}"
run multi_gpu 150 rocprofv3_multi_gpu --tags tiny_llama_v1:num-steps=10 \
  --additional-context '{"docker_gpus": "0,1", "gpus_per_node": 2, "distributed": {"nproc_per_node": 2}}'
run lightweight 120 rocprofv3_lightweight --tags tiny_llama_v2 tiny_llama_v3

# perf.csv rows and run outcomes, readable in the reply's output tail.
"$PY" - "$RUNS" <<'PY'
import csv, json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("*/perf.csv")):
    for r in csv.DictReader(open(f, newline="")):
        print(f"perf.csv {f.parent.name}: {r['model']} n_gpus={r['n_gpus']} {r['performance']} {r['metric']} {r['status']} {r['gpu_architecture']}")
for p in sorted(pathlib.Path(sys.argv[1]).glob("*/*/run.json")):
    d = json.loads(p.read_text())
    prof = "; ".join(f"{x['tool']}: {x['outcome']} via {x.get('profiler', {}).get('name')} ({x.get('dispatch_count')} dispatches)"
                     for x in d["profilers"])
    samp = "; ".join(f"{s['tool']}: {s['rows']} rows" for s in d["samplers"])
    perf = d["performance"] or {}
    print(f"{p.parent.parent.name}/{d['model']}: {d['status']} {perf.get('value')} {perf.get('metric')} | {prof} | {samp} | {d['failures']}")
PY

# One tarball per phase (no copied model scripts). Over the size limit: again without the Perfetto JSON traces,
# then also without the full kernel traces, then without ncu/Perfetto binary reports (stats, counter CSVs,
# manifests, logs, sampler CSVs and perf.csv always stay).
for dir in "$RUNS"/*/; do
  name=$(basename "$dir")
  for level in 0 1 2 3; do
    excludes=(--exclude=model_scripts --exclude=__pycache__)
    [ "$level" -ge 1 ] && excludes+=(--exclude="*_perfetto_trace.json")
    [ "$level" -ge 2 ] && excludes+=(--exclude="*_kernel_trace.csv")
    [ "$level" -ge 3 ] && excludes+=(--exclude="*.ncu-rep" --exclude="*.pftrace" --exclude="*_results.json" --exclude="*.nsys-rep")
    tar -czf "$OUT/$name.tgz" "${excludes[@]}" -C "$RUNS" "$name"
    [ "$(stat -c %s "$OUT/$name.tgz")" -le "$MAX_TAR" ] && break
  done
  echo "packed $OUT/$name.tgz: $(stat -c %s "$OUT/$name.tgz") bytes (reduction level $level)"
done
echo "total $(( $(date +%s) - start ))s"
