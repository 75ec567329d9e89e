#!/usr/bin/env bash
# MAD entry for the TinyTransformer workloads. Run from the model's directory (madengine does `cd run_directory`);
# every argument goes to the harness, e.g. `bash run.sh --version v4 --batch-size 8 --seq-len 128`.
# Writes workload_result.json in the working directory; exits non-zero on any failure.
#   --version vN          which implementation (default v1)
#   --nproc-per-node N    data-parallel on N processes via torchrun (DDP; NCCL on GPUs, gloo on CPUs)
# MAD_MULTI_NODE_RUNNER, when set (e.g. "torchrun --nproc_per_node 4"), is used as the launcher instead.
# PYTHON overrides the interpreter (default python3). The device is cuda when torch sees a GPU, else cpu.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python3}"

version=v1
nproc=1
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --version) [ $# -ge 2 ] || { echo "run.sh: --version needs a value (v1..v4)" >&2; exit 2; }
               version="$2"; shift 2 ;;
    --version=*) version="${1#*=}"; shift ;;
    --nproc-per-node) [ $# -ge 2 ] || { echo "run.sh: --nproc-per-node needs a number" >&2; exit 2; }
                      nproc="$2"; shift 2 ;;
    --nproc-per-node=*) nproc="${1#*=}"; shift ;;
    --json-out|--json-out=*) echo "run.sh: --json-out is fixed to ./workload_result.json" >&2; exit 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
case "$version" in v1|v2|v3|v4) ;; *) echo "run.sh: unknown --version '$version' (known: v1 v2 v3 v4)" >&2; exit 2 ;; esac
case "$nproc" in ''|*[!0-9]*|0) echo "run.sh: --nproc-per-node must be a positive integer, got '$nproc'" >&2; exit 2 ;; esac

harness=("$HERE/tt_harness.py" --version "$version" --json-out "$PWD/workload_result.json" "${args[@]+"${args[@]}"}")
if [ -n "${MAD_MULTI_NODE_RUNNER:-}" ]; then
  # shellcheck disable=SC2086  # the launcher is a command line by contract: split it into words
  exec $MAD_MULTI_NODE_RUNNER "${harness[@]}"
elif [ "$nproc" -gt 1 ]; then
  exec "$PY" -m torch.distributed.run --standalone --nproc_per_node "$nproc" "${harness[@]}"
else
  exec "$PY" "${harness[@]}"
fi
