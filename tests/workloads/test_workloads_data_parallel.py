"""Two ranks (torchrun, gloo on the CPU) train like one rank with the whole batch: the data-parallel gate, the
harness's 2-rank path and bench.py under torchrun."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

GATE_SCRIPT = """
import argparse, json, os, sys
sys.path.insert(0, {scripts!r})
os.environ.setdefault("TRITON_INTERPRET", "1")
import torch.distributed as dist
import tt_gates, tt_harness, tt_model, tt_train
rank, world, device = tt_harness.setup_distributed(argparse.Namespace(device="cpu"))
if os.environ.get("BREAK_ALL_REDUCE"):  # every rank trains alone: what a lost all-reduce does
    tt_train.data_parallel = lambda model, device, stream=None: model
cfg = tt_model.ModelConfig(vocab_size=1000, hidden_dim=64, num_layers=2, num_heads=4, max_seq_len=32)
out = {{}}
for version, dtype, attention in {runs!r}:
    out[version + "-" + dtype] = tt_gates.gate_data_parallel(version, cfg, device, dtype, attention, 42, False,
                                                             small=True)
if rank == 0:
    open(sys.argv[1], "w").write(json.dumps(out))
dist.destroy_process_group()
# no interpreter teardown: gloo's threads and torch's globals are destroyed in an order that, on a loaded 2-core
# machine, now and then ends a rank in std::terminate after its work is done (seen in CI runs)
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
"""


def _torchrun(tmp_path, runs, env_extra=None, timeout=600):
    script = tmp_path / "gate_2ranks.py"
    script.write_text(GATE_SCRIPT.format(scripts=str(REPO / "scripts" / "tinytransformer"), runs=runs))
    out = tmp_path / "gates.json"
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    env.update(env_extra or {})
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                        str(script), str(out)], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.slow
def test_two_ranks_of_b_follow_one_rank_of_2b_and_a_lost_all_reduce_fails(tmp_path):
    """v1 (fp32, explicit attention, DDP) and v4's GPU precision path (bf16 parameters in one flat buffer, fp32 master
    weights, the optimizer sharded over the ranks: tt_sharded_adamw): the mean of the ranks' losses equals one process
    on the whole batch to float rounding; ranks that train apart leave even the bf16 tolerance."""
    runs = [("v1", "fp32", ""), ("v4", "bf16", "sdpa")]
    good = _torchrun(tmp_path, runs)
    v1, v4 = good["v1-fp32"], good["v4-bf16"]
    assert v1["passed"] and v4["passed"], good
    assert v1["world_size"] == 2 and v1["steps"] == 10 and len(v1["losses"]) == len(v1["ref_losses"]) == 10
    assert v1["max_abs_diff"] < 1e-5  # the same arithmetic up to the order of the batch sums
    assert v4["max_abs_diff"] < 0.1 * v4["limit"] and v4["limit"] == 6e-2
    assert v1["losses"][0] == pytest.approx(v1["ref_losses"][0], abs=1e-6)  # the same weights and data at step 1

    broken = _torchrun(tmp_path, runs, {"BREAK_ALL_REDUCE": "1"})
    for name, gate in broken.items():
        assert not gate["passed"], (name, gate["max_abs_diff"])
        assert gate["max_abs_diff"] > gate["limit"]


@pytest.mark.slow
def test_bench_under_torchrun_runs_every_version_on_two_ranks_with_the_gates(tmp_path):
    """bench.py under torchrun: one process group for every run, the data-parallel gate on both ranks, tokens of
    both ranks in the result, rank 0's summary only."""
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                        str(REPO / "benchmarks" / "tinytransformer" / "bench.py"), "--out", str(tmp_path),
                        "--configs", "B8_S128", "--only", "B8_S128/v1,B8_S128/v2", "--smoke", "--gates"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads((tmp_path / "bench_results.json").read_text())
    assert summary["failed"] == [] and "--nproc_per_node 2" in summary["command"]
    for key in ("B8_S128/v1", "B8_S128/v2"):
        res = summary["results"][key]["result"]
        assert res["world_size"] == 2 and res["metrics"]["tokens_per_step"] == 2 * 2 * 16
        gate = res["validation"]["data_parallel_vs_one_rank"]
        assert gate["passed"] and gate["world_size"] == 2
        assert res["settings"]["cuda_graphs_used"] is False  # the CPU: DDP, eager
        # each rank on its own share of the cores (tt_affinity), both recorded; every rank's own median
        binding = res["settings"]["cpu_binding"]
        assert [b["local_rank"] for b in binding] == [0, 1] and {b["mode"] for b in binding} == {"cores"}
        given = sorted(os.sched_getaffinity(0))
        if len(given) > 1:
            shares = [set(_cpus(b["cpus"])) for b in binding]
            assert not shares[0] & shares[1] and shares[0] | shares[1] == set(given)
        per_rank = res["metrics"]["step_time_ms_median_per_rank"]
        assert len(per_rank) == 2 and max(per_rank) == res["metrics"]["step_time_ms"]["median"]
    assert p.stdout.count("##### B8_S128/v1") == 2  # both ranks ran it


def _cpus(cpulist: str) -> list[int]:
    """'0-2,5' -> [0, 1, 2, 5] (Linux cpulist text)."""
    out: list[int] = []
    for part in cpulist.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out
