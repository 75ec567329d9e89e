#!/usr/bin/env bash
# The test command: sets up what the tests need (idempotent), runs the lint and type gates, then pytest.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/wrapper -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --docker
# In CI a missing Docker engine fails the docker tests instead of skipping them.
if [ "${CI:-}" = "true" ]; then export MADENGINE_ROCPROF_REQUIRE_DOCKER=1; fi
bash scripts/lint.sh
exec .venv/bin/python -m pytest "$@"
