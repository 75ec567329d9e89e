"""Issue 14, items 1, 2 and 5: SIGTERM and SIGHUP to `run` get Ctrl-C's clean-up; a second signal hurries the
clean-up but never loses what is known; the whole process tree of a step ends (setsid children and children that
ignore SIGTERM included), locally and in containers."""
from __future__ import annotations

import csv
import json
import signal
import time
from pathlib import Path

import pytest

from .reliability_helpers import alive, kill_quietly, log_has, start_run, wait_for


def _results(out: Path, name: str) -> tuple[dict, list[dict]]:
    manifest = json.loads((out / name / "run.json").read_text())
    with open(out / "perf.csv", newline="") as fh:
        return manifest, list(csv.DictReader(fh))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_stopping_signal_writes_the_results_and_stops_the_workload(models, tmp_path, sig):
    out = tmp_path / "out"
    proc = start_run(models, out, "slow_model", "--runner", "local")
    ws = out / "slow_model__none"
    wait_for(lambda: log_has(ws / "logs" / "run.log", "tick 2"))
    proc.send_signal(sig)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, output
    manifest, rows = _results(out, ws.name)
    expected = "Ctrl-C" if sig == signal.SIGINT else signal.Signals(sig).name
    assert f"workload interrupted ({expected})" in manifest["failures"]
    assert manifest["steps"][0]["interrupted"] and manifest["performance"]["value"] == 42.5
    assert (ws / "flushed.txt").exists()  # the workload got SIGTERM and its grace period
    assert [r["status"] for r in rows] == ["FAILURE"]
    assert "Traceback" not in output


def test_a_second_signal_hurries_the_clean_up_and_keeps_what_is_known(models, tmp_path):
    out = tmp_path / "out"
    proc = start_run(models, out, "slow_model", "--runner", "local", env={"FLUSH_S": "60"})
    log = out / "slow_model__none" / "logs" / "run.log"
    wait_for(lambda: log_has(log, "tick 2"))
    proc.send_signal(signal.SIGINT)
    wait_for(lambda: log_has(log, "got TERM"))
    stopped = time.monotonic()
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert time.monotonic() - stopped < 10, output  # hurried: no full 15 s grace, no 60 s flush
    assert proc.returncode == 130, output
    manifest, rows = _results(out, "slow_model__none")
    assert [s["name"] for s in manifest["steps"]] == ["run"] and manifest["steps"][0]["interrupted"]
    assert "interrupted before the workload started" not in manifest["failures"]
    assert manifest["performance"] == {"value": 42.5, "metric": "tokens_per_second"}
    assert rows[0]["performance"] == "42.5"


def test_processes_a_step_leaves_behind_end_with_it(models, tmp_path):
    out = tmp_path / "out"
    ws = out / "leaver_model__none"
    pids = (ws / "setsid.pid", ws / "ignores_term.pid")
    try:
        proc = start_run(models, out, "leaver_model", "--runner", "local")
        output, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, output
        for f in pids:
            assert not alive(int(f.read_text())), f"{f.name}: still running after the step"
    finally:
        kill_quietly(*pids)


def test_sigterm_stops_the_whole_tree_of_a_running_step(models, tmp_path):
    out = tmp_path / "out"
    ws = out / "leaver_slow_model__none"
    pids = (ws / "setsid.pid", ws / "ignores_term.pid")
    try:
        proc = start_run(models, out, "leaver_slow_model", "--runner", "local")
        wait_for(lambda: log_has(ws / "logs" / "run.log", "tick 2") and all(f.exists() for f in pids))
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
        assert proc.returncode == 143, output
        for f in pids:
            assert not alive(int(f.read_text())), f"{f.name}: still running after SIGTERM to run"
    finally:
        kill_quietly(*pids)


@pytest.mark.docker
@pytest.mark.slow
def test_docker_sigterm_keeps_results_and_removes_the_container(models, tmp_path, docker_ready):
    out = tmp_path / "out"
    proc = start_run(models, out, "slow_model", "--runner", "docker")
    ws = out / "slow_model__none"
    wait_for(lambda: log_has(ws / "logs" / "run.log", "tick 2"), 600)
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 143, output
    manifest, rows = _results(out, ws.name)
    assert "workload interrupted (SIGTERM)" in manifest["failures"] and (ws / "flushed.txt").exists()
    assert not docker_ready.containers.list(all=True, filters={"label": f"org.madengine-rocprof.run={ws}"})


@pytest.mark.docker
@pytest.mark.slow
def test_docker_step_leaves_no_process_behind(models, tmp_path, docker_ready):
    """In the container, between steps: what the pre-script left (setsid, SIGTERM ignored) is gone."""
    hooks = models.parent / "scripts" / "hooks"
    hooks.mkdir()
    (hooks / "leave.sh").write_text((models.parent / "scripts" / "leaver" / "run.sh").read_text())  # in model_scripts
    probe = models.parent / "scripts" / "ok" / "run.sh"
    probe.write_text('for f in setsid.pid ignores_term.pid; do\n'
                     '  if [ -d "/proc/$(cat model_scripts/$f)" ]; then echo "$f alive"; else echo "$f gone"; fi\n'
                     'done\necho "performance: 7 things"\n')
    out = tmp_path / "out"
    proc = start_run(models, out, "ok_model", "--runner", "docker", "--additional-context",
                     json.dumps({"pre_scripts": [{"path": "scripts/hooks/leave.sh"}]}))
    output, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, output
    log = (out / "ok_model__none" / "logs" / "run.log").read_text()
    assert "setsid.pid gone" in log and "ignores_term.pid gone" in log, log
