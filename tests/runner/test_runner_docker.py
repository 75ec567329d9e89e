"""Real containers: the CPU image built by scripts/setup_docker.sh, TinyTransformer v1 under the lightweight profile,
and every failure mode with nothing lost and no container left behind. CI runs these (MADENGINE_ROCPROF_REQUIRE_DOCKER=1
turns a missing daemon into a failure)."""
import csv
import json
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from madengine_rocprof.cli import main as cli_main

pytestmark = pytest.mark.docker
LABEL = "org.madengine-rocprof.run"


def containers_of(client, ws: Path):
    return client.containers.list(all=True, filters={"label": f"{LABEL}={ws}"})


def perf_rows(out: Path):
    with open(out / "perf.csv", newline="") as f:
        return list(csv.DictReader(f))


def run_json(ws: Path):
    return json.loads((ws / "run.json").read_text())


def run_cli(*argv):
    return cli_main(["run", "--runner", "docker", "--quiet", *argv])


@pytest.mark.slow
def test_tinytransformer_v1_lightweight_in_a_container(docker_client, cpu_base_image, repo, tmp_path):
    out = tmp_path / "out"
    code = run_cli("--tags", "tiny_llama_v1:num-steps=3", "--output-dir", str(out),
                   "--additional-context-file", str(repo / "profiling-configs" / "rocprofv3_lightweight.json"),
                   "--models", str(repo / "models.json"))
    ws = out / "tiny_llama_v1__rocprofv3_lightweight"
    manifest = run_json(ws)
    assert code == 0, manifest["failures"]
    assert manifest["runner"] == "docker" and manifest["status"] == "SUCCESS"
    assert manifest["image"]["tag"].startswith("madengine-rocprof/tinytransformer.debian.cpu:")
    assert manifest["image"]["dockerfile"] == "docker/tinytransformer.debian.cpu.Dockerfile"
    assert not containers_of(docker_client, ws)

    wrapper = json.loads((ws / "profiler" / "manifest.json").read_text())
    assert wrapper["outcome"] == "ok" and wrapper["profiler"]["name"] == "embedded"
    assert wrapper["output_dir"] == "/myworkspace/profiler"
    (trace,) = list((ws / "profiler").rglob("*_kernel_trace.csv"))
    (stats,) = list((ws / "profiler").rglob("*_kernel_stats.csv"))
    # Kernel (operator) stats agree with an independent aggregation of the trace.
    calls: defaultdict[str, int] = defaultdict(int)
    total: defaultdict[str, int] = defaultdict(int)
    with open(trace, newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        calls[r["Kernel_Name"]] += 1
        total[r["Kernel_Name"]] += int(r["End_Timestamp"]) - int(r["Start_Timestamp"])
    assert wrapper["dispatch_count"] == len(rows) > 0
    with open(stats, newline="") as f:
        stat_rows = {r["Name"]: r for r in csv.DictReader(f)}
    assert set(stat_rows) == set(calls)
    for name, r in stat_rows.items():
        assert int(r["Calls"]) == calls[name], name
        assert int(r["TotalDurationNs"]) == total[name], name
    assert "aten::mm" in stat_rows or "aten::addmm" in stat_rows  # the linear layers ran and were seen

    result = json.loads((ws / "workload_result.json").read_text())
    assert result["status"] == "ok" and result["device"]["type"] == "cpu" and result["settings"]["num_steps"] == 3
    (row,) = perf_rows(out)
    assert row["status"] == "SUCCESS" and row["metric"] == "tokens_per_second" and row["gpu_architecture"] == "CPU"
    assert float(row["performance"]) == pytest.approx(result["metrics"]["tokens_per_second"], rel=1e-3)
    assert row["docker_image"] == manifest["image"]["tag"] and row["docker_sha"] == manifest["image"]["id"]
    assert "performance:" in (ws / "logs" / "run.log").read_text()


def test_container_env_and_mounts(docker_client, cpu_base_image, model_repo, tmp_path):
    out = tmp_path / "out"
    ctx = {"env_vars": {"FROM_ENV_VARS": "e1"}, "docker_env_vars": {"FROM_DOCKER_ENV_VARS": "d1"}}
    assert run_cli("--tags", "probe_model", "--models", str(model_repo), "--output-dir", str(out),
                   "--additional-context", json.dumps(ctx)) == 0
    ws = out / "probe_model__none"
    log = (ws / "logs" / "run.log").read_text()
    assert "madengine_rocprof read-only" in log and "counters read-only" in log and "workspace writable" in log
    assert "env FROM_ENV_VARS=e1 FROM_DOCKER_ENV_VARS=d1" in log
    assert (ws / "ws_probe").exists()
    assert not containers_of(docker_client, ws)


def test_failing_workload_in_a_container_loses_nothing(docker_client, cpu_base_image, model_repo, tmp_path):
    out = tmp_path / "out"
    ctx = {"post_scripts": [{"path": "scripts/hooks/post.sh"}], "tools": [{"name": "gpu_info_power_profiler"}]}
    assert run_cli("--tags", "fail_model", "--models", str(model_repo), "--output-dir", str(out),
                   "--additional-context", json.dumps(ctx)) == 1
    ws = out / "fail_model__gpu_info_power_profiler"
    manifest = run_json(ws)
    assert "workload exit code 3" in manifest["failures"]
    assert "about to fail" in (ws / "logs" / "run.log").read_text()
    assert (ws / "partial.txt").exists() and (ws / "post_saw.txt").exists()
    (sampler,) = manifest["samplers"]
    assert sampler["exit_code"] == 3 and (ws / "samplers" / "gpu_info_power_profiler_output.csv").exists()
    assert perf_rows(out)[0]["status"] == "FAILURE"
    assert not containers_of(docker_client, ws)


def test_timeout_in_a_container(docker_client, cpu_base_image, model_repo, tmp_path):
    out = tmp_path / "out"
    started = time.monotonic()
    assert run_cli("--tags", "slow_model", "--models", str(model_repo), "--output-dir", str(out), "--timeout", "2") == 1
    assert time.monotonic() - started < 60
    ws = out / "slow_model__none"
    manifest = run_json(ws)
    assert manifest["steps"][0]["timed_out"] and manifest["failures"] == ["workload timed out after 2s"]
    assert (ws / "flushed.txt").read_text() == "flushed on TERM\n"
    assert perf_rows(out)[0]["status"] == "FAILURE"
    assert not containers_of(docker_client, ws)


def test_ctrl_c_removes_the_container_and_keeps_outputs(docker_client, cpu_base_image, model_repo, tmp_path, repo):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "madengine_rocprof", "run", "--runner", "docker", "--tags",
                             "slow_model", "--models", str(model_repo), "--output-dir", str(out)],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ws = out / "slow_model__none"
    log = ws / "logs" / "run.log"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (log.exists() and "tick 2" in log.read_text()):
        time.sleep(0.1)
    assert containers_of(docker_client, ws)  # it is running now
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output
    assert "workload interrupted (Ctrl-C)" in run_json(ws)["failures"]
    assert (ws / "flushed.txt").exists()
    assert perf_rows(out)[0]["status"] == "FAILURE"
    assert not containers_of(docker_client, ws)


@pytest.mark.parametrize("argv", [
    ["--tags", "no_such_model"],
    ["--tags", "ok_model", "--additional-context", '{"docker_env_vars": {"1BAD": "x"}}'],
    ["--tags", "ok_model", "--additional-context", '{"tools": [{"name": "rocprofv3_lightweight", "oops": 1}]}'],
])
def test_bad_input_starts_no_container_and_writes_nothing(docker_client, model_repo, tmp_path, argv):
    before = {c.id for c in docker_client.containers.list(all=True)}
    out = tmp_path / "out"
    assert run_cli(*argv, "--models", str(model_repo), "--output-dir", str(out)) == 2
    assert not out.exists()
    assert {c.id for c in docker_client.containers.list(all=True)} == before


def test_auto_runner_uses_docker_when_a_daemon_answers(docker_client, cpu_base_image, model_repo, tmp_path):
    out = tmp_path / "out"
    assert (
        cli_main(["run", "--tags", "ok_model", "--models", str(model_repo), "--output-dir", str(out), "--quiet"]) == 0
    )
    assert run_json(out / "ok_model__none")["runner"] == "docker"


def test_no_dockerfile_for_this_vendor_is_bad_input(docker_client, model_repo, tmp_path, capsys):
    cards = json.loads(model_repo.read_text())
    cards.append(dict(cards[0], name="orphan_model", dockerfile="docker/absent", tags=["orphan"]))
    model_repo.write_text(json.dumps(cards))
    out = tmp_path / "out"
    assert run_cli("--tags", "orphan_model", "--models", str(model_repo), "--output-dir", str(out)) == 2
    assert "no Dockerfile matches" in capsys.readouterr().err
    assert not out.exists()


def test_missing_prebuilt_image_is_recorded_not_a_crash(docker_client, model_repo, tmp_path):
    out = tmp_path / "out"
    # a registry on a closed loopback port: the pull fails at once, nothing leaves this machine
    ctx = {"MAD_CONTAINER_IMAGE": "localhost:1/does-not-exist:never",
           "post_scripts": [{"path": "scripts/hooks/post.sh"}], "tools": [{"name": "gpu_info_vram_profiler"}]}
    assert run_cli("--tags", "ok_model", "--models", str(model_repo), "--output-dir", str(out),
                   "--additional-context", json.dumps(ctx)) == 1
    manifest = run_json(out / "ok_model__gpu_info_vram_profiler")
    assert manifest["status"] == "FAILURE" and "does-not-exist" in manifest["failures"][0]
    assert manifest["steps"] == [] and manifest["samplers"] == []  # nothing ran, nothing crashed
    assert manifest["image"]["tag"] == ctx["MAD_CONTAINER_IMAGE"]
    assert perf_rows(out)[0]["status"] == "FAILURE"


def test_container_that_fails_to_start_is_removed(docker_client, cpu_base_image, model_repo, tmp_path):
    """The engine creates the container, then cannot start it (a file mounted over a folder): it must not stay."""
    afile = tmp_path / "afile"
    afile.write_text("not a folder\n")
    out = tmp_path / "out"
    ctx = {"docker_mounts": {"/usr": str(afile)}}
    assert run_cli("--tags", "ok_model", "--models", str(model_repo), "--output-dir", str(out),
                   "--additional-context", json.dumps(ctx)) == 1
    ws = out / "ok_model__none"
    assert "APIError" in run_json(ws)["failures"][0]
    assert perf_rows(out)[0]["status"] == "FAILURE"
    assert not containers_of(docker_client, ws)


def test_context_pythonpath_reaches_the_container_workload(docker_client, cpu_base_image, model_repo, tmp_path):
    hook = model_repo.parent / "scripts" / "hooks" / "show_path.sh"
    hook.write_text('echo "$PYTHONPATH" > ../pythonpath.txt\n')
    out = tmp_path / "out"
    ctx = {"docker_env_vars": {"PYTHONPATH": "/from/context"}, "pre_scripts": [{"path": "scripts/hooks/show_path.sh"}]}
    assert run_cli("--tags", "ok_model", "--models", str(model_repo), "--output-dir", str(out),
                   "--additional-context", json.dumps(ctx)) == 0
    assert (out / "ok_model__none" / "pythonpath.txt").read_text().strip() == "/opt/madengine-rocprof:/from/context"


def test_docker_gpus_on_a_cpu_machine_is_a_warning_not_silence(docker_client, cpu_base_image, model_repo, tmp_path):
    out = tmp_path / "out"
    assert run_cli("--tags", "ok_model", "--models", str(model_repo), "--output-dir", str(out),
                   "--additional-context", '{"docker_gpus": "0"}') == 0
    assert "docker_gpus '0' ignored: no GPU on this machine" in run_json(out / "ok_model__none")["warnings"]

