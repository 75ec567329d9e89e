#!/usr/bin/env bash
# Round 9 of issue 10 (benchmarks/wrapper/README.md, section 0e), from the repository root on a CUDA machine:
#   CALL=1: the libcudart interposer checked against CUPTI's own API records; the wrapper path with it; eager v1 B8
#           S128 overhead with alternating windows (plain, kernel trace, --hip-trace by activity records / interposer)
#   CALL=2: the overhead again (ALT_VARIANTS, PAIRS)
#   CALL=4: the final stub (a real call with the stack arguments copied): check, per-call cost through the PLT, overhead
#   CALL=3: per-call cost through the PLT; overhead with and without the join callback (the first device call ran
#           this before the interposer also covered __cudaLaunchKernel: results/round9_call1)
# cupti-python (and the wrapper's dependencies) come from carried wheels: WHEELS=dir (default .whl). Results: $OUT/res.tgz
set -uo pipefail
source benchmarks/wrapper/device_setup.sh round9
case "${CALL:-1}" in
1)
  record_versions
  {
    lib=$(python3 -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'lib'))")
    for f in "$lib"/libtorch_cuda.so "$lib"/libc10_cuda.so; do
      echo "$(basename "$f") imports from libcudart: $(nm -D --undefined-only "$f" | grep -c ' _*cuda') cuda*/__cuda*;" \
           "launch entries: $(nm -D --undefined-only "$f" | grep -o '_*cudaLaunch[A-Za-z_]*' | sort -u | tr '\n' ' ')"
    done
  } >> "$RES/versions.txt" 2>&1
  tail -2 "$RES/versions.txt"
  timeout 150 python3 benchmarks/wrapper/interposer_check.py --steps 5 -- "${V1[@]}" > "$RES/interposer_check.json" 2> "$RES/interposer_check.log"
  echo "check exit $?"; tail -3 "$RES/interposer_check.log"
  wrapper_run interpose
  alternating plain,cupti,cupti_api_activity,cupti_api_interpose "${PAIRS:-35}" 380 ;;
4)
  timeout 150 python3 benchmarks/wrapper/interposer_check.py --steps 5 -- "${V1[@]}" > "$RES/interposer_check.json" 2> "$RES/interposer_check.log"
  echo "check exit $?"; tail -1 "$RES/interposer_check.log"
  timeout 100 python3 benchmarks/wrapper/api_record_cost.py --plt --calls 200000 --blocks 6 > "$RES/api_record_cost_plt.json" 2> "$RES/api_record_cost_plt.log"
  echo "cost exit $?"; tail -2 "$RES/api_record_cost_plt.log"
  alternating plain,cupti,cupti_api_activity,cupti_api_interpose "${PAIRS:-40}" 360 ;;
3)
  timeout 90 python3 benchmarks/wrapper/api_record_cost.py --plt --calls 200000 --blocks 4 > "$RES/api_record_cost_plt.json" 2> "$RES/api_record_cost_plt.log"
  echo "cost exit $?"; tail -3 "$RES/api_record_cost_plt.log"
  alternating plain,cupti,cupti_api_activity,cupti_api_interpose,cupti_api_interpose_nojoin 25 320 ;;
2)
  alternating "${ALT_VARIANTS:-plain,cupti,cupti_api_activity,cupti_api_interpose}" "${PAIRS:-40}" 540 ;;
esac
