#!/usr/bin/env bash
# One-time (idempotent) setup of a development / CI machine.
#   bash scripts/setup.sh            # .venv with pinned deps + this package (editable)
#   bash scripts/setup.sh --docker   # ... plus a running Docker engine and the CPU workload image
set -euo pipefail
cd "$(dirname "$0")/.."

want_docker=0
for arg in "$@"; do
  case "$arg" in
    --docker) want_docker=1 ;;
    *) echo "setup.sh: unknown option '$arg' (known: --docker)" >&2; exit 2 ;;
  esac
done

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
stamp=.venv/.requirements.sha
want=$(cat requirements.txt requirements-dev.txt setup.cfg | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "[setup] installing pinned requirements (torch CPU wheel, triton, pydantic, ...)"
  # pip's output goes to a log (this machine's pip config adds noisy index warnings); shown when pip fails
  if ! { .venv/bin/python -m pip install -q -r requirements-dev.txt && .venv/bin/python -m pip install -q -e . --no-deps; } \
      > .venv/pip-install.log 2>&1; then
    tail -40 .venv/pip-install.log >&2
    echo "[setup] pip install failed; full log: .venv/pip-install.log" >&2
    exit 1
  fi
  echo "$want" > "$stamp"
else
  echo "[setup] .venv is up to date"
fi

if [ "$want_docker" = 1 ]; then
  bash scripts/setup_docker.sh
fi
