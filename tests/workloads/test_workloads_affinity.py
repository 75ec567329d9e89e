"""tt_affinity: each rank of a one-host run gets its own share of the cores (SMT siblings together), one rank keeps
them all, and the switch leaves the affinity alone."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts" / "tinytransformer"))

import tt_affinity  # noqa: E402

# 8 hardware threads on 4 cores, siblings numbered i and i + 4 (the common Linux layout)
SMT_8 = {cpu: (0, cpu % 4) for cpu in range(8)}


def test_two_ranks_get_disjoint_whole_cores_that_cover_every_cpu():
    r0 = tt_affinity.split_cores(range(8), SMT_8, 0, 2)
    r1 = tt_affinity.split_cores(range(8), SMT_8, 1, 2)
    assert r0 == [0, 1, 4, 5] and r1 == [2, 3, 6, 7]  # a core's two threads never go to two ranks


def test_cores_that_do_not_divide_go_one_more_to_the_first_ranks():
    cpus = range(5)
    shares = [tt_affinity.split_cores(cpus, {}, r, 2) for r in range(2)]
    assert shares == [[0, 1, 2], [3, 4]]
    shares = [tt_affinity.split_cores(range(10), {}, r, 4) for r in range(4)]
    assert shares == [[0, 1, 2], [3, 4, 5], [6, 7], [8, 9]]


def test_one_rank_keeps_every_cpu():
    assert tt_affinity.split_cores({3, 1, 2}, SMT_8, 0, 1) == [1, 2, 3]


def test_cores_of_a_package_stay_together_before_cpu_numbers():
    # cpus alternate packages (0, 2 on package 0; 1, 3 on package 1)
    core_of = {0: (0, 0), 1: (1, 0), 2: (0, 1), 3: (1, 1)}
    assert tt_affinity.split_cores(range(4), core_of, 0, 2) == [0, 2]
    assert tt_affinity.split_cores(range(4), core_of, 1, 2) == [1, 3]


def test_fewer_cores_than_ranks_splits_the_threads_and_fewer_cpus_than_ranks_shares_them():
    one_core = {0: (0, 0), 1: (0, 0)}
    assert [tt_affinity.split_cores([0, 1], one_core, r, 2) for r in range(2)] == [[0], [1]]
    assert tt_affinity.split_cores([0], {}, 1, 2) == [0]


def test_a_rank_outside_the_local_world_is_refused():
    with pytest.raises(ValueError, match="local rank 2 outside a local world of 2"):
        tt_affinity.split_cores(range(4), {}, 2, 2)


def test_core_map_from_sysfs_and_cpulist_text(tmp_path):
    for cpu, (pkg, core) in {0: (0, 0), 1: (0, 0), 2: (0, 5)}.items():
        topo = tmp_path / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{pkg}\n")
        (topo / "core_id").write_text(f"{core}\n")
    assert tt_affinity.read_core_map([0, 1, 2, 3], tmp_path) == {0: (0, 0), 1: (0, 0), 2: (0, 5)}  # cpu3: unknown
    assert tt_affinity.cpu_list([5, 0, 1, 2, 7, 8]) == "0-2,5,7-8"
    assert tt_affinity.cpu_list([]) == ""


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="use one of cores, off"):
        tt_affinity.resolve_mode("numa")


BIND_SCRIPT = """
import json, os, sys, threading
sys.path.insert(0, {scripts!r})
import tt_affinity
before = sorted(os.sched_getaffinity(0))
early = {{}}
started = threading.Event()
def worker():  # a thread that exists before the binding (as torch's and NCCL's may)
    started.set()
    stop.wait()
    early["cpus"] = sorted(os.sched_getaffinity(0))
stop = threading.Event()
t = threading.Thread(target=worker)
t.start()
started.wait()
record = tt_affinity.bind()
again = tt_affinity.bind("off")  # once per process
late = {{}}
t2 = threading.Thread(target=lambda: late.update(cpus=sorted(os.sched_getaffinity(0))))
t2.start(); t2.join()
stop.set(); t.join()
print(json.dumps(dict(before=before, after=sorted(os.sched_getaffinity(0)), early=early["cpus"], late=late["cpus"],
                      record=record, again=again)))
"""


def _bind_in_child(env_extra):
    env = {k: v for k, v in os.environ.items() if k not in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", tt_affinity.ENV)}
    env.update(env_extra)
    script = BIND_SCRIPT.format(scripts=str(REPO / "scripts" / "tinytransformer"))
    p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="Linux CPU affinity")
def test_bind_puts_every_thread_of_a_rank_on_its_share_and_off_leaves_it_alone():
    given = sorted(os.sched_getaffinity(0))
    expected = tt_affinity.split_cores(given, tt_affinity.read_core_map(given), len(given) - 1 if len(given) > 1
                                       else 0, 2)
    rank = str(len(given) - 1 if len(given) > 1 else 0)
    out = _bind_in_child({"LOCAL_RANK": rank, "LOCAL_WORLD_SIZE": "2"})
    assert out["before"] == given
    assert out["after"] == out["early"] == out["late"] == expected  # threads before and after the binding
    assert out["record"] == out["again"]
    assert out["record"]["mode"] == "cores" and out["record"]["cpus"] == tt_affinity.cpu_list(expected)
    if len(given) > 1:
        assert len(expected) < len(given)

    off = _bind_in_child({"LOCAL_RANK": rank, "LOCAL_WORLD_SIZE": "2", tt_affinity.ENV: "off"})
    assert off["after"] == off["early"] == given and off["record"]["mode"] == "off"
    assert off["record"]["cpus"] == tt_affinity.cpu_list(given)

    single = _bind_in_child({})  # no torchrun: one rank keeps every core
    assert single["after"] == given and single["record"]["local_world_size"] == 1


def test_harness_refuses_an_unknown_binding_from_the_environment(monkeypatch, capsys):
    import tt_harness
    monkeypatch.setenv(tt_affinity.ENV, "sockets")
    assert tt_harness.main(["--version", "v1", "--device", "cpu"]) == 2
    assert "TT_CPU_BINDING" in capsys.readouterr().err
