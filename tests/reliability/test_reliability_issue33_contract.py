"""Issue 33, classes 7 and 8: bad input accepted or given the wrong exit code, and unclear messages. Each case is a
reproducer from the red team's report; each failed on the code before the fix."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from madengine_rocprof.cli import main as cli_main
from madengine_rocprof.errors import UserError
from madengine_rocprof.models import load_context
from madengine_rocprof.runner.chain import distributed_env

from ..insights.insights_builders import write_run
from .reliability_helpers import REPO


def _cli(*argv, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "madengine_rocprof", *map(str, argv)], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=120)


def test_validate_applies_runs_rank_count_check(tmp_path, capsys):
    context = tmp_path / "ctx.json"
    context.write_text(json.dumps({"gpus_per_node": 4, "distributed": {"launcher": "torchrun", "nproc_per_node": 2}}))
    with pytest.raises(UserError):  # what `run` refuses ...
        distributed_env(load_context(str(context), None)[0])
    assert cli_main(["validate", str(context)]) == 2  # ... `validate` refuses too
    assert "nproc_per_node" in capsys.readouterr().err


def test_a_kernel_filter_that_does_not_compile_is_refused_by_validate_and_register(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("MADENGINE_ROCPROF_HOME", str(tmp_path / "home"))
    tool = tmp_path / "tool.json"
    tool.write_text(json.dumps({"name": "my_filtered", "profiler": "rocprofv3", "trace": ["kernel"],
                                "kernel_include_regex": "("}))
    assert cli_main(["validate", str(tool)]) == 2
    assert "kernel_include_regex" in capsys.readouterr().err
    assert cli_main(["tools", "register", str(tool)]) == 2
    assert "not a regular expression" in capsys.readouterr().err
    assert not (tmp_path / "home").exists() or not any((tmp_path / "home").rglob("my_filtered*"))


@pytest.mark.parametrize("options", [
    ["--stats"],
    ["--pc-sampling-method", "stochastic", "--pc-sampling-unit", "time", "--pc-sampling-interval", "1024"],
    ["--pc-sampling-method", "host_trap", "--pc-sampling-unit", "cycles", "--pc-sampling-interval", "1"],
    ["--pc-sampling-method", "host_trap", "--pc-sampling-unit", "time", "--pc-sampling-interval", "1_000"],
    ["-i", "input.json", "--kernel-trace"],
])
def test_wrap_refuses_bad_options_with_exit_2_whatever_profiler_is_there(tmp_path, options):
    (tmp_path / "input.json").write_text(json.dumps({"jobs": [{"output_directory": "elsewhere",
                                                               "kernel_trace": True}]}))
    proc = _cli("wrap", *options, "--", "touch", "app_ran", cwd=tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 2, proc.stderr
    assert "fix:" in proc.stderr
    assert not (tmp_path / "app_ran").exists()


def test_schema_check_of_a_folder_or_a_pipe_is_bad_input_not_stale(tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (tmp_path, fifo):
        assert cli_main(["schema", "--check", "--path", str(path)]) == 2
        assert "not a regular file" in capsys.readouterr().err


def test_schema_write_failure_names_the_target_not_its_temporary_file(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert cli_main(["schema", "--write", "--path", str(blocker / "schema.json")]) == 2
    err = capsys.readouterr().err
    assert "schema.json" in err and ".tmp" not in err and "fix:" in err


def test_an_empty_pftrace_is_refused_not_reported_as_statistics(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.pftrace").write_bytes(b"")
    assert cli_main(["report", str(run), "-q"]) == 2
    err = capsys.readouterr().err
    assert "empty file" in err and "statistics" not in err


@pytest.mark.parametrize("text", ["// a note\n{\"gpu_vendor\": \"AMD\"}\n", "{\n// a note\n\"gpu_vendor\": \"AMD\"}",
                                  "null\n", "42\n", "\"text\"\n", "true\n"])
def test_a_config_that_is_not_a_json_object_is_not_called_a_counter_file(tmp_path, capsys, text):
    config = tmp_path / "config.json"
    config.write_text(text)
    assert cli_main(["validate", str(config)]) == 2
    err = capsys.readouterr().err
    assert "counter file" not in err and "fix:" in err
    assert ("comment" in err) if "//" in text else ("top level must be a JSON object" in err)


def test_a_huge_echoed_value_is_cut_and_many_problems_are_summarised(tmp_path, capsys):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [{"match": "(" + "a" * 2_000_000, "category": "GEMM"}]}))
    assert cli_main(["kernels", "check", str(rules)]) == 2
    err = capsys.readouterr().err
    assert len(err) < 5000 and "characters not shown" in err and "fix:" in err
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"tools": [{"name": "k" * 2_000_000}]}))
    assert cli_main(["validate", str(config)]) == 2
    assert len(capsys.readouterr().err) < 5000
    counters = tmp_path / "dups.txt"
    counters.write_text("".join("pmc: SQ_WAVES\n" for _ in range(100_000)))
    assert cli_main(["validate", str(counters)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") < 60 and "99,9" in err and "more problem" in err


HOSTILE = "<script>alert(1)</script>_kernel\x1b[31mred\x07"


def test_markdown_files_carry_no_html_tags_or_control_bytes_from_kernel_names(tmp_path, capsys):
    runs = [write_run(tmp_path / side, step_times=[1.0, 1.1, 1.2], kernels={HOSTILE: [1000, 1100], "ok": [10, 11]})
            for side in ("base", "new")]
    assert cli_main(["report", str(runs[0]), "-q", "--markdown", str(tmp_path / "r.md")]) == 0
    assert cli_main(["compare", *map(str, runs), "-q", "--markdown", str(tmp_path / "c.md")]) == 0
    assert cli_main(["kernels", "classify", HOSTILE]) == 0
    for text in ((tmp_path / "r.md").read_text(), (tmp_path / "c.md").read_text(), capsys.readouterr().out):
        assert "<script" not in text and "</script" not in text and "\x1b" not in text and "\x07" not in text
        assert "&lt;script>" in text and "\\x1b" in text
