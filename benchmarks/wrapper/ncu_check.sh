#!/usr/bin/env bash
# Real-ncu check of the counter conversion, through `madengine-rocprof run` (local runner): compute_bound and
# memory_bound on TinyTransformer v4, ncu limited to 50 launches; prints the converted metric names per dispatch.
#   device run, kind nvidia-h100-x1, carry [".whl"], command: bash benchmarks/wrapper/ncu_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/ncu_check_out}; RUNS=/tmp/runs_ncu; PY=python3
mkdir -p "$OUT" "$RUNS"
exec > >(tee "$OUT/ncu_check.log") 2>&1
if ! "$PY" -c "import pydantic" 2>/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
for cfg in compute_bound memory_bound; do
  "$PY" -m madengine_rocprof run --runner local --quiet --output-dir "$RUNS/$cfg" --timeout 150 \
    --additional-context-file "profiling-configs/rocprofv3_$cfg.json" \
    --additional-context '{"docker_env_vars": {"MADENGINE_ROCPROF_NCU_LAUNCH_COUNT": "50"}}' \
    --tags tiny_llama_v4:num-steps=2:warmup-steps=1
  echo "$cfg: exit $?"
done
"$PY" - "$RUNS" <<'PY'
import csv, collections, json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).rglob("*_counter_collection.csv")):
    rows = list(csv.DictReader(open(f, newline="")))
    per = collections.Counter(r["Dispatch_Id"] for r in rows)
    names = sorted({r["Counter_Name"] for r in rows})
    m = json.loads((f.parent.parent / "manifest.json").read_text())
    print(f"{f.relative_to(sys.argv[1])}: {len(rows)} rows, {len(per)} dispatches, rows per dispatch {sorted(set(per.values()))}")
    print("  counters:", ", ".join(names))
    print("  outcome:", m["outcome"], "| messages:", [x for x in m["messages"] if "roll-up" in x or "metric" in x][:5])
PY
"$PY" -m madengine_rocprof report "$RUNS/compute_bound" "$RUNS/memory_bound" > "$OUT/report.md"; echo "report: exit $?"
sed -n 1,12p "$OUT/report.md"
