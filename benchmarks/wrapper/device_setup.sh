# Sourced by the round scripts on the GPU machine: results folder and archive, carried wheels, environment, and what
# every round repeats (the versions, the alternating-window overhead, the short wrapper run).
# RES: where results go (default /tmp/res); OUT: where res.tgz is left; WHEELS: the carried wheels (default .whl).
RES=${RES:-/tmp/res}; OUT=${OUT:-/tmp/$1}; mkdir -p "$RES" "$OUT"
trap 'tar czf "$OUT/res.tgz" -C "$RES" .' EXIT
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "${WHEELS:-.whl}"/*.whl > "$RES/pip.log" 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 MADENGINE_ROCPROF_CACHE=${MADENGINE_ROCPROF_CACHE:-/tmp/mrc}
V1=(--version v1 --batch-size 8 --seq-len 128 --cuda-graphs off)

record_versions() {  # compiler, CPU, GPU and driver, Python packages, TSC and the native recorder: $RES/versions.txt
  {
    echo "cc: $(command -v cc)"; cc --version 2>&1 | head -1; grep -m1 "model name" /proc/cpuinfo
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 -c 'import sys, torch, importlib.metadata as m; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "cupti-python", m.version("cupti-python"), "nvidia-cuda-cupti", m.version("nvidia-cuda-cupti"))'
    python3 -c 'from madengine_rocprof.tracer import api_recorder as a; print("tsc invariant", a.invariant_tsc(), "recorder", a.build())'
  } > "$RES/versions.txt" 2>&1
  cat "$RES/versions.txt"
}

alternating() {  # variants, pairs, time limit: eager v1 B8 S128 overhead with alternating windows (2 processes)
  timeout "$3" python3 benchmarks/wrapper/overhead_alternating.py --out "$RES/v1_b8s128_alternating" --procs 2 \
      --pairs "$2" --block-steps 4 --variants "$1" -- "${V1[@]}" > "$RES/v1_b8s128_alternating.txt" \
      2> "$RES/v1_b8s128_alternating.log"
  echo "alternating exit $?"; cat "$RES/v1_b8s128_alternating.txt"
}

wrapper_run() {  # API recorder: the short v1 run through the wrapper, --kernel-trace --hip-trace --stats
  local small=(--version v1 --num-layers 2 --num-steps 2 --warmup-steps 1 --batch-size 4 --seq-len 64 --cuda-graphs off)
  local work
  work=$(mktemp -d)
  ( cd "$work" && MADENGINE_ROCPROF_TRACER_API_RECORDER=$1 timeout 120 python3 -m madengine_rocprof.wrapper \
      --profiler embedded --profile lightweight --kernel-trace --hip-trace --stats -d "$work/embedded" -- \
      python3 "$OLDPWD/scripts/tinytransformer/tt_harness.py" "${small[@]}" ) > "$RES/wrapper_$1.log" 2>&1
  echo "wrapper exit $?"
  python3 benchmarks/wrapper/wrapper_run_summary.py "$work/embedded" > "$RES/wrapper_$1.json"
  head -c 600 "$RES/wrapper_$1.json"; echo
}
