#!/usr/bin/env bash
# CUPTI backend measurements (issue 10), from the repository root on a CUDA machine; results to $OUT.
#   part 1: versions; per-launch host cost per backend (launch_overhead.py); eager v1 B8 S128 in-process overhead
#           for cupti (kernel trace), cupti + --hip-trace and torch.profiler; dispatch counts cupti vs ncu.
#   part 2 (PART=2): v1..v4 at B8 S128 and B32 S512, plain vs cupti + --hip-trace, in-process.
#   part 3 (PART=3): launch cost again; eager v1 B8 S128 with alternating traced/untraced windows in each process
#           (overhead_alternating.py: every backend variant, plus plain as the method's control).
# v4 replays one CUDA graph (its optimizer step never runs in Python after capture), so it is measured with
# overhead.py: alternating plain and traced processes, tracing every step.
# cupti-python is installed from a carried wheel: WHEELS=dir of cupti_python-*.whl (default .whl).
# Everything lands in $RES; $OUT gets results_part<N>.tgz (the device returns at most 8 files).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/cupti_check}; RES=${RES:-/tmp/cupti_res}; mkdir -p "$OUT" "$RES"
trap 'tar czf "$OUT/results_part${PART:-1}.tgz" -C "$RES" .' EXIT
trap 'exit 143' TERM
if ! python3 -c "import cupti" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "${WHEELS:-.whl}"/cupti_python-*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import sys, torch, importlib.metadata as m; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "cupti-python", m.version("cupti-python"), "nvidia-cuda-cupti", m.version("nvidia-cuda-cupti"))'
  ncu --version | tail -1
  python3 -m madengine_rocprof doctor 2>&1 | grep -i "embedded\|tracer backend\|chosen"
} > "$RES/versions.txt" 2>&1
cat "$RES/versions.txt"
VARIANTS=(--no-default --tracer-variant "cupti:MADENGINE_ROCPROF_TRACER_BACKEND=cupti"
          --tracer-variant "cupti_api:MADENGINE_ROCPROF_TRACER_BACKEND=cupti;WRAPPER_ARGS=--hip-trace")
if [ "${PART:-1}" = 1 ] || [ "${PART:-1}" = all ]; then
  time python3 benchmarks/wrapper/launch_overhead.py > "$RES/launch_overhead.json" 2> "$RES/launch_overhead.log"
  python3 - "$RES/launch_overhead.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for name, v in d["variants"].items():
    if "error" in v:
        print(name, "ERROR", v["error"][-600:]); continue
    for k in ("empty", "add"):
        r = v[k]
        print(f"{name:22s} {k:6s} untraced {r['untraced_us_per_launch']:7.3f} us  traced {r['traced_us_per_launch']:7.3f} us"
              f"  extra {r['extra_us_per_launch']:6.3f} us/launch  kernels/block {r['kernels_seen_per_block']} dropped {sorted(set(map(str, r['dropped_records'])))}")
PY
  time python3 benchmarks/wrapper/overhead_inprocess.py --out "$RES/v1_b8s128" --procs "${PROCS:-2}" --skip-part-b \
      "${VARIANTS[@]}" --tracer-variant "torch:MADENGINE_ROCPROF_TRACER_BACKEND=torch;WRAPPER_ARGS=--hip-trace" \
      -- --version v1 --cuda-graphs off --batch-size 8 --seq-len 128 > "$RES/v1_b8s128.txt" 2> "$RES/v1_b8s128.log"
  cat "$RES/v1_b8s128.txt"
fi
if [ "${PART:-1}" = 1 ]; then
  # Dispatch counts: the same short run under the CUPTI backend and under ncu (one metric: one replay pass).
  SMALL=(--version v1 --num-layers 2 --num-steps 2 --warmup-steps 1 --batch-size 4 --seq-len 64 --cuda-graphs off)
  work=$(mktemp -d); cd "$work"
  MADENGINE_ROCPROF_TRACER_BACKEND=cupti python3 -m madengine_rocprof.wrapper --profiler embedded --profile lightweight \
      --kernel-trace --hip-trace --stats -d "$work/embedded" -- python3 "$OLDPWD/scripts/tinytransformer/tt_harness.py" "${SMALL[@]}" > "$RES/counts_embedded.log" 2>&1
  echo "embedded exit $?"
  MADENGINE_ROCPROF_NCU_METRICS=gpu__time_duration.sum timeout 400 python3 -m madengine_rocprof.wrapper --profiler ncu \
      --profile compute_bound -d "$work/ncu" -- python3 "$OLDPWD/scripts/tinytransformer/tt_harness.py" "${SMALL[@]}" > "$RES/counts_ncu.log" 2>&1
  echo "ncu exit $?"
  cd "$OLDPWD"
  python3 benchmarks/wrapper/compare_counts.py "$work/embedded" "$work/ncu" > "$RES/counts.json"; echo "counts agree: exit $?"
  head -12 "$RES/counts.json"
  python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print(m["outcome"], m["dispatch_count"], json.dumps(m.get("tracer"))[:600]); print([o["path"] for o in m["outputs"]])' "$work/embedded/manifest.json"
fi
if [ "${PART:-1}" = 3 ]; then
  [ "${LAUNCH:-1}" = 1 ] && time python3 benchmarks/wrapper/launch_overhead.py > "$RES/launch_overhead.json" 2> "$RES/launch_overhead.log"
  [ "${LAUNCH:-1}" = 1 ] && tail -n 12 "$RES/launch_overhead.log"
  time python3 benchmarks/wrapper/overhead_alternating.py --out "$RES/v1_b8s128_alternating" --procs "${PROCS:-2}" \
      --pairs "${PAIRS:-40}" --block-steps "${BLOCK_STEPS:-4}" ${ALT_VARIANTS:+--variants "$ALT_VARIANTS"} \
      -- --version v1 --cuda-graphs off --batch-size 8 --seq-len 128 \
      > "$RES/v1_b8s128_alternating.txt" 2> "$RES/v1_b8s128_alternating.log"
  cat "$RES/v1_b8s128_alternating.txt"; tail -n 20 "$RES/v1_b8s128_alternating.log"
fi
if [ "${PART:-1}" = 2 ] || [ "${PART:-1}" = all ]; then
  for cfg in "8 128" "32 512"; do
    set -- $cfg
    for v in v1 v2 v3 v4; do
      [ "$v$1" = v18 ] && [ "${PART:-1}" = all ] && continue  # measured above with more processes
      if [ "$v" = v4 ]; then
        (cd benchmarks/wrapper && python3 overhead.py --pairs "${PAIRS:-2}" --tracer-env MADENGINE_ROCPROF_TRACER_BACKEND=cupti \
            --tracer-env MADENGINE_ROCPROF_TRACER_API=1 -- --version v4 --batch-size $1 --seq-len $2 --num-steps 40) \
            > "$RES/v4_b$1s$2.json" 2> "$RES/v4_b$1s$2.log"
        echo "== v4 B$1 S$2 (pairs)"; python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["plain_step_ms_median"], d["traced_step_ms_median"], d["overhead_pct"], [(r.get("outcome"), r.get("dispatch_count")) for r in d["runs"] if r["traced"]])' "$RES/v4_b$1s$2.json"
        continue
      fi
      python3 benchmarks/wrapper/overhead_inprocess.py --out "$RES/${v}_b$1s$2" --procs "${PROCS:-1}" --skip-part-b \
          --no-default --tracer-variant "cupti_api:MADENGINE_ROCPROF_TRACER_BACKEND=cupti;WRAPPER_ARGS=--hip-trace" \
          -- --version $v --cuda-graphs off --batch-size $1 --seq-len $2 > "$RES/${v}_b$1s$2.txt" 2> "$RES/${v}_b$1s$2.log"
      echo "== $v B$1 S$2"; tail -n 4 "$RES/${v}_b$1s$2.txt"
    done
  done
fi
