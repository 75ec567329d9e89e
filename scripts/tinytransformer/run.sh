#!/usr/bin/env bash
# MAD entry for the TinyTransformer workloads. Run from the model's directory (madengine does `cd run_directory`);
# every argument goes to the harness, e.g. `bash run.sh --version v4 --batch-size 8 --seq-len 128`.
# Writes workload_result.json in the working directory; exits non-zero on any failure.
#   --version vN          which implementation (default v1)
#   --nproc-per-node N    data-parallel on N processes via torchrun (DDP; NCCL on GPUs, gloo on CPUs)
# MAD_MULTI_NODE_RUNNER, when set (e.g. "torchrun --nproc_per_node 4"), is used as the launcher instead.
# PYTHON overrides the interpreter (default: python3 when it has torch, else this checkout's .venv from
# scripts/setup.sh). The device is cuda when torch sees a GPU, else cpu.
# Run from the checkout's root (as the README does), the result goes to runs/tinytransformer/ instead of the root.
set -euo pipefail
HERE="$(cd -P "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
has_torch() { "$1" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' 2>/dev/null; }
if [ -n "${PYTHON:-}" ]; then
  PY="$PYTHON"
elif has_torch python3; then
  PY=python3
elif [ -x "$HERE/../../.venv/bin/python" ] && has_torch "$HERE/../../.venv/bin/python"; then
  PY="$HERE/../../.venv/bin/python"   # a checkout set up by scripts/setup.sh, venv not activated
else
  echo "run.sh: no Python with torch: python3 has none and there is no .venv here (fix: bash scripts/setup.sh, activate a venv with torch, or set PYTHON)" >&2
  exit 2
fi
result_dir="$PWD"
if [ -d "$PWD/.git" ] || [ -f "$PWD/.git" ]; then
  if [ "$PWD/scripts/tinytransformer/run.sh" -ef "$HERE/run.sh" ]; then
    result_dir="$PWD/runs/tinytransformer"   # the checkout's root: keep the tree clean (runs/ is ignored)
    mkdir -p "$result_dir"
  fi
fi

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
    --json-out|--json-out=*) echo "run.sh: --json-out is fixed to ./workload_result.json (runs/tinytransformer/ from the checkout's root)" >&2; exit 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
case "$version" in v1|v2|v3|v4) ;; *) echo "run.sh: unknown --version '$version' (known: v1 v2 v3 v4)" >&2; exit 2 ;; esac
case "$nproc" in ''|*[!0-9]*|0) echo "run.sh: --nproc-per-node must be a positive integer, got '$nproc'" >&2; exit 2 ;; esac

harness=("$HERE/tt_harness.py" --version "$version" --json-out "$result_dir/workload_result.json" "${args[@]+"${args[@]}"}")
if [ -n "${MAD_MULTI_NODE_RUNNER:-}" ]; then
  # shellcheck disable=SC2086  # the launcher is a command line by contract: split it into words
  exec $MAD_MULTI_NODE_RUNNER "${harness[@]}"
elif [ "$nproc" -gt 1 ]; then
  exec "$PY" -m torch.distributed.run --standalone --nproc_per_node "$nproc" "${harness[@]}"
else
  exec "$PY" "${harness[@]}"
fi
