#!/usr/bin/env bash
# The lint and type gates (scripts/test.sh runs them before pytest, so CI enforces them).
# ruff checks every Python file; mypy checks what [tool.mypy] `files` lists in pyproject.toml (the package, the
# TinyTransformer scripts, the benchmarks and the tests). Both versions are pinned in requirements-dev.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
if [ ! -x "$py" ]; then
  echo "lint.sh: no .venv here; run 'bash scripts/setup.sh' first" >&2
  exit 2
fi
"$py" -m ruff check .
"$py" -m mypy
