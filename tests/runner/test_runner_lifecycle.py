"""The run lifecycle with the local runner (no Docker needed): every outcome keeps its logs and outputs and writes
run.json and a perf.csv row; bad input writes nothing."""
import csv
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from madengine_rocprof.cli import main as cli_main
from madengine_rocprof.runner.lifecycle import RunOptions, run_models

# A stand-in for scripts/rocprof_wrapper.sh with the wrapper's contract: runs the app after `--`, then writes
# OUT/manifest.json (OUT from -d, every key of contracts.Manifest) with the outcome chosen by FAKE_OUTCOME and the
# app's exit code.
FAKE_WRAPPER = r"""
    out=""; while [ $# -gt 0 ]; do case "$1" in -d) out="$2"; shift 2;; --) shift; break;; *) shift;; esac; done
    mkdir -p "$out/host"
    "$@"; code=$?
    outcome="${FAKE_OUTCOME:-ok}"; [ $code -ne 0 ] && outcome=app_failed
    outputs='[{"path": "host/1_kernel_trace.csv", "size_bytes": 10, "kind": "kernel_trace", "rows": 1}]'
    if [ "$outcome" = no_output ]; then outputs='[]'; else echo "Kernel_Name" > "$out/host/1_kernel_trace.csv"; fi
    [ "$outcome" = no_manifest ] && exit $code
    printf '{"schema_version": 1, "tool": "madengine-rocprof-wrapper", "profiler": {"name": "rocprofv3", "path": null,
    "version": null, "why": "fake"}, "profile": null, "argv": [], "app_argv": [], "env_added": {}, "output_dir": "%s",
    "started_at": "2026-01-01T00:00:00+00:00", "duration_s": 0.1, "exit_code": %d, "app_exit_code": %d,
    "outcome": "%s", "outputs": %s, "dispatch_count": null, "messages": []}\n' \
        "$out" $code $code "$outcome" "$outputs" \
        > "$out/manifest.json"
    exit $code
"""


def perf_rows(out: Path):
    with open(out / "perf.csv", newline="") as f:
        return list(csv.DictReader(f))


def run_json(out: Path, name: str):
    return json.loads((out / name / "run.json").read_text())


def opts(models, out, tags, **kw):
    return RunOptions(tags=tags, models_file=models, output_dir=out, runner="local", echo=False, **kw)


def test_success_env_hooks_distributed_and_results(model_repo, tmp_path):
    out = tmp_path / "out"
    ctx = {"env_vars": {"FROM_ENV_VARS": "e1"}, "docker_env_vars": {"FROM_DOCKER_ENV_VARS": "d1"},
           "pre_scripts": [{"path": "scripts/hooks/pre.sh", "args": "alpha"}],
           "post_scripts": [{"path": "scripts/hooks/post.sh"}],
           "distributed": {"launcher": "torchrun", "nproc_per_node": 2}}
    code = run_models(opts(model_repo, out, ["ok_model:steps=2"], context_json=json.dumps(ctx)))
    assert code == 0
    ws = out / "ok_model__none"
    log = (ws / "logs" / "run.log").read_text()
    assert "args: --steps 2" in log
    assert "env FROM_ENV_VARS=e1 FROM_DOCKER_ENV_VARS=d1" in log
    assert "runner: torchrun --standalone --nnodes=1 --nproc_per_node=2 ngpus: 2" in log
    assert (ws / "model_scripts" / "pre_marker.txt").read_text() == "pre ran with alpha\n"
    assert "run.json" not in (ws / "post_saw.txt").read_text()  # post ran before results were written
    (row,) = perf_rows(out)
    assert (row["model"], row["status"], row["performance"], row["metric"]) == (
        "ok_model",
        "SUCCESS",
        "1234.5",
        "tokens_per_second",
    )
    assert (row["n_gpus"], row["launcher"], row["args"], row["tags"]) == ("2", "torchrun", "--steps 2", "runnertest,ok")
    assert row["gpu_architecture"] == "Fake GPU 9000"  # what the workload reported, not a guess
    manifest = run_json(out, "ok_model__none")
    assert manifest["status"] == "SUCCESS" and manifest["failures"] == []
    assert [s["name"] for s in manifest["steps"]] == ["pre_0_pre", "run", "post_0_post"]
    assert manifest["performance"] == {"value": 1234.5, "metric": "tokens_per_second"}
    assert manifest["context"]["env_vars"] == {"FROM_ENV_VARS": "e1"}
    assert not (ws / ".runner").exists()


def test_failing_workload_keeps_everything_and_runs_post_scripts(model_repo, tmp_path):
    out = tmp_path / "out"
    ctx = {"post_scripts": [{"path": "scripts/hooks/post.sh"}]}
    assert run_models(opts(model_repo, out, ["fail_model"], context_json=json.dumps(ctx))) == 1
    ws = out / "fail_model__none"
    assert "about to fail" in (ws / "logs" / "run.log").read_text()
    assert (ws / "partial.txt").read_text() == "partial before failure\n"
    assert (ws / "post_saw.txt").exists() and (ws / "logs" / "post_0_post.log").exists()
    manifest = run_json(out, "fail_model__none")
    assert manifest["status"] == "FAILURE" and "workload exit code 3" in manifest["failures"]
    (row,) = perf_rows(out)
    assert row["status"] == "FAILURE" and row["performance"] == ""


def test_timeout_stops_the_whole_step_with_grace_and_keeps_outputs(model_repo, tmp_path):
    out = tmp_path / "out"
    started = time.monotonic()
    assert run_models(opts(model_repo, out, ["slow_model"], timeout=1.5)) == 1
    assert time.monotonic() - started < 30
    ws = out / "slow_model__none"
    assert (ws / "flushed.txt").read_text() == "flushed on TERM\n"  # SIGTERM first: the step could flush
    log = (ws / "logs" / "run.log").read_text()
    assert "tick 1" in log and "got TERM" in log
    manifest = run_json(out, "slow_model__none")
    (step,) = manifest["steps"]
    assert step["timed_out"] and manifest["failures"] == ["workload timed out after 1.5s"]
    assert perf_rows(out)[0]["status"] == "FAILURE"


def test_timeout_after_the_performance_line_says_the_workload_hung_on_its_way_out(model_repo, tmp_path):
    out = tmp_path / "out"
    assert run_models(opts(model_repo, out, ["hang_model"], timeout=1.5)) == 1
    assert run_json(out, "hang_model__none")["failures"] == [
        "workload timed out after 1.5s after printing its performance line: it hung on its way out"]
    assert perf_rows(out)[0]["status"] == "FAILURE"


def test_missing_performance_line_is_a_failure(model_repo, tmp_path):
    out = tmp_path / "out"
    assert run_models(opts(model_repo, out, ["noperf_model"])) == 1
    assert "no 'performance: <value> <metric>' line" in run_json(out, "noperf_model__none")["failures"][0]


def test_failing_pre_script_skips_workload_but_post_runs(model_repo, tmp_path):
    out = tmp_path / "out"
    ctx = {"pre_scripts": [{"path": "scripts/hooks/bad_pre.sh"}], "post_scripts": [{"path": "scripts/hooks/post.sh"}]}
    assert run_models(opts(model_repo, out, ["ok_model"], context_json=json.dumps(ctx))) == 1
    manifest = run_json(out, "ok_model__none")
    assert [s["name"] for s in manifest["steps"]] == ["pre_0_bad_pre", "post_0_post"]
    assert manifest["failures"][0].startswith("pre-script bad_pre.sh: exit code 7")
    assert not (out / "ok_model__none" / "workload_result.json").exists()


@pytest.fixture
def fake_plugin(tmp_path, repo):
    """A plugin root whose scripts/rocprof_wrapper.sh is the stand-in above (counters from the real repo)."""
    root = tmp_path / "plugin"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "rocprof_wrapper.sh").write_text(textwrap.dedent(FAKE_WRAPPER))
    return root


@pytest.mark.parametrize(
    "outcome, status, failure",
    [
        ("ok", "SUCCESS", None),
        ("no_output", "FAILURE", "profiler rocprofv3_lightweight: no_output"),
        (
            "no_manifest",
            "FAILURE",
            "profiler rocprofv3_lightweight: no manifest.json in profiler (the wrapper did not finish)",
        ),
        ("profiler_failed", "FAILURE", "profiler rocprofv3_lightweight: profiler_failed"),
    ],
)
def test_profiler_outcome_decides_status(model_repo, tmp_path, fake_plugin, outcome, status, failure, monkeypatch):
    monkeypatch.setenv("FAKE_OUTCOME", outcome)
    out = tmp_path / "out"
    ctx = {"tools": [{"name": "rocprofv3_lightweight"}]}
    code = run_models(opts(model_repo, out, ["ok_model"], context_json=json.dumps(ctx), repo=fake_plugin))
    manifest = run_json(out, "ok_model__rocprofv3_lightweight")
    assert manifest["status"] == status and code == (0 if status == "SUCCESS" else 1)
    assert (manifest["failures"] == []) if failure is None else (failure in manifest["failures"])
    assert manifest["chain"]["command"].startswith(
        "bash {plugin}/scripts/rocprof_wrapper.sh --profile lightweight --hip-trace --kernel-trace")
    assert perf_rows(out)[0]["status"] == status
    if outcome == "ok":
        assert (out / "ok_model__rocprofv3_lightweight" / "profiler" / "host" / "1_kernel_trace.csv").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--tags", "no_such_model"], "no model has the name or tag 'no_such_model'"),
        (
            ["--tags", "ok_model", "--additional-context", '{"tools": [{"name": "rocprofv3_lightweigt"}]}'],
            "unknown tool",
        ),
        (["--tags", "ok_model", "--additional-context", '{"gpu_vendor": "INTEL"}'], "gpu_vendor"),
        (["--tags", "ok_model", "--additional-context", '{"tools": '], "invalid JSON"),
        (["--tags", "ok_model", "--additional-context", '{"pre_scripts": [{"path": "nope.sh"}]}'], "script not found"),
        (["--tags", "ok_model", "--additional-context", '{"distributed": {"launcher": "mpirun"}}'], "not supported"),
        # found while planning, not after the run directory and a perf.csv row were written
        (["--tags", "ok_model", "--additional-context", '{"docker_gpus": "x"}'], "'x' is not a GPU index or range"),
        (["--tags", "ok_model", "--additional-context", '{"model_args": "--name \'unclosed"}'], "model_args"),
        (
            [
                "--tags",
                "ok_model",
                "--additional-context",
                '{"pre_scripts": [{"path": "scripts/hooks/pre.sh", "args": "\'x"}]}',
            ],
            "pre_scripts[0].args",
        ),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(model_repo, tmp_path, argv, message, capsys):
    out = tmp_path / "out"
    code = cli_main(["run", *argv, "--models", str(model_repo), "--output-dir", str(out), "--runner", "local"])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_bad_context_file_named_with_line(model_repo, tmp_path, capsys):
    bad = tmp_path / "ctx.json"
    bad.write_text('{\n  "tools": [\n    {"name": 5}\n  ]\n}\n')
    out = tmp_path / "out"
    assert cli_main(["run", "--tags", "ok_model", "--models", str(model_repo), "--output-dir", str(out),
                     "--additional-context-file", str(bad), "--runner", "local"]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "tools[0].name" in err
    assert not out.exists()


def test_ctrl_c_stops_the_step_and_keeps_partial_outputs(model_repo, tmp_path, repo):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "madengine_rocprof", "run", "--tags", "slow_model", "--models",
                             str(model_repo), "--output-dir", str(out), "--runner", "local"],
                            cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = out / "slow_model__none" / "logs" / "run.log"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (log.exists() and "tick 2" in log.read_text()):
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    manifest = run_json(out, "slow_model__none")
    assert manifest["status"] == "FAILURE" and "workload interrupted (Ctrl-C)" in manifest["failures"]
    assert manifest["steps"][0]["interrupted"]
    assert (out / "slow_model__none" / "flushed.txt").exists()
    assert perf_rows(out)[0]["status"] == "FAILURE"


@pytest.mark.slow
def test_readme_command_runs_tiny_llama_v4_locally_on_the_cpu(repo, tmp_path):
    """The issue's main command, without docker: detected CPU, embedded tracer, Triton in interpreter mode."""
    out = tmp_path / "out"
    code = cli_main(["run", "--tags", "tiny_llama_v4:num-steps=2:warmup-steps=1", "--runner", "local", "--quiet",
                     "--additional-context-file", str(repo / "profiling-configs" / "rocprofv3_lightweight.json"),
                     "--models", str(repo / "models.json"), "--output-dir", str(out)])
    ws = out / "tiny_llama_v4__rocprofv3_lightweight"
    manifest = run_json(out, ws.name)
    assert code == 0, manifest["failures"]
    assert manifest["gpu_vendor"] == {"requested": "AMD", "detected": "CPU", "used": "CPU"}
    assert any("no GPU" in w for w in manifest["warnings"])
    wrapper = json.loads((ws / "profiler" / "manifest.json").read_text())
    assert wrapper["outcome"] == "ok" and wrapper["dispatch_count"] > 0
    (row,) = perf_rows(out)
    assert row["status"] == "SUCCESS" and float(row["performance"]) > 0


@pytest.mark.slow
def test_multi_gpu_profile_runs_torchrun_with_per_rank_outputs(repo, tmp_path):
    """multi_gpu with 2 processes on the CPU (gloo): each rank's profiler output lands in its own files."""
    out = tmp_path / "out"
    code = cli_main(["run", "--tags", "tiny_llama_v1:num-steps=3", "--runner", "local", "--quiet",
                     "--additional-context-file", str(repo / "profiling-configs" / "rocprofv3_multi_gpu.json"),
                     "--additional-context",
                     '{"docker_gpus": "0,1", "gpus_per_node": 2, "distributed": {"nproc_per_node": 2}}',
                     "--models", str(repo / "models.json"), "--output-dir", str(out), "--timeout", "300"])
    ws = next(out.glob("tiny_llama_v1__rocprofv3_communication+*"))
    manifest = run_json(out, ws.name)
    assert code == 0, (manifest["failures"], (ws / "logs" / "run.log").read_text()[-6000:])
    assert "MAD_MULTI_NODE_RUNNER" not in manifest["chain"]["env"]  # set per run, recorded in the context
    traces = sorted(p.name.split("_")[0] for p in (ws / "profiler").rglob("*_kernel_trace.csv"))
    assert traces == ["rank0", "rank1"]
    assert [s["tool"] for s in manifest["samplers"]] == ["gpu_info_power_profiler", "gpu_info_vram_profiler"]
    (row,) = perf_rows(out)
    assert (row["status"], row["n_gpus"], row["launcher"]) == ("SUCCESS", "2", "torchrun")


def test_auto_runner_falls_back_to_local_when_no_daemon_answers(model_repo, tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    out = tmp_path / "out"
    assert run_models(RunOptions(tags=["ok_model"], models_file=model_repo, output_dir=out, echo=False)) == 0
    assert run_json(out, "ok_model__none")["runner"] == "local"
    with pytest.raises(Exception, match="no Docker engine answers"):
        run_models(RunOptions(tags=["ok_model"], models_file=model_repo, output_dir=out, runner="docker", echo=False))


def test_hook_args_are_words_for_the_script_never_shell_code(model_repo, tmp_path):
    """A context's script args are split like a shell would split them, then quoted: no `;` or `$( )` runs."""
    out = tmp_path / "out"
    ctx = {
        "pre_scripts": [{"path": "scripts/hooks/pre.sh", "args": "a; touch INJECTED $(touch INJECTED2) 'two words'"}]
    }
    assert run_models(opts(model_repo, out, ["ok_model"], context_json=json.dumps(ctx))) == 0
    scripts = out / "ok_model__none" / "model_scripts"
    assert not list(out.rglob("INJECTED*"))
    assert (scripts / "pre_marker.txt").read_text() == "pre ran with a; touch INJECTED $(touch INJECTED2) two words\n"


def test_pythonpath_from_the_context_is_kept_after_the_plugin(model_repo, tmp_path):
    """The plugin must be importable, but a PYTHONPATH the context sets still reaches the workload (docs: both
    env_vars and docker_env_vars reach it)."""
    hook = model_repo.parent / "scripts" / "hooks" / "show_path.sh"
    hook.write_text('echo "$PYTHONPATH" > ../pythonpath.txt\n')
    out = tmp_path / "out"
    ctx = {"env_vars": {"PYTHONPATH": "/from/context"}, "pre_scripts": [{"path": "scripts/hooks/show_path.sh"}]}
    assert run_models(opts(model_repo, out, ["ok_model"], context_json=json.dumps(ctx))) == 0
    parts = (out / "ok_model__none" / "pythonpath.txt").read_text().strip().split(":")
    assert parts[0] == str(RunOptions(tags=[]).repo) and "/from/context" in parts


def test_a_sampler_that_fails_says_where_its_log_is(model_repo, tmp_path):
    out = tmp_path / "out"
    ctx = {"tools": [{"name": "gpu_info_power_profiler"}], "env_vars": {"POWER_SAMPLING_RATE": "abc"}}
    assert run_models(opts(model_repo, out, ["ok_model"], context_json=json.dumps(ctx))) == 0  # a note, not a failure
    (sampler,) = run_json(out, "ok_model__gpu_info_power_profiler")["samplers"]
    assert sampler["exit_code"] == 2 and sampler["log"] in sampler["note"]
    assert "POWER_SAMPLING_RATE='abc'" in (out / "ok_model__gpu_info_power_profiler" / sampler["log"]).read_text()


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def test_a_step_leaves_no_process_running_after_it_ends(model_repo, tmp_path):
    """Like a container's removal: what a step started in the background ends with the step."""
    hook = model_repo.parent / "scripts" / "hooks" / "leaves_child.sh"
    hook.write_text("sleep 300 &\necho $! > ../leftover.pid\n")
    out = tmp_path / "out"
    ctx = {"pre_scripts": [{"path": "scripts/hooks/leaves_child.sh"}]}
    started = time.monotonic()
    try:
        assert run_models(opts(model_repo, out, ["ok_model"], context_json=json.dumps(ctx))) == 0
        pid = int((out / "ok_model__none" / "leftover.pid").read_text())
        assert not _alive(pid)
        assert time.monotonic() - started < 4  # no wait for output that never ends
    finally:
        pid_file = out / "ok_model__none" / "leftover.pid"
        if pid_file.exists() and _alive(int(pid_file.read_text())):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_ctrl_c_during_cleanup_still_writes_the_results(model_repo, tmp_path, monkeypatch):
    """A (second) Ctrl-C while the executor is being closed: run.json and the perf.csv row are still written."""
    from madengine_rocprof.runner.executors import LocalExecutor

    real_close = LocalExecutor.close

    def close_then_interrupt(self):
        real_close(self)
        raise KeyboardInterrupt

    monkeypatch.setattr(LocalExecutor, "close", close_then_interrupt)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        run_models(opts(model_repo, out, ["ok_model"]))
    manifest = run_json(out, "ok_model__none")
    assert [s["outcome"] for s in manifest["steps"]] == ["ok"]  # the workload had finished: its result stands
    assert perf_rows(out)[0]["status"] == manifest["status"] == "SUCCESS"


def test_a_rerun_replaces_its_perf_csv_row_and_keeps_other_runs(model_repo, tmp_path):
    """A rerun replaces its run directory, and the reports show that latest run; perf.csv agrees with them: one row
    per run directory, the rerun's, beside the other model's row."""
    out = tmp_path / "out"
    assert run_models(opts(model_repo, out, ["ok_model:steps=1"])) == 0
    assert run_models(opts(model_repo, out, ["fail_model"])) == 1
    assert run_models(opts(model_repo, out, ["ok_model:steps=2"])) == 0
    rows = perf_rows(out)
    assert [(r["model"], r["run_dir"], r["status"], r["args"]) for r in rows] == [
        ("fail_model", "fail_model__none", "FAILURE", ""), ("ok_model", "ok_model__none", "SUCCESS", "--steps 2")]
    assert "--steps 2" in json.dumps(run_json(out, "ok_model__none"))  # the run directory is the rerun's too


def test_perf_csv_precision_is_what_the_workload_ran_in(model_repo, tmp_path):
    """models.json labels v4 bf16, but on a CPU it runs in fp32 and its workload_result.json says so
    (settings.dtype): perf.csv's training_precision reports the dtype the run used."""
    cards = json.loads(model_repo.read_text())
    for card in cards:
        card["training_precision"] = "bf16"
    model_repo.write_text(json.dumps(cards))
    script = model_repo.parent / "scripts" / "ok" / "run.sh"
    script.write_text(script.read_text().replace('"status": "ok",', '"status": "ok", "settings": {"dtype": "fp32"},'))
    out = tmp_path / "out"
    assert run_models(opts(model_repo, out, ["ok_model", "noperf_model"])) == 1
    precision = {r["model"]: r["training_precision"] for r in perf_rows(out)}
    assert precision == {"ok_model": "fp32", "noperf_model": "bf16"}  # no workload_result.json: the card's label
