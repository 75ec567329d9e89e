# Sourced by the round scripts on the GPU machine: results folder and archive, carried wheels, environment.
# RES: where results go (default /tmp/res); OUT: where res.tgz is left; WHEELS: the carried wheels (default .whl).
RES=${RES:-/tmp/res}; OUT=${OUT:-/tmp/$1}; mkdir -p "$RES" "$OUT"
trap 'tar czf "$OUT/res.tgz" -C "$RES" .' EXIT
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "${WHEELS:-.whl}"/*.whl > "$RES/pip.log" 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 MADENGINE_ROCPROF_CACHE=${MADENGINE_ROCPROF_CACHE:-/tmp/mrc}
V1=(--version v1 --batch-size 8 --seq-len 128 --cuda-graphs off)
