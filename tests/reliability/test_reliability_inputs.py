"""Issue 14, items 6 and 7: input that validates also runs (one check of strings for `validate` and `run`), and
every command turns hostile input and unusual file-system states into the standard message and exit code 2:
never a traceback, never a partial write."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from madengine_rocprof.cli import main as cli_main

DOCS_DATA = Path(__file__).resolve().parents[1] / "fixtures" / "rocprofv3" / "docs-data"  # real rocprofv3 outputs
DEEP = "[" * 100_000 + "]" * 100_000
BAD_CHARS = st.sampled_from(["\x00", "\ud800", "\udfff", "\udc80"])
FIELDS = st.sampled_from([("env_vars", "X"), ("docker_env_vars", "Y"), ("model_args", None),
                          ("tools", "env_vars")])


def _context(field: tuple[str, str | None], value: str) -> dict:
    key, sub = field
    if key == "tools":
        return {"tools": [{"name": "gpu_info_power_profiler", "env_vars": {"POWER_X": value}}]}
    return {key: value} if sub is None else {key: {sub: value}}


def _cli(capsys, *argv: str) -> tuple[int, str]:
    code = cli_main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=FIELDS, bad=BAD_CHARS, before=st.text("ab c", max_size=3), after=st.text("xy", max_size=3))
def test_validate_and_run_refuse_the_same_unusable_strings(models, tmp_path, capsys, field, bad, before, after):
    ctx_file = tmp_path / "ctx.json"
    ctx_file.write_text(json.dumps(_context(field, before + bad + after)))  # \u escapes: valid JSON
    out = tmp_path / "out"
    v_code, v_text = _cli(capsys, "validate", str(ctx_file))
    r_code, r_text = _cli(capsys, "run", "--tags", "ok_model", "--models", str(models), "--runner", "local",
                          "--output-dir", str(out), "--additional-context-file", str(ctx_file))
    assert v_code == r_code == 2, (v_text, r_text)
    assert ("NUL" in v_text or "surrogate" in v_text) and v_text.splitlines()[0] == r_text.splitlines()[0]
    assert not out.exists()


def test_a_models_file_with_a_nul_is_refused(models, tmp_path, capsys):
    models.write_text(models.read_text().replace('"args": ""', '"args": "--x \\u0000"', 1))
    code, text = _cli(capsys, "run", "--tags", "reltest", "--models", str(models), "--output-dir", str(tmp_path / "o"))
    assert code == 2 and "NUL" in text and "[0].args" in text


def _tiny_run(root: Path) -> Path:
    run = root / "run"
    run.mkdir()
    shutil.copy(DOCS_DATA / "kernel_trace.csv", run / "kernel_trace.csv")
    return run


def _fake_madengine(root: Path) -> Path:
    (root / "scripts" / "common").mkdir(parents=True)
    (root / "scripts" / "common" / "tools.json").write_text('{"tools": {}}')
    return root


# Every command that reads a JSON file, given one nested 100,000 levels deep.
DEEP_READERS = {
    "validate": lambda d, m: ["validate", str(d)],
    "run --additional-context-file": lambda d, m: ["run", "--tags", "ok_model", "--models", str(m),
                                                   "--additional-context-file", str(d)],
    "run --models": lambda d, m: ["run", "--tags", "ok_model", "--models", str(d)],
    "tools register": lambda d, m: ["tools", "register", str(d)],
}


@pytest.mark.parametrize("command", sorted(DEEP_READERS))
def test_deeply_nested_json_is_a_clear_error(models, tmp_path, capsys, monkeypatch, command):
    monkeypatch.setenv("MADENGINE_ROCPROF_HOME", str(tmp_path / "home"))
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    code, text = _cli(capsys, *DEEP_READERS[command](deep, models))
    assert code == 2 and "nested too deeply" in text and str(deep) in text


def test_install_and_report_survive_deep_json(tmp_path, capsys):
    mad = _fake_madengine(tmp_path / "mad")
    (mad / "scripts" / "common" / "tools.json").write_text(DEEP)
    code, text = _cli(capsys, "install", "--madengine", str(mad))
    assert code == 2 and "nested too deeply" in text
    run = _tiny_run(tmp_path)
    (run / "manifest.json").write_text("{\"outputs\": " + DEEP + "}")
    code = cli_main(["report", str(run), "-q"])
    assert code in (0, 2)  # read or refused, never a traceback


def _writers(tmp_path: Path, models: Path) -> dict:
    """command name -> argv writing into the folder TARGET (a placeholder replaced per state)."""
    tool = tmp_path / "mytool.json"
    tool.write_text(json.dumps({"name": "my_tool", "profiler": "rocprofv3", "trace": ["kernel"]}))
    run = _tiny_run(tmp_path)
    return {
        "export-tools": ["export-tools", "TARGET/tools.json"],
        "report --json": ["report", str(run), "-q", "--json", "TARGET/report.json"],
        "report --perfetto": ["report", str(run), "-q", "--perfetto", "TARGET/traces"],
        "schema --write": ["schema", "--write", "--path", "TARGET/schema.json"],
        "run --output-dir": ["run", "--tags", "ok_model", "--models", str(models), "--runner", "local", "--quiet",
                             "--output-dir", "TARGET/out"],
        "wrap -d": ["wrap", "--profiler", "embedded", "--kernel-trace", "-d", "TARGET/out", "--", "true"],
        "tools register (home)": ["tools", "register", str(tool)],
        "counters register (home)": ["counters", "register", str(Path(__file__).parents[2] / "counters" /
                                                                  "compute_bound.txt")],
    }


@pytest.fixture
def read_only_dir(tmp_path):
    mount = tmp_path / "ro"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a read-only tmpfs here")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], capture_output=True)


STATES = ["file in the way", "name too long", "read-only"]
WRITERS = ["export-tools", "report --json", "report --perfetto", "schema --write", "run --output-dir", "wrap -d",
           "tools register (home)", "counters register (home)"]


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("command", WRITERS)
def test_every_writing_command_reports_file_system_refusals(models, tmp_path, capsys, monkeypatch, request,
                                                            state, command):
    if state == "file in the way":
        target = tmp_path / "a_file"
        target.write_text("not a folder")
    elif state == "name too long":
        target = tmp_path / ("n" * 300)
    else:
        target = request.getfixturevalue("read_only_dir")
    monkeypatch.setenv("MADENGINE_ROCPROF_HOME", str(target / "home"))
    argv = [a.replace("TARGET", str(target)) for a in _writers(tmp_path, models)[command]]
    code, text = _cli(capsys, *argv)
    assert code == 2, text
    assert "error" in text and "Traceback" not in text
    if state == "file in the way":
        assert (tmp_path / "a_file").read_text() == "not a folder"


@pytest.mark.parametrize("command", [["tools", "list"], ["counters", "list"],
                                     ["tools", "show", "rocprofv3_lightweight"], ["export-tools", "OUT"]])
def test_a_home_that_is_a_file_is_a_clear_error(tmp_path, capsys, monkeypatch, command):
    home = tmp_path / "home"
    home.write_text("a file")
    monkeypatch.setenv("MADENGINE_ROCPROF_HOME", str(home))
    code, text = _cli(capsys, *[a.replace("OUT", str(tmp_path / "t.json")) for a in command])
    assert code in (0, 2) and "Traceback" not in text  # a home with nothing registered may simply be empty
