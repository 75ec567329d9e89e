#!/usr/bin/env bash
# Test workload for the SLURM runner: writes a partial result, then runs until it is stopped (timeout, Ctrl-C).
echo "partial on $(hostname)" > partial.txt
echo "started on $(hostname)"
trap 'echo "TERM on $(hostname)"; echo "flushed on TERM" > flushed.txt; exit 143' TERM
for _ in $(seq 1 3000); do sleep 0.2; done
