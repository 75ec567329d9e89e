#!/usr/bin/env bash
# Drop-in `cmd` for madengine's tools.json:
#   bash ../scripts/common/tools/rocprof_wrapper.sh [rocprofv3 options] -- APP ARGS
# Runs the standard-library wrapper (madengine_rocprof.wrapper), found in this order:
#   $MADENGINE_ROCPROF_WRAPPER (a .pyz), madengine_rocprof_wrapper.pyz next to this script (what export-tools and
#   `install --madengine` place), the source checkout this script lives in, an installed madengine_rocprof.
# The exit status is the application's (127: no python3 / no wrapper / no profiler, 2: bad options).
set -u
here="$(CDPATH='' cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)"  # no CDPATH: cd would print the folder
py="${MADENGINE_ROCPROF_PYTHON:-$(command -v python3 || command -v python || true)}"
if [ -z "$py" ]; then
    echo "rocprof_wrapper.sh: error: python3 not found on PATH (set MADENGINE_ROCPROF_PYTHON)" >&2
    exit 127
fi
resolved="$(command -v -- "$py" 2>/dev/null || true)"
if [ -z "$resolved" ] || [ -d "$resolved" ] || [ ! -x "$resolved" ]; then
    echo "rocprof_wrapper.sh: error: MADENGINE_ROCPROF_PYTHON: '$py' is not an executable program" \
         "(fix: set it to the path of a python3, or unset it to use python3 from PATH)" >&2
    exit 127
fi
export MADENGINE_ROCPROF_WRAPPER_PROG="${MADENGINE_ROCPROF_WRAPPER_PROG:-bash ${BASH_SOURCE[0]}}"
if [ -n "${MADENGINE_ROCPROF_WRAPPER:-}" ]; then
    if [ ! -f "$MADENGINE_ROCPROF_WRAPPER" ]; then
        echo "rocprof_wrapper.sh: error: MADENGINE_ROCPROF_WRAPPER: '$MADENGINE_ROCPROF_WRAPPER' is not a file" \
             "(fix: point it at a madengine_rocprof_wrapper.pyz, or unset it)" >&2
        exit 127
    fi
    exec "$py" "$MADENGINE_ROCPROF_WRAPPER" "$@"
fi
if [ -f "$here/madengine_rocprof_wrapper.pyz" ]; then
    exec "$py" "$here/madengine_rocprof_wrapper.pyz" "$@"
fi
if [ -f "$here/../madengine_rocprof/wrapper/cli.py" ]; then
    # Source checkout: put it on sys.path for the wrapper only (the app's environment stays untouched).
    exec "$py" -c 'import sys; sys.path.insert(0, sys.argv.pop(1)); from madengine_rocprof.wrapper.cli import main; raise SystemExit(main())' \
        "$here/.." "$@"
fi
if (cd / && "$py" -c 'import madengine_rocprof.wrapper') 2>/dev/null; then
    exec "$py" -m madengine_rocprof.wrapper "$@"
fi
echo "rocprof_wrapper.sh: error: the wrapper is missing: expected $here/madengine_rocprof_wrapper.pyz" \
     "(run \`madengine-rocprof export-tools\` or \`madengine-rocprof install --madengine\`)" >&2
exit 127
