#!/usr/bin/env bash
# Round 10 of issue 10 (benchmarks/wrapper/README.md, section 0f), from the repository root on a CUDA machine:
#   CALL=1: does a kernel's CUPTI latency timestamp (`queued`) fall inside its launching call, and would a join by
#           time find the call the interposer's callback join finds (latency_join_check.py); the wrapper path with
#           the interposer; one long --hip-trace window with mid-window buffer hand-overs, with and without latency
#           timestamps (long_window_check.py, under timeouts); eager v1 B8 S128 overhead with alternating windows
#           (ALT_VARIANTS, PAIRS)
#   CALL=2: the overhead only (ALT_VARIANTS, PAIRS)
#   CALL=3: which ways of using CUPTI's latency timestamps survive 30 pairs of windows (one process each, at once,
#           100 s each: a hang is a timeout); then the overhead of those that did, with plain and cupti
# Device calls 1 and 5-7 of the round ran earlier revisions of this script (results/round10_call*/NOTE.md); call 8
# ran this one before its helpers moved into device_setup.sh (record_versions now also lists cc and the TSC).
# cupti-python (and the wrapper's dependencies) come from carried wheels: WHEELS=dir (default .whl). Results: $OUT/res.tgz
set -uo pipefail
source benchmarks/wrapper/device_setup.sh round10
VARIANTS=${ALT_VARIANTS:-plain,cupti,cupti_kernel_only,cupti_api_activity,cupti_api_interpose}
long_window() {  # optional flag --latency
  name="long_window${1:+_latency}"
  timeout 90 python3 benchmarks/wrapper/long_window_check.py ${1:-} --steps 120 -- "${V1[@]}" > "$RES/$name.json" \
      2> "$RES/$name.log"
  echo "$name exit $?"; tail -1 "$RES/$name.log" | cut -c1-400
}
case "${CALL:-1}" in
1)
  record_versions
  timeout 150 python3 benchmarks/wrapper/latency_join_check.py --steps 5 -- "${V1[@]}" > "$RES/latency_join_check.json" \
      2> "$RES/latency_join_check.log"
  echo "check exit $?"; tail -1 "$RES/latency_join_check.log"
  wrapper_run interpose
  long_window; long_window --latency
  alternating "$VARIANTS" "${PAIRS:-30}" 330 ;;
2)
  alternating "$VARIANTS" "${PAIRS:-40}" 560 ;;
3)
  for v in ${HANG_VARIANTS:-cupti_latency cupti_latency_window cupti_latency_noforce}; do
    ( timeout 100 python3 benchmarks/wrapper/overhead_alternating.py --one "$v" --pairs 30 --block-steps 4 -- "${V1[@]}" \
        > "$RES/windows_$v.json" 2> "$RES/windows_$v.log"; echo "$v exit $?" >> "$RES/windows.txt" ) &
  done
  wait; cat "$RES/windows.txt"
  survived=$(awk '$3 == 0 {print $1}' "$RES/windows.txt" | paste -sd, -)
  alternating "plain,cupti${survived:+,$survived}" "${PAIRS:-30}" 400 ;;
esac
