"""The harness contract: performance line, JSON result, exit codes, FLOP formula, data, run.sh and torchrun/DDP."""
from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tt_harness
import tt_model
import tt_train

TINY = ["--tiny", "--device", "cpu", "--num-steps", "4", "--warmup-steps", "1"]
PERF = re.compile(r"^performance:\s+([0-9.]+)\s+tokens_per_second$", re.M)


def test_json_result_and_performance_line(tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = tt_harness.main(["--version", "v2", *TINY, "--batch-size", "3", "--seq-len", "12", "--json-out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    res = json.loads(out.read_text())
    for key in ("schema_version", "model", "version", "git_sha", "versions", "device", "settings", "metrics",
                "step_times_ms", "validation", "status"):
        assert key in res, key
    assert res["model"] == "tiny_llama_v2" and res["status"] == "ok" and res["schema_version"] == 1
    m = res["metrics"]
    times = res["step_times_ms"]
    assert len(times) == 4
    assert m["step_time_ms"]["median"] == pytest.approx(statistics.median(times))
    assert m["tokens_per_second"] == pytest.approx(3 * 12 / (statistics.median(times) / 1e3))
    assert m["samples_per_second"] == pytest.approx(3 / (statistics.median(times) / 1e3))
    assert m["step_time_ms"]["p10"] == pytest.approx(np.percentile(times, 10))
    assert m["step_time_ms"]["p90"] == pytest.approx(np.percentile(times, 90))
    assert float(PERF.findall(printed)[0]) == pytest.approx(m["tokens_per_second"], abs=0.006)  # printed %.2f
    assert res["settings"]["batch_size"] == 3 and res["settings"]["version"] == "v2"
    # one rank: no binding, every CPU the process was given (tt_affinity); its own median is the headline
    if hasattr(os, "sched_getaffinity"):
        binding = res["settings"]["cpu_binding"]
        assert binding["local_world_size"] == 1 and binding["n_cpus"] == len(os.sched_getaffinity(0))
    assert m["step_time_ms_median_per_rank"] == [m["step_time_ms"]["median"]]
    # end-to-end: wall clock over the timed steps, which holds at least the steps themselves
    assert m["end_to_end_seconds"] >= sum(times) / 1e3
    assert m["tokens_per_second_end_to_end"] == pytest.approx(3 * 12 * 4 / m["end_to_end_seconds"])
    e2e = re.findall(r"^end-to-end: ([0-9.]+) tokens_per_second", printed, re.M)
    assert float(e2e[0]) == pytest.approx(m["tokens_per_second_end_to_end"], abs=0.006)
    # host memory on every device: the peak RSS, against the kernel's own high-water mark read another way
    assert m["peak_memory_allocated_bytes"] is None  # no GPU memory on the CPU
    if sys.platform == "linux":
        status = Path("/proc/self/status").read_text()
        found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.M)
        assert found is not None
        high_water = int(found.group(1)) * 1024
        assert 50 * 2**20 < m["peak_host_rss_bytes"] <= high_water  # torch alone is larger than 50 MiB


def test_batch_feed_cycles_the_seeded_batches_in_order():
    tokens = tt_train.make_tokens("random", 3, 2, 5, 1000, 7, "cpu")
    xs, ys = tt_train.split_batches(tokens)
    feed = tt_train.BatchFeed(tokens, torch.device("cpu"))
    for i in range(7):
        x, y = feed.next()
        assert torch.equal(x, xs[i % 3]) and torch.equal(y, ys[i % 3])


def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert tt_harness.main(["--version", "v1", *TINY, "--attention", "sdpa", "--json-out", str(out)]) == 2
    assert tt_harness.main(["--version", "v1", *TINY, "--batch-size", "0", "--json-out", str(out)]) == 2
    assert "error:" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(SystemExit):
        tt_harness.main(["--version", "v7"])


def test_failed_gate_exits_1_with_failed_status(tmp_path, monkeypatch):
    import tt_gates
    monkeypatch.setattr(tt_gates, "run_gates", lambda *a, **k: {"gradient_coverage": {"passed": False}})
    out = tmp_path / "r.json"
    assert tt_harness.main(["--version", "v1", *TINY, "--validate", "--json-out", str(out)]) == 1
    assert json.loads(out.read_text())["status"] == "failed"


def test_flops_formula_against_parameter_count():
    cfg = tt_model.ModelConfig()  # hidden 512, 8 layers, 8 heads / 4 kv heads, vocab 1000
    model = tt_model.TinyLlama(cfg, tt_model.Ops())
    assert tt_model.count_params(model) == 31_977_984  # the public versions' parameter count
    n_matmul = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear)) + 1000 * 512
    tokens = 32 * 512
    expected = 6 * n_matmul * tokens + 12 * 8 * 512 * 512 * tokens
    assert tt_model.flops_per_step(cfg, 32, 512) == pytest.approx(expected)
    assert 3.4e12 < expected < 3.7e12


def test_data_is_seeded_and_labels_shift_by_one():
    a = tt_train.make_tokens("random", 2, 3, 10, 1000, 7, "cpu")
    assert torch.equal(a, tt_train.make_tokens("random", 2, 3, 10, 1000, 7, "cpu"))
    assert not torch.equal(a, tt_train.make_tokens("random", 2, 3, 10, 1000, 8, "cpu"))
    x, y = tt_train.split_batches(a)
    assert x.shape == y.shape == (2, 3, 10)
    assert torch.equal(x[..., 1:], y[..., :-1])
    learn = tt_train.make_tokens("learnable", 1, 4, 9, 1000, 1, "cpu")[0]
    step = (learn[:, 1] - learn[:, 0]) % 32
    assert set(step.tolist()) <= {1, 2}
    assert torch.equal((learn[:, :-1] + step[:, None]) % 32, learn[:, 1:])


def _run_sh(scripts_dir, tmp_path, *args, timeout=240):
    env = dict(os.environ, PYTHON=sys.executable)
    env.pop("WORLD_SIZE", None)
    return subprocess.run(["bash", str(scripts_dir / "run.sh"), *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_run_sh_writes_workload_result(scripts_dir, tmp_path):
    p = _run_sh(scripts_dir, tmp_path, "--version", "v2", "--num-steps", "2", "--device", "cpu")
    assert p.returncode == 0, p.stderr
    res = json.loads((tmp_path / "workload_result.json").read_text())
    assert res["version"] == "v2" and res["status"] == "ok"
    assert float(PERF.findall(p.stdout)[0]) == pytest.approx(res["metrics"]["tokens_per_second"], abs=0.006)


@pytest.mark.slow
def test_run_sh_from_a_checkout_root_needs_no_activated_venv_and_leaves_the_root_clean(scripts_dir, tmp_path):
    """The README runs `bash scripts/tinytransformer/run.sh ...` from the checkout's root in a fresh shell: python3
    has no torch there (only the checkout's .venv has), and the result must not land in the root."""
    root = tmp_path / "checkout"  # a checkout: .git, and scripts/tinytransformer (the real one, whose ../../.venv is
    (root / ".git").mkdir(parents=True)  # the repository's venv)
    (root / "scripts").mkdir()
    (root / "scripts" / "tinytransformer").symlink_to(scripts_dir)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "VIRTUAL_ENV", "WORLD_SIZE", "PYTHONPATH")}
    env["PATH"] = "/usr/bin:/bin"  # no venv on PATH
    p = subprocess.run(["bash", "scripts/tinytransformer/run.sh", "--version", "v1", "--num-steps", "1",
                        "--warmup-steps", "0", "--device", "cpu"], cwd=root, env=env, capture_output=True, text=True,
                       timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    assert not (root / "workload_result.json").exists()
    assert json.loads((root / "runs" / "tinytransformer" / "workload_result.json").read_text())["status"] == "ok"


def test_run_sh_rejects_bad_arguments(scripts_dir, tmp_path):
    assert _run_sh(scripts_dir, tmp_path, "--version", "v9").returncode == 2
    assert _run_sh(scripts_dir, tmp_path, "--nproc-per-node", "x").returncode == 2
    p = _run_sh(scripts_dir, tmp_path, "--version", "v1", "--batch-size", "0")
    assert p.returncode == 2 and "error:" in p.stderr
    assert not (tmp_path / "workload_result.json").exists()


@pytest.mark.slow
def test_run_sh_torchrun_ddp_two_processes(scripts_dir, tmp_path):
    """torchrun with 2 CPU processes (gloo): one performance line, global tokens/s, world_size in the JSON."""
    p = _run_sh(scripts_dir, tmp_path, "--version", "v1", "--nproc-per-node", "2", "--num-steps", "3",
                "--batch-size", "2", "--seq-len", "8", "--device", "cpu")
    assert p.returncode == 0, p.stderr[-3000:]
    assert len(PERF.findall(p.stdout)) == 1
    res = json.loads((tmp_path / "workload_result.json").read_text())
    assert res["world_size"] == 2
    assert res["metrics"]["tokens_per_step"] == 2 * 2 * 8
    assert res["metrics"]["tokens_per_second"] == pytest.approx(
        2 * 2 * 8 / (res["metrics"]["step_time_ms"]["median"] / 1e3))  # median: the slowest rank's


def test_gloo_uses_loopback_only_when_every_rank_is_on_this_machine(monkeypatch):
    """The host name's address can lead nowhere in a sandbox (ranks then wait 30 min): one node talks over `lo`."""
    import socket
    if "lo" not in {name for _, name in socket.if_nameindex()}:
        pytest.skip("no loopback interface named lo here")
    monkeypatch.delenv("GLOO_SOCKET_IFNAME", raising=False)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    tt_harness._gloo_on_loopback_when_single_node(2)  # 2 nodes x 1 rank: the network, not loopback
    assert "GLOO_SOCKET_IFNAME" not in os.environ
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    tt_harness._gloo_on_loopback_when_single_node(2)
    assert os.environ["GLOO_SOCKET_IFNAME"] == "lo"
    monkeypatch.setenv("GLOO_SOCKET_IFNAME", "eth7")  # the user's choice wins
    tt_harness._gloo_on_loopback_when_single_node(2)
    assert os.environ["GLOO_SOCKET_IFNAME"] == "eth7"


@pytest.mark.slow
def test_sigterm_prints_every_threads_stack_before_the_run_ends(scripts_dir, tmp_path):
    """A runner's timeout is a SIGTERM: the log then says where the workload was, and the run still ends."""
    import signal
    proc = subprocess.Popen([sys.executable, "-u", str(scripts_dir / "tt_harness.py"), "--version", "v1", *TINY[:3],
                             "--num-steps", "1000000", "--json-out", str(tmp_path / "r.json")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("TinyTransformer v1")  # past the imports, about to train
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGTERM
    assert "most recent call first" in err and "tt_harness.py" in err
    assert not (tmp_path / "r.json").exists()


def test_the_json_result_gets_the_mode_open_gives_under_the_umask(tmp_path):
    """workload_result.json was 0600 (mkstemp's) beside 0644 outputs: it now gets 0666 less the umask."""
    old = os.umask(0o027)
    try:
        tt_harness.write_json_atomic(str(tmp_path / "a.json"), {"x": 1})
        os.umask(0o022)
        tt_harness.write_json_atomic(str(tmp_path / "b.json"), {"x": 2})
    finally:
        os.umask(old)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o640
    assert (tmp_path / "b.json").stat().st_mode & 0o777 == 0o644
    assert json.loads((tmp_path / "b.json").read_text()) == {"x": 2} and len(list(tmp_path.iterdir())) == 2
