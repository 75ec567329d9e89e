"""Reliability test helpers: a throwaway model repository whose workloads misbehave on purpose, process checks,
and a way to start `run` as a separate process (signals go to it, not to pytest)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

WORKLOADS = {
    # flushes a file on SIGTERM, taking `FLUSH_S` seconds (a profiler writing its trace)
    "slow": """\
        trap 'echo "got TERM"; sleep "${FLUSH_S:-0}"; echo "flushed on TERM" > flushed.txt; exit 143' TERM
        echo "performance: 42.5 tokens_per_second"
        echo '{"schema_version": 1, "status": "ok"}' > workload_result.json
        echo start
        for i in $(seq 1 600); do echo "tick $i"; sleep 0.1; done
        """,
    # leaves a setsid child and a child that ignores SIGTERM and holds no pipe, records their pids, ends at once
    "leaver": """\
        setsid sleep 300 </dev/null >/dev/null 2>&1 &
        echo $! > setsid.pid
        ( trap '' TERM; exec sleep 300 ) </dev/null >/dev/null 2>&1 &
        echo $! > ignores_term.pid
        echo "performance: 1 things"
        """,
    # the same while running: stopped by a signal, its tree must end too
    "leaver_slow": """\
        setsid sleep 300 </dev/null >/dev/null 2>&1 &
        echo $! > setsid.pid
        ( trap '' TERM; exec sleep 300 ) </dev/null >/dev/null 2>&1 &
        echo $! > ignores_term.pid
        echo started
        for i in $(seq 1 600); do echo "tick $i"; sleep 0.1; done
        """,
    "ok": """\
        echo "performance: 7 things"
        """,
    # 4 MB of output, then success
    "chatty": """\
        head -c 4000000 /dev/zero | tr '\\0' 'x' | fold -w 1000
        echo "performance: 3 things"
        """,
}


def write_repo(root: Path) -> Path:
    (root / "docker").mkdir(parents=True, exist_ok=True)
    (root / "docker" / "reltest.debian.cpu.Dockerfile").write_text(
        "# CONTEXT {'gpu_vendor': 'CPU', 'guest_os': 'DEBIAN'}\nARG BASE_DOCKER=madengine-rocprof/cpu-base:latest\n"
        "FROM $BASE_DOCKER\n")
    cards = []
    for name, body in WORKLOADS.items():
        folder = root / "scripts" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "run.sh").write_text(textwrap.dedent(body))
        cards.append({"name": f"{name}_model", "dockerfile": "docker/reltest", "scripts": f"scripts/{name}/run.sh",
                      "n_gpus": "1", "tags": ["reltest"], "args": ""})
    models = root / "models.json"
    models.write_text(json.dumps(cards, indent=2))
    return models


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def kill_quietly(*pid_files: Path) -> None:
    for f in pid_files:
        if f.exists() and f.read_text().strip().isdigit() and alive(int(f.read_text())):
            os.kill(int(f.read_text()), 9)


def start_run(models: Path, out: Path, tag: str, *extra: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "madengine_rocprof", "run", "--tags", tag, "--models", str(models),
                             "--output-dir", str(out), *extra],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, **(env or {})})


def wait_for(predicate, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def log_has(path: Path, text: str) -> bool:
    return path.exists() and text in path.read_text(errors="replace")


