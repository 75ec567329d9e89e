#!/usr/bin/env bash
# One command from a fresh checkout to a profiled run and its report:
#   1. sets up .venv (pinned deps, CPU torch wheel, this package)            -- scripts/setup.sh
#   2. runs TinyTransformer v1 under the lightweight profile                  -- madengine-rocprof run
#      (GPU profiler when one is installed, else the embedded tracer; Docker when an engine answers, else locally;
#       on a machine with no GPU the workload picks its tiny CPU config)
#   3. prints the hotspot report and writes OUTPUT_DIR.html/.json beside it -- madengine-rocprof report
#      (beside, not inside: `report` refuses to write into a folder it reads)
# Usage: bash scripts/quickstart.sh [OUTPUT_DIR]   (default runs/quickstart)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-runs/quickstart}

bash scripts/setup.sh
.venv/bin/madengine-rocprof run --tags tiny_llama_v1 \
  --additional-context-file profiling-configs/rocprofv3_lightweight.json --output-dir "$out"
out=${out%/}
.venv/bin/madengine-rocprof report "$out" --html "$out.html" --json "$out.json"
echo
echo "Done: perf.csv and run folders are in $out/, the report in $out.html and $out.json"
