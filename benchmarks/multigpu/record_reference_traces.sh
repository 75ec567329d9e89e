#!/usr/bin/env bash
# Reference traces for the report analyses, recorded in ONE device call on two GPUs (kind nvidia-h100-x2):
#   device run, kind nvidia-h100-x2, carry [".dev-rec"] (this script, its .py, wheels in whl/, commit.txt),
#   command: bash .dev-rec/record_reference_traces.sh
# From the repository root. Stage A uses both GPUs, one phase after the other:
#   ddp_v1_2rank   torchrun x2, TinyTransformer v1 DDP B8 S128 per rank, torch.profiler active 4, shapes
#   fsdp_2rank     torchrun x2, v1 under FSDP2 (fully_shard per block + root), active 3, shapes
#   ours_2rank     the product's wrapper (embedded tracer) around torchrun x2, v1: per-rank CSVs + manifest
# Stage B runs two queues at once, one per GPU:
#   GPU 0: v4_graph_1gpu (v4 CUDA graph, active 4), v4_b32s512_eager_1gpu (bf16 eager, active 3, shapes),
#          v1_eager_1gpu (active 3, shapes)
#   GPU 1: gemm_ncu (Kineto trace of mm/addmm/bmm/linear with shapes; ncu counters per GEMM kernel),
#          ours_v1_1gpu_api (the wrapper, --kernel-trace --hip-trace, v1 eager)
# Every phase has its own time limit and none starts after BUDGET_S. Results go to $OUT as at most 7 files:
# A_<phase>.tgz (one per stage-A phase), B_gpu0.tgz and B_gpu1.tgz (re-packed after each phase, so partial results
# come back), run.log and env.txt.
# PHASES="a b ..." runs only the named phases (default: all).
# On a CPU (CHECK_CPU=1): gloo, the harness's tiny model, TRITON_INTERPRET=1, no ncu: a check for typos.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=${REPO:-$(cd "$HERE/../.." && pwd)}
[ -f "$REPO/scripts/tinytransformer/tt_harness.py" ] || REPO=$(cd "$HERE/.." && pwd)  # copied into .dev-rec/
cd "$REPO"
OUT=${OUT:-/tmp/rec_out}
WORK=${WORK:-/tmp/rec_work}
BUDGET_S=${BUDGET_S:-300}
CHECK_CPU=${CHECK_CPU:-0}
PY=${PY:-python3}
SCRIPT=$HERE/record_reference_traces.py
REC=("$PY" "$SCRIPT")
mkdir -p "$OUT" "$WORK"
exec > >(tee "$OUT/run.log") 2>&1
start=$(date +%s)
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}

if ! "$PY" -c "import pydantic" 2>/dev/null && ls "$HERE"/whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
    "$HERE"/whl/*.whl || echo "wheel install failed"
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"

if [ "$CHECK_CPU" = 1 ]; then
  DEV=(--device cpu --tiny --warmup-steps 1); GEMM_DEV=(--device cpu); HARNESS_DEV=(--device cpu)
  BIG=(--batch-size 2 --seq-len 16); SMALL_V4=(--batch-size 2 --seq-len 16); export TRITON_INTERPRET=1
else
  DEV=(--device cuda); GEMM_DEV=(--device cuda); HARNESS_DEV=(); BIG=(--batch-size 32 --seq-len 512); SMALL_V4=(--batch-size 8 --seq-len 128)
fi

{
  date -u +%FT%TZ; uname -a
  nvidia-smi 2>/dev/null || echo "nvidia-smi: not found"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv 2>/dev/null
  nvidia-smi topo -m 2>/dev/null
  "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count()); print("nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else None); print("cudnn", torch.backends.cudnn.version())'
  "$PY" -c 'import triton; print("triton", triton.__version__)' 2>&1
  "$PY" -c 'import pydantic; print("pydantic", pydantic.VERSION)' 2>&1
  "$PY" -c 'import cupti; print("cupti-python ok")' 2>&1 | tail -1
  (ncu --version | tail -1) 2>/dev/null || echo "ncu: not found"
  "$PY" -m pip list 2>/dev/null | grep -i -E "^(torch|triton|nvidia-nccl|nvidia-cuda-cupti|cupti|nvidia-cublas|numpy) "
  echo "commit $(cat "$HERE/commit.txt" 2>/dev/null || git log -1 --format=%H 2>/dev/null || echo unknown)"
  echo "env NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS=$NVSHMEM_DISABLE_NVLS OMP_NUM_THREADS=$OMP_NUM_THREADS"
} > "$OUT/env.txt" 2>&1
cat "$OUT/env.txt"

left() { echo $(( BUDGET_S - ($(date +%s) - start) )); }

phase() {  # phase NAME LIMIT_S CMD...: runs CMD in $WORK/NAME (cwd stays the repo), logs, times it
  local name=$1 limit=$2; shift 2
  case " ${PHASES:-$name} " in *" $name "*) ;; *) echo "=== SKIP $name: not in PHASES"; return 0;; esac
  local remaining; remaining=$(left)
  if [ "$remaining" -le 10 ]; then echo "=== SKIP $name: budget spent"; return 0; fi
  [ "$limit" -gt "$remaining" ] && limit=$remaining
  mkdir -p "$WORK/$name"
  echo "=== $name (t=$(( $(date +%s) - start ))s, limit ${limit}s)"
  printf '%q ' "$@" > "$WORK/$name/commands.txt"; echo >> "$WORK/$name/commands.txt"
  local t0; t0=$(date +%s)
  timeout -k 5 "$limit" "$@" > "$WORK/$name/log.txt" 2>&1
  local rc=$?
  echo "=== $name: exit $rc after $(( $(date +%s) - t0 ))s" | tee "$WORK/$name/exit.txt"
  tail -n 15 "$WORK/$name/log.txt"
  return 0
}

pack() {  # pack TARBALL PHASE...
  local tarball=$1 have=() d; shift
  for d in "$@"; do [ -d "$WORK/$d" ] && have+=("$d"); done
  [ "${#have[@]}" -gt 0 ] || return 0
  tar -czf "$OUT/$tarball.tmp" -C "$WORK" "${have[@]}" 2>/dev/null && mv "$OUT/$tarball.tmp" "$OUT/$tarball"
}

TORCHRUN=("$PY" -m torch.distributed.run --standalone --nproc_per_node=2)

# ---------------------------------------------------------------------------------------------- stage A: 2 GPUs
phase ddp_v1_2rank 60 "${TORCHRUN[@]}" "$SCRIPT" tt --version v1 --batch-size 8 --seq-len 128 --parallel ddp \
  --active 4 "${DEV[@]}" --name ddp_v1_2rank --out "$WORK/ddp_v1_2rank"
pack A_ddp_v1_2rank.tgz ddp_v1_2rank
phase fsdp_2rank 60 "${TORCHRUN[@]}" "$SCRIPT" tt --version v1 --batch-size 8 --seq-len 128 --parallel fsdp \
  --active 3 "${DEV[@]}" --name fsdp_2rank --out "$WORK/fsdp_2rank"
pack A_fsdp_2rank.tgz fsdp_2rank
# the product's own tracer on 2 ranks (per-rank rank<r>_<pid>_* files, manifest.json)
phase ours_2rank 70 "$PY" -m madengine_rocprof wrap --kernel-trace --memory-copy-trace --rccl-trace --hip-trace \
  --stats -d "$WORK/ours_2rank/trace" -- "${TORCHRUN[@]}" scripts/tinytransformer/tt_harness.py --version v1 \
  --batch-size 8 --seq-len 128 --num-steps 4 --warmup-steps 1 "${HARNESS_DEV[@]}"
pack A_ours_2rank.tgz ours_2rank

# ------------------------------------------------------------------------------ stage B: one queue per GPU
gpu0() {
  export CUDA_VISIBLE_DEVICES=0
  phase v4_graph_1gpu 90 "${REC[@]}" tt --version v4 "${SMALL_V4[@]}" --cuda-graphs auto --active 4 \
    "${DEV[@]}" --name v4_graph_1gpu --out "$WORK/v4_graph_1gpu"
  pack B_gpu0.tgz v4_graph_1gpu
  local bf16=(--dtype bf16); [ "$CHECK_CPU" = 1 ] && bf16=()
  phase v4_b32s512_eager_1gpu 60 "${REC[@]}" tt --version v4 "${BIG[@]}" "${bf16[@]}" \
    --cuda-graphs off --active 3 "${DEV[@]}" --name v4_b32s512_eager_1gpu --out "$WORK/v4_b32s512_eager_1gpu"
  pack B_gpu0.tgz v4_graph_1gpu v4_b32s512_eager_1gpu
  phase v1_eager_1gpu 45 "${REC[@]}" tt --version v1 --batch-size 8 --seq-len 128 --active 3 "${DEV[@]}" \
    --name v1_eager_1gpu --out "$WORK/v1_eager_1gpu"
  pack B_gpu0.tgz v4_graph_1gpu v4_b32s512_eager_1gpu v1_eager_1gpu
}

gemm_ncu() {
  local d=$WORK/gemm_ncu
  mkdir -p "$d"
  "${REC[@]}" gemm --mode kineto --reps 3 "${GEMM_DEV[@]}" --out "$d/kineto" > "$d/kineto.log" 2>&1
  echo "gemm kineto: exit $?"; tail -n 3 "$d/kineto.log"
  if [ "$CHECK_CPU" = 1 ] || ! command -v ncu >/dev/null; then echo "ncu: skipped (CPU check or no ncu)"; return 0; fi
  ncu --query-metrics > "$d/ncu_query_metrics.txt" 2>&1 || ncu --query-metrics --chip gh100 > "$d/ncu_query_metrics.txt" 2>&1
  ncu --query-metrics --chip gh100 > "$d/ncu_query_metrics_gh100.txt" 2>&1
  local set
  for set in full small; do
    local flag=(); [ "$set" = small ] && flag=(--small)
    local metrics; metrics=$("${REC[@]}" pick-metrics "$d/ncu_query_metrics.txt" "${flag[@]}")
    [ -n "$metrics" ] || metrics=$("${REC[@]}" pick-metrics "$d/ncu_query_metrics_gh100.txt" "${flag[@]}")
    echo "metrics ($set): $metrics"
    local cmd=(ncu --profile-from-start off --clock-control none --target-processes all --metrics "$metrics"
               -f -o "$d/gemm_$set" "${REC[@]}" gemm --mode ncu --device cuda --out "$d/ncu_$set")
    printf '%q ' "${cmd[@]}" > "$d/ncu_command_$set.txt"; echo >> "$d/ncu_command_$set.txt"
    "${cmd[@]}" > "$d/ncu_$set.log" 2>&1
    local rc=$?
    echo "ncu ($set): exit $rc"; tail -n 5 "$d/ncu_$set.log"
    if [ -f "$d/gemm_$set.ncu-rep" ]; then
      ncu --import "$d/gemm_$set.ncu-rep" --csv --page raw --print-units base > "$d/gemm_${set}_raw.csv" 2> "$d/import_$set.err"
      echo "ncu --import $d/gemm_$set.ncu-rep --csv --page raw --print-units base" >> "$d/ncu_command_$set.txt"
      "${REC[@]}" ncu-json "$d/gemm_${set}_raw.csv" "$d/ncu_$set/gemm_ops.json" --out "$d/ncu_gemm_flops_$set.json" \
        && [ "$rc" = 0 ] && return 0
    fi
  done
}

gpu1() {
  export CUDA_VISIBLE_DEVICES=1
  [ "$CHECK_CPU" = 1 ] && export CUDA_VISIBLE_DEVICES=
  phase gemm_ncu 150 bash -c "$(declare -f gemm_ncu); $(declare -p WORK REC GEMM_DEV CHECK_CPU); gemm_ncu"
  pack B_gpu1.tgz gemm_ncu
  phase ours_v1_1gpu_api 50 "$PY" -m madengine_rocprof wrap --kernel-trace --hip-trace --stats \
    -d "$WORK/ours_v1_1gpu_api/trace" -- "$PY" scripts/tinytransformer/tt_harness.py --version v1 --batch-size 8 \
    --seq-len 128 --num-steps 4 --warmup-steps 1 "${HARNESS_DEV[@]}"
  pack B_gpu1.tgz gemm_ncu ours_v1_1gpu_api
}

gpu0 &
pid0=$!
gpu1 &
pid1=$!
wait "$pid0" "$pid1"
echo "=== done at t=$(( $(date +%s) - start ))s"
ls -la "$OUT"
du -sh "$WORK"/* 2>/dev/null
