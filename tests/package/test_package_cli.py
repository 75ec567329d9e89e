"""Resources, `paths`, shipped names, `run --repo`, the counter check without --arch, and `install --madengine`."""

from __future__ import annotations

import json
import os
import sys

import pytest

from madengine_rocprof import resources
from madengine_rocprof.cli import main
from madengine_rocprof.registry import get_tool

from .package_helpers import mad_repo


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_checkout_resources_are_the_checkout(repo):
    assert repo == resources.ROOT and resources.SOURCE == "checkout"
    for rel in resources.RESOURCES:
        assert (repo / rel).exists(), rel


def test_paths_lists_every_shipped_config_and_counter_file(repo, capsys):
    code, out, _ = run(capsys, "paths")
    assert code == 0
    for path in list((repo / "profiling-configs").glob("rocprofv3_*.json")) + list((repo / "counters").glob("*.txt")):
        assert str(path) in out
    assert f"run --repo {repo}" in out


def test_paths_config_prints_one_path_and_suggests_on_typos(repo, capsys):
    code, out, _ = run(capsys, "paths", "--config", "rocprofv3_lightweight")
    assert code == 0 and out.strip() == str(repo / "profiling-configs" / "rocprofv3_lightweight.json")
    code, out, err = run(capsys, "paths", "--config", "rocprofv3_lightwieght")
    assert code != 0 and out == "" and "did you mean rocprofv3_lightweight?" in err


def test_validate_takes_shipped_names(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing of that name here
    code, out, _ = run(capsys, "validate", "rocprofv3_lightweight", "rocprofv3_compute_bound.json", "compute_bound.txt")
    assert code == 0 and out.count("OK ") == 3
    assert str(resources.CONFIGS_DIR / "rocprofv3_lightweight.json") in out


def test_counter_file_without_arch_is_checked_against_every_architecture(tmp_path, capsys, counter_defs):
    bad = tmp_path / "bad.txt"
    bad.write_text("pmc: SQ_WAVES NOT_A_COUNTER_X\npmc: SQ_WAVS\n")
    code, out, err = run(capsys, "validate", "--counter-defs", str(counter_defs), str(bad))
    assert code == 2 and out == ""
    assert "NOT_A_COUNTER_X is unknown on every architecture" in err and f"{bad}:1" in err
    assert "SQ_WAVS is unknown" in err and "did you mean SQ_WAVES?" in err and f"{bad}:2" in err
    good = tmp_path / "good.txt"
    good.write_text("pmc: SQ_WAVES TCC_EA0_RDREQ_sum\n")  # TCC_EA0_* exists on gfx942 only: fine without --arch
    code, out, _ = run(capsys, "validate", "--counter-defs", str(counter_defs), str(good))
    assert (
        code == 0
        and "every counter exists on some architecture" in out
        and "gfx90a" not in out.split("all of them on:")[1]
    )
    # per-architecture checks stay as they were
    code, _, err = run(capsys, "validate", "--arch", "gfx90a", "--counter-defs", str(counter_defs), str(good))
    assert code == 2 and "TCC_EA0_RDREQ_sum does not exist on gfx90a" in err


@pytest.fixture
def counter_defs(rocprof_fixtures):
    return rocprof_fixtures / "counter_defs.yaml"


def test_run_uses_the_current_directory_or_repo(tmp_path, capsys, monkeypatch):
    repo = mad_repo(tmp_path / "mad", performance=42)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, _, err = run(capsys, "run", "--tags", "m1", "--runner", "local", "--output-dir", str(tmp_path / "o1"))
    assert code == 2 and "models file not found" in err and "--repo DIR" in err and not (tmp_path / "o1").exists()
    code, out, _ = run(
        capsys, "run", "--repo", str(repo), "--tags", "m1", "--runner", "local", "--output-dir", str(tmp_path / "o2")
    )
    assert code == 0 and "m1" in (tmp_path / "o2" / "perf.csv").read_text()
    monkeypatch.chdir(repo)
    code, _, _ = run(capsys, "run", "--tags", "m1", "--runner", "local", "--output-dir", str(tmp_path / "o3"))
    assert code == 0 and "42" in (tmp_path / "o3" / "perf.csv").read_text()


def test_profiler_entries_keep_madengines_trace_post_script():
    post = {"path": "scripts/common/post_scripts/trace.sh", "args": "rocprof"}
    for name in ("rocprofv3_lightweight", "rocprofv3_compute", "lightweight"):
        entry = get_tool(name).madengine_entry()
        assert entry["post_scripts"].count(post) == 1 and "-d ./rocprof_output" in entry["cmd"]
    sampler = get_tool("gpu_info_power_profiler").madengine_entry()
    assert post not in sampler["post_scripts"] and sampler["cmd"] == ""


def _fake_madengine(tmp_path):
    """A madengine package in its own 'venv': a python launcher that sees it, and a `madengine` console script."""
    site = tmp_path / "madvenv" / "site"
    common = site / "madengine" / "scripts" / "common"
    common.mkdir(parents=True)
    (site / "madengine" / "__init__.py").write_text("")
    (common / "tools.json").write_text(
        json.dumps(
            {
                "tools": {
                    "rocprofv3_lightweight": {
                        "pre_scripts": [],
                        "cmd": "upstream",
                        "env_vars": {},
                        "post_scripts": [{"path": "scripts/common/post_scripts/trace.sh", "args": "rocprof"}],
                    }
                }
            }
        )
    )
    bindir = tmp_path / "madvenv" / "bin"
    bindir.mkdir()
    python = bindir / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    script = bindir / "madengine"
    script.write_text(f"#!{python}\nraise SystemExit(0)\n")
    script.chmod(0o755)
    return site / "madengine", python, bindir


def test_install_finds_madengine_behind_the_command_on_path(tmp_path, capsys, monkeypatch):
    package, _, bindir = _fake_madengine(tmp_path)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    code, out, _ = run(capsys, "install", "--madengine")
    assert code == 0 and f"madengine: {package}" in out
    tools = json.loads((package / "scripts" / "common" / "tools.json").read_text())["tools"]
    assert tools["rocprofv3_lightweight"]["cmd"].startswith("bash ../scripts/common/tools/rocprof_wrapper.sh")
    assert {"path": "scripts/common/post_scripts/trace.sh", "args": "rocprof"} in tools["rocprofv3_lightweight"][
        "post_scripts"
    ]
    assert len(list((package / "scripts" / "common").glob("tools.json.bak-*"))) == 1
    assert (package / "scripts" / "common" / "tools" / "madengine_rocprof_wrapper.pyz").is_file()


def test_install_with_madengine_python(tmp_path, capsys, monkeypatch):
    package, python, _ = _fake_madengine(tmp_path)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no madengine command
    code, out, _ = run(capsys, "install", "--madengine", "--madengine-python", str(python), "--dry-run")
    assert code == 0 and f"madengine: {package}" in out
    assert not list((package / "scripts" / "common").glob("tools.json.bak-*"))  # dry run: nothing written


def test_install_without_any_madengine_says_how(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no madengine command; this Python has no madengine
    code, out, err = run(capsys, "install", "--madengine")
    assert code == 2 and "--madengine-python" in err and "--madengine /path/to/madengine" in err


def test_multi_gpu_config_sets_the_rank_count_madengine_reads(repo):
    data = json.loads((repo / "profiling-configs" / "rocprofv3_multi_gpu.json").read_text())
    assert data["gpus_per_node"] == data["distributed"]["nproc_per_node"] == len(data["docker_gpus"].split(","))


def test_rank_counts_that_disagree_are_refused(tmp_path, capsys):
    repo = mad_repo(tmp_path / "mad", performance=42)
    ctx = json.dumps({"gpus_per_node": 2, "distributed": {"launcher": "torchrun", "nproc_per_node": 4}})
    code, _, err = run(
        capsys,
        "run",
        "--repo",
        str(repo),
        "--tags",
        "m1",
        "--runner",
        "local",
        "--additional-context",
        ctx,
        "--output-dir",
        str(tmp_path / "o"),
    )
    assert (
        code == 2 and "gpus_per_node 2 and distributed.nproc_per_node 4 differ" in err and not (tmp_path / "o").exists()
    )
