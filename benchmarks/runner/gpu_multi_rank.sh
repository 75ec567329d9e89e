#!/usr/bin/env bash
# Profiling 2 ranks on 2 GPUs, the product path, in ONE device call (issue 31 item 2):
#   device run, kind nvidia-h100-x2, carry [".whl"], command: bash benchmarks/runner/gpu_multi_rank.sh
# 1. `madengine-rocprof run --runner local` with the shipped rocprofv3_multi_gpu.json (the vendor is detected, the
#    AMD in the config notwithstanding: docs/runner.md) on TinyTransformer v4 over 2 ranks: exit code, run.json's
#    profilers and the per-rank kernel traces;
# 2. tracing overhead on 2 ranks the way benchmarks/tracer/product_path.py measures one: the wrapper around torchrun,
#    untraced and traced processes alternating, best/best (v4x2_* variants); its last round writes every trace, so
#    the per-rank dispatch counts of the CUPTI tracer and of torch.profiler (v4x2_torch) come from the same round.
# .whl/ holds the cp312 wheels the device image lacks (pydantic, pydantic_core, annotated_types, typing_inspection,
# cupti-python for the CUPTI backend; polars, adbc-driver-manager, adbc-driver-sqlite and msgspec for the CLI, which
# imports them at start-up: polars-runtime-32 alone is 54 MB, so step 1 needs a smaller tree than the 64 MiB limit).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/gpu_multi_rank_out}
RUNS=${RUNS:-runs_multi_rank}
ROUNDS=${ROUNDS:-2}
PY=${PY:-python3}
mkdir -p "$OUT" "$RUNS"
exec > >(tee "$OUT/gpu_multi_rank.log") 2>&1
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ! "$PY" -c "import pydantic" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 1; }
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
nvidia-smi --query-gpu=index,name,driver_version --format=csv
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "gpus", torch.cuda.device_count())'

echo "=== run --runner local, rocprofv3_multi_gpu, v4 on 2 ranks"
start=$(date +%s)
"$PY" -m madengine_rocprof run --runner local --quiet --output-dir "$RUNS/multi_gpu" --timeout 240 \
  --additional-context-file profiling-configs/rocprofv3_multi_gpu.json --tags tiny_llama_v4:num-steps=20 \
  --additional-context '{"docker_gpus": "0,1", "gpus_per_node": 2, "distributed": {"nproc_per_node": 2}}'
echo "=== run: exit $? after $(( $(date +%s) - start ))s"
"$PY" - "$RUNS" <<'PY'
import csv, json, pathlib, sys
root = pathlib.Path(sys.argv[1])
for p in sorted(root.glob("**/run.json")):
    d = json.loads(p.read_text())
    perf = d.get("performance") or {}
    print(f"run.json {d['model']}: {d['status']} {perf.get('value')} {perf.get('metric')} failures={d['failures']}")
    for x in d["profilers"]:
        print(f"  profiler {x['tool']}: {x['outcome']} via {x.get('profiler', {}).get('name')}, "
              f"{x.get('dispatch_count')} dispatches")
for f in sorted(root.glob("**/*kernel_trace.csv")):
    names = {}
    with open(f, newline="") as fh:
        for row in csv.DictReader(fh):
            n = row.get("Kernel_Name", "")
            names[n] = names.get(n, 0) + 1
    nccl = sum(c for n, c in names.items() if "nccl" in n.lower())
    print(f"kernel trace {f.relative_to(root)}: {sum(names.values())} dispatches, {len(names)} kernels, nccl {nccl}")
PY
tar -czf "$OUT/multi_gpu_run.tgz" --exclude=model_scripts --exclude=__pycache__ --exclude="*_perfetto_trace.json" \
  --exclude="*.pftrace" -C "$RUNS" multi_gpu 2>/dev/null
[ "$(stat -c %s "$OUT/multi_gpu_run.tgz" 2>/dev/null || echo 0)" -gt $((15 * 1024 * 1024)) ] && \
  tar -czf "$OUT/multi_gpu_run.tgz" --exclude=model_scripts --exclude="*.pftrace" --exclude="*_perfetto_trace.json" \
    --exclude="*_kernel_trace.csv" -C "$RUNS" multi_gpu

echo "=== overhead on 2 ranks (product_path.py, v4x2 variants)"
"$PY" benchmarks/tracer/product_path.py --rounds "$ROUNDS" --steps 60 --out "$OUT/pp" \
  --variants ${VARIANTS:-v4x2_none,v4x2_multi_gpu,v4x2_torch} --deadline-s "${DEADLINE_S:-300}"
echo "=== product_path: exit $?"
