#!/usr/bin/env bash
# Round 8 of issue 10 (benchmarks/wrapper/README.md, section 0d), from the repository root on a CUDA machine:
#   CALL=1: the native recorder checked against CUPTI's own API records; per-call cost in a tight loop; eager v1 B8 S128
#           overhead with alternating windows (plain, kernel trace, native callbacks, activity records)
#   CALL=2: where a callback's cost goes (diagnostic variants: a C callback that does nothing, no launches, launches only)
#   CALL=3: the wrapper path with the native recorder; the cost of interposing libcudart (interpose_probe.c)
# cupti-python (and the wrapper's dependencies) come from carried wheels: WHEELS=dir (default .whl). Results: $OUT/res.tgz
set -uo pipefail
source benchmarks/wrapper/device_setup.sh round8
case "${CALL:-1}" in
1)
  record_versions
  timeout 150 python3 benchmarks/wrapper/api_recorder_check.py --steps 5 -- "${V1[@]}" > "$RES/api_recorder_check.json" 2> "$RES/api_recorder_check.log"
  echo "check exit $?"
  timeout 120 python3 benchmarks/wrapper/api_record_cost.py --calls 200000 --blocks 6 > "$RES/api_record_cost.json" 2> "$RES/api_record_cost.log"
  echo "cost exit $?"
  alternating plain,cupti,cupti_api,cupti_api_activity 40 420 ;;
2)
  timeout 100 python3 benchmarks/wrapper/api_recorder_check.py --steps 5 -- "${V1[@]}" > "$RES/api_recorder_check.json" 2> "$RES/api_recorder_check.log"
  alternating plain,cupti,cupti_api,cupti_api_null_callback,cupti_api_no_launch,cupti_api_launch_only 30 420 ;;
3)
  wrapper_run callbacks
  alternating plain,cupti,cupti_api_activity,cupti_interpose_probe 40 420 ;;
esac
