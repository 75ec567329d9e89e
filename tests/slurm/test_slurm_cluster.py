"""`madengine-rocprof run --runner slurm` on a real SLURM cluster of containers (scripts/setup_slurm.sh): a 2-node
TinyTransformer run under the shipped multi-node config, a job whose rank fails, our timeout, Ctrl-C, bad settings."""
from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slurm, pytest.mark.docker, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
MULTI_NODE = str(REPO / "profiling-configs" / "rocprofv3_multi_node.json")


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _kernel_traces(run_dir: Path, host: str) -> list[Path]:
    """Kernel traces that node wrote (its own OUT, files under <hostname>/), each with at least one row."""
    files = sorted((run_dir / "nodes" / host / "profiler" / host).glob("*_kernel_trace.csv"))
    return [f for f in files if len(f.read_text().splitlines()) > 1]


def test_two_nodes_profiled_under_the_shipped_multi_node_config(slurm_run, slurm_record, shared_dir, slurm_cluster,
                                                                login_env):
    out = shared_dir / "runs"
    result = slurm_run("--tags", "tiny_llama_v1", "--additional-context-file", MULTI_NODE, "--output-dir", str(out))
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "partition gpu has no GPUs" in result.stdout  # the shipped file asks for 8 GPUs per node: told, not hidden
    assert "RUNNING" in result.stdout and "COMPLETED" in result.stdout  # the job's states were shown

    run_dir = out / "tiny_llama_v1__rocprofv3_lightweight+gpu_info_power_profiler"
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "SUCCESS" and info["runner"] == "slurm", info["failures"]
    job_id = info["slurm"]["job_id"]
    record = slurm_record(job_id)
    assert record["state"] == "COMPLETED" and record["exit_code"] == "0:0", record

    hosts = slurm_cluster["SLURM_NODES"].split(",")
    assert sorted(n["host"] for n in info["nodes"]) == sorted(hosts)
    for host in hosts:
        assert _kernel_traces(run_dir, host), f"{host} wrote no kernel trace"
        manifest = json.loads((run_dir / "nodes" / host / "profiler" / "manifest.json").read_text())
        assert manifest["outcome"] == "ok" and manifest["profiler"]["name"] == "embedded"
    # ranks 0 and 1, one per node, each in its own files
    ranks = sorted(p.name.split("_")[0] for host in hosts for p in _kernel_traces(run_dir, host))
    assert ranks == ["rank0", "rank1"]

    [row] = _rows(out / "perf.csv")
    assert row["status"] == "SUCCESS" and row["deployment_type"] == "slurm" and row["nnodes"] == "2"
    assert float(row["performance"]) > 0 and row["metric"] == "tokens_per_second"

    report = subprocess.run([sys.executable, "-m", "madengine_rocprof", "report", str(run_dir), "--json",
                             str(shared_dir / "report.json")], cwd=REPO, env=login_env, capture_output=True, text=True,
                            timeout=300)
    assert report.returncode == 0, report.stderr
    section = json.loads((shared_dir / "report.json").read_text())["runs"][0]["multi_node"]
    assert sorted(n["host"] for n in section["nodes"]) == sorted(hosts)
    assert [r["label"] for r in section["ranks"]] == ["rank 0", "rank 1"]
    assert all(r["step_time_ms"] and r["communication_ns"] > 0 for r in section["ranks"])  # DDP all-reduces over gloo
    markdown = report.stdout
    per_node = markdown.split("### Across ranks and nodes", 1)[1].split("- Per rank", 1)[0]
    assert all(f"| {host} |" in per_node for host in hosts), per_node


def test_a_failing_rank_fails_the_run_and_keeps_the_other_ranks_outputs(slurm_run, slurm_record, shared_dir,
                                                                         test_models):
    out = shared_dir / "runs"
    context = '{"slurm": {"nodes": 2, "time": "00:10:00"}, "tools": [{"name": "rocprofv3_lightweight"}]}'
    result = slurm_run("--tags", "rank_fail_model", "--models", str(test_models), "--additional-context", context,
                       "--output-dir", str(out))
    assert result.returncode == 1, result.stdout[-4000:]
    run_dir = out / "rank_fail_model__rocprofv3_lightweight"
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "FAILURE"
    assert slurm_record(info["slurm"]["job_id"])["state"] == "FAILED"
    codes = {n["host"]: n["exit_code"] for n in info["nodes"]}
    assert codes["node2"] == 1, codes  # node1's task may be ended by srun (--kill-on-bad-exit) before it records one
    assert "node2: workload exit code 1" in info["failures"]
    assert _kernel_traces(run_dir, "node1"), "the healthy rank's trace was not kept"
    assert "performance: 4.0" in (run_dir / "nodes" / "node1" / "logs" / "run.log").read_text()
    assert "failing on purpose" in (run_dir / "nodes" / "node2" / "logs" / "run.log").read_text()
    assert _rows(out / "perf.csv")[0]["status"] == "FAILURE"


def test_our_timeout_cancels_the_job_and_keeps_outputs(slurm_run, slurm_record, shared_dir, test_models):
    out = shared_dir / "runs"
    result = slurm_run("--tags", "sleepy_model", "--models", str(test_models), "--additional-context",
                       '{"slurm": {"nodes": 2}}', "--output-dir", str(out), "--timeout", "8")
    assert result.returncode == 1, result.stdout[-4000:]
    assert "scancel" in result.stdout
    run_dir = out / "sleepy_model__none"
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "FAILURE" and info["slurm"]["cancelled"] == "timeout"
    assert any("timed out after 8s" in f for f in info["failures"]), info["failures"]
    assert slurm_record(info["slurm"]["job_id"])["state"] == "CANCELLED"
    for host in ("node1", "node2"):
        node = run_dir / "nodes" / host
        assert f"started on {host}" in (node / "logs" / "run.log").read_text()
        assert (node / "partial.txt").read_text() == f"partial on {host}\n"
        assert (node / "flushed.txt").is_file(), "the workload got no SIGTERM before being killed"


def test_ctrl_c_cancels_the_job_and_writes_the_results(login_env, slurm_record, shared_dir, test_models):
    out = shared_dir / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "madengine_rocprof", "run", "--runner", "slurm", "--tags",
                             "sleepy_model", "--models", str(test_models), "--additional-context",
                             '{"slurm": {"nodes": 2}}', "--output-dir", str(out)],
                            cwd=REPO, env=login_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    run_dir = out / "sleepy_model__none"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not all(
            (run_dir / "nodes" / h / "partial.txt").is_file() for h in ("node1", "node2")):
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    stdout, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, stdout[-4000:]
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "FAILURE" and info["slurm"]["cancelled"] == "interrupted"
    assert slurm_record(info["slurm"]["job_id"])["state"] == "CANCELLED"
    assert all((run_dir / "nodes" / h / "flushed.txt").is_file() for h in ("node1", "node2"))


@pytest.mark.parametrize("context, where, words", [
    ('{"slurm": {"nodes": 2, "partition": "nosuch"}}', "slurm.partition", ["'nosuch' does not exist", "gpu"]),
    ('{"slurm": {"nodes": 3}}', "slurm.nodes", ["3 nodes requested", "has 2"]),
    ('{"slurm": {"nodes": 0}}', "slurm.nodes", ["greater than or equal to 1"]),
    ('{"slurm": {"nodes": 2, "time": "soon"}}', "slurm.time", ["not a SLURM time limit"]),
])
def test_bad_slurm_settings_are_refused_before_submitting(slurm_run, shared_dir, context, where, words):
    out = shared_dir / "runs"
    result = slurm_run("--tags", "tiny_llama_v1", "--additional-context", context, "--output-dir", str(out))
    assert result.returncode == 2, result.stdout + result.stderr
    assert where in result.stderr and all(w in result.stderr for w in words), result.stderr
    assert not out.exists()  # nothing written, nothing submitted
