#!/usr/bin/env bash
# The test command: sets up what the tests need (idempotent), then runs pytest.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/test_models.py -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --docker
exec .venv/bin/python -m pytest "$@"
