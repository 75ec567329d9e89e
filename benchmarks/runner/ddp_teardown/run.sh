#!/usr/bin/env bash
# Counts hangs at the end of a 2-rank gloo DDP run with torch.profiler (CPU) running, as the embedded tracer runs it.
# usage: bash benchmarks/runner/ddp_teardown/run.sh [RUNS]   (each run: torchrun, 2 ranks; a hang = 25 s timeout)
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
py="${PYTHON:-$here/../../../.venv/bin/python}"
runs="${1:-12}"
for order in old new; do
  hangs=0
  for _ in $(seq 1 "$runs"); do
    PROF=1 timeout 25 "$py" -m torch.distributed.run --standalone --nnodes=1 --nproc_per_node=2 \
      "$here/race.py" "$order" >/dev/null 2>&1
    [ $? -eq 124 ] && hangs=$((hangs + 1))
  done
  echo "$order: $hangs hangs in $runs runs"
done
