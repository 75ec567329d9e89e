"""SLURM job settings and scripts, without a cluster: validation of madengine's slurm/distributed keys, the sbatch
header, quoting of everything that comes from the context, and the refusal when SLURM's commands are missing."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from madengine_rocprof.errors import UserError
from madengine_rocprof.models import load_context
from madengine_rocprof.runner.chain import build_chain
from madengine_rocprof.runner.slurm_jobs import batch_script, job_settings, task_script

REPO = Path(__file__).resolve().parents[2]


def _ctx(text: str):
    return load_context(None, text)[0]


def test_shipped_multi_node_config_on_gpu_and_cpu_partitions():
    ctx = load_context(str(REPO / "profiling-configs" / "rocprofv3_multi_node.json"), None)[0]
    gpu = job_settings(ctx, 1800, partition_has_gpus=True)
    assert (gpu.nodes, gpu.ranks_per_node, gpu.gpus_per_node, gpu.partition, gpu.time, gpu.exclusive, gpu.port) == \
        (2, 8, 8, "gpu", "01:00:00", True, 29500)
    assert not gpu.notes
    header = batch_script(gpu, name="mrp-x", workspace="/shared/run", plugin="/shared/run/.plugin", env={}, title="t")
    for line in ("#SBATCH --partition=gpu", "#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1",
                 "#SBATCH --gpus-per-node=8", "#SBATCH --time=01:00:00", "#SBATCH --exclusive",
                 "#SBATCH --chdir=/shared/run"):
        assert line + "\n" in header
    cpu = job_settings(ctx, 1800, partition_has_gpus=False)
    assert (cpu.ranks_per_node, cpu.gpus_per_node) == (1, None)
    assert cpu.notes and "no GPUs" in cpu.notes[0]
    assert "--gpus-per-node" not in batch_script(cpu, name="x", workspace="/w", plugin="/w/.p", env={}, title="t")


def test_time_defaults_above_our_timeout_and_bad_values_are_refused():
    assert job_settings(_ctx('{"slurm": {"nodes": 2}}'), 600, None).time == "12"  # minutes: ours acts first
    for good in ("30", "1:00", "01:00:00", "2-00", "1-12:00:00", "UNLIMITED"):
        assert job_settings(_ctx(f'{{"slurm": {{"time": "{good}"}}}}'), 60, None).time == good
    for bad, where in (('{"slurm": {"time": "1h"}}', "slurm.time"),
                       ('{"slurm": {"nodes": 2}, "distributed": {"nnodes": 3}}', "distributed.nnodes"),
                       ('{"distributed": {"launcher": "deepspeed"}}', "distributed.launcher"),
                       ('{"slurm": {"network_interface": "eth0; reboot"}}', "slurm.network_interface")):
        with pytest.raises(UserError) as err:
            job_settings(_ctx(bad), 60, None)
        assert err.value.where == where


def test_context_values_reach_the_job_as_data_never_as_shell_code(tmp_path):
    marker = tmp_path / "pwned"
    evil = f"$(touch {marker}); `touch {marker}` ' \" ;"
    ctx = _ctx(json.dumps({"slurm": {"nodes": 2, "account": f"proj; touch {marker}", "modules": ["rocm/6.2"]},
                           "env_vars": {"EVIL": evil}}))
    job = job_settings(ctx, 60, False)
    script = batch_script(job, name="mrp-x", workspace=str(tmp_path), plugin=str(tmp_path / ".plugin"),
                          env={"EVIL": evil, "PYTHONPATH": "/ctx/path"}, title="t")
    assert f"#SBATCH --account='proj; touch {marker}'" in script
    assert "module load rocm/6.2\n" in script
    exports = "\n".join(line for line in script.splitlines() if line.startswith("export "))
    out = subprocess.run(
        ["bash", "-c", exports.replace("$SLURM_JOB_ID", "1") + '\nprintf %s "$EVIL"; echo; echo "$PYTHONPATH"'],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.splitlines() == [evil, f"{tmp_path / '.plugin'}:/ctx/path"]
    assert not marker.exists()


def test_task_script_runs_each_node_in_its_own_folder(tmp_path):
    ctx = load_context(str(REPO / "profiling-configs" / "rocprofv3_multi_node.json"), None)[0]
    job = job_settings(ctx, 60, False)
    chain = build_chain(ctx, "bash model_scripts/run.sh --version v1", workspace="{workspace}", plugin_home="{plugin}")
    command = chain.command.replace("{workspace}", ".").replace("{plugin}", "/w/.plugin")
    text = task_script(job, chain, workspace="/w", plugin="/w/.plugin", command=command, hooks=[], hook_timeout=600)
    assert "NODE_WS=/w/nodes/$(hostname)" in text
    assert "-d ./profiler" in text or "-d './profiler'" in text  # relative to the node's folder: OUT per node
    assert ("torchrun --nnodes=2 --nproc_per_node=1 --node_rank=$SLURM_NODEID --master_addr=$MASTER_ADDR "
            "--master_port=$MASTER_PORT") in text
    assert "-m madengine_rocprof.samplers power" in text
    subprocess.run(["bash", "-n"], input=text, text=True, check=True)  # valid shell


def test_no_sbatch_on_path_is_refused_before_anything_is_written(tmp_path):
    path = os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"])
    if shutil.which("sbatch", path=path):
        pytest.skip("this machine has sbatch in /usr/bin")
    out = tmp_path / "runs"
    result = subprocess.run([sys.executable, "-m", "madengine_rocprof", "run", "--runner", "slurm", "--tags",
                             "tiny_llama_v1", "--additional-context", '{"slurm": {"nodes": 2}}', "--output-dir",
                             str(out)], cwd=REPO, env={**os.environ, "PATH": path}, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 2
    assert "no sbatch" in result.stderr and "--runner slurm" in result.stderr and "fix:" in result.stderr
    assert not out.exists()


def test_task_script_runs_hooks_and_records_the_exit_code(tmp_path):
    """task.sh as one node runs it (SLURM's variables set by hand): pre-script, workload, failing post-script."""
    ctx = _ctx('{"slurm": {"nodes": 1}, "pre_scripts": [{"path": "pre.sh", "args": "a; b"}], '
               '"post_scripts": [{"path": "post.sh"}]}')
    job = job_settings(ctx, 60, False)
    chain = build_chain(ctx, "bash model_scripts/run.sh", workspace="{workspace}", plugin_home="{plugin}")
    scripts = tmp_path / "model_scripts"
    scripts.mkdir()
    (scripts / "run.sh").write_text('echo "performance: 1.5 things"; cat pre_ran\n')
    (scripts / "pre.sh").write_text('printf "%s|" "$@" > ../nodes/$(hostname)/pre_ran\n')
    (scripts / "post.sh").write_text("exit 4\n")
    hooks = [("pre", chain.pre_scripts[0], "pre.sh"), ("post", chain.post_scripts[0], "post.sh")]
    text = task_script(job, chain, workspace=str(tmp_path), plugin="/nonexistent", command=chain.command,
                       hooks=hooks, hook_timeout=30)
    (tmp_path / "task.sh").write_text(text)
    env = {**os.environ, "SLURM_NODEID": "0", "MASTER_ADDR": "localhost", "MASTER_PORT": "29500"}
    done = subprocess.run(["bash", str(tmp_path / "task.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    node = next((tmp_path / "nodes").iterdir())
    assert (node / "exit_code").read_text() == "0\n"
    # the pre-script args are split into words, never run as code
    assert (node / "logs" / "run.log").read_text() == "performance: 1.5 things\na;|b|"
    assert (node / "hook_failures").read_text().split() == ["post_0_post"]
