#!/usr/bin/env bash
# Test workload for the SLURM runner: torchrun on every node; global rank 1 fails on purpose (see rank_fail.py).
set -euo pipefail
exec ${MAD_MULTI_NODE_RUNNER:?set by the SLURM runner} "$(dirname "$0")/rank_fail.py" "$@"
