"""Cases a red-team pass over the configs, the registry, the runner and the wrapper found (2026-11-26), kept so they
stay fixed. Each failed on main before its fix; the pass and its counts: docs/architecture.md, "Red-team passes"."""
from __future__ import annotations

import json
import os

import pytest

from madengine_rocprof import wrapper
from madengine_rocprof.errors import UserError

from .contract_helpers import assert_contract, cli, time_limit


@pytest.mark.parametrize("option", ["--timeout", "--hook-timeout"])
@pytest.mark.parametrize("value", ["nan", "inf", "1e309", "-inf", "1e12"])
def test_a_time_limit_that_is_not_a_finite_number_of_seconds_is_refused(models, tmp_path, option, value):
    """`run --timeout nan` reached run.json's strict JSON writer: an internal error instead of a clear refusal."""
    code, _out, err = cli("run", "--tags", "ok_model", "--runner", "local", "--repo", models.parent,
                          "--output-dir", tmp_path / "out", f"{option}={value}")
    assert_contract(code, err, allowed=(2,))
    assert option in err and "fix:" in err
    assert not (tmp_path / "out").exists()


@pytest.fixture
def special_inputs(tmp_path):
    fifo = tmp_path / "fifo.txt"
    os.mkfifo(fifo)
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"pmc: SQ_WAVES \xe9\n")
    return {"/dev/zero": "/dev/zero", "fifo": str(fifo), "latin1": str(latin1), "folder": str(tmp_path)}


@pytest.mark.parametrize("which", ["/dev/zero", "fifo", "latin1", "folder"])
def test_the_wrappers_input_file_goes_through_the_input_layer(special_inputs, tmp_path, which):
    """`rocprof_wrapper.sh -i /dev/zero -- app` (or a FIFO) hung before the app started; a non-UTF-8 file was a
    traceback."""
    with time_limit(30), pytest.raises(UserError) as caught:
        wrapper.plan(["-i", special_inputs[which]], ["true"], str(tmp_path / "out"), profiler="embedded")
    assert caught.value.where == "--input" and caught.value.file == special_inputs[which]
    assert caught.value.fix


def test_a_json_input_file_that_is_a_fifo_is_refused_too(tmp_path):
    fifo = tmp_path / "job.json"
    os.mkfifo(fifo)
    with time_limit(30), pytest.raises(UserError, match="FIFO"):
        wrapper.plan(["-i", str(fifo)], ["true"], str(tmp_path / "out"), profiler="embedded")


def test_a_missing_input_file_is_named(tmp_path):
    with pytest.raises(UserError, match="not found") as caught:
        wrapper.plan(["-i", str(tmp_path / "absent.json")], ["true"], str(tmp_path / "out"), profiler="embedded")
    assert caught.value.where == "--input"


@pytest.mark.parametrize("tool", [{"name": "bare"}, {"name": "mytool", "description": "only a name"}])
def test_validate_checks_a_tool_file_as_register_will(tmp_path, tool):
    """A tool file with a name and nothing to collect validated as a context (exit 0), then failed to register."""
    path = tmp_path / "tool.json"
    path.write_text(json.dumps(tool))
    v_code, _out, v_err = cli("validate", path)
    r_code, _out, r_err = cli("tools", "register", path)
    assert_contract(v_code, v_err, allowed=(2,))
    assert_contract(r_code, r_err, allowed=(2,))
    assert "needs something to collect" in v_err and "needs something to collect" in r_err


def test_doctor_names_tracer_settings_the_wrapper_will_refuse(monkeypatch):
    monkeypatch.setenv("MADENGINE_ROCPROF_TRACER_STEPS", "abc")
    monkeypatch.setenv("MADENGINE_ROCPROF_PROFILER", "embedded")
    code, out, err = cli("doctor", "--json")
    assert_contract(code, err, allowed=(0,))
    assert "MADENGINE_ROCPROF_TRACER_STEPS" in json.loads(out)["tracer_settings_error"]


@pytest.mark.parametrize(("slurm", "where"), [({"partition": "gpu\ntouch /tmp/pwned #"}, "slurm.partition"),
                                              ({"account": "a\rb"}, "slurm.account"),
                                              ({"constraint": "x\x0by"}, "slurm.constraint")])
def test_a_line_break_in_an_sbatch_option_cannot_inject_shell_code(slurm, where):
    """`#SBATCH --partition='gpu<newline>touch /tmp/pwned #'`: the `#` comments out the first line only, so the rest
    of the quoted value ran as a line of the batch script."""
    from madengine_rocprof.models.context import AdditionalContext
    from madengine_rocprof.runner import slurm_jobs

    ctx = AdditionalContext.model_validate({"slurm": {"nodes": 1, **slurm}})
    with pytest.raises(UserError) as caught:
        slurm_jobs.job_settings(ctx, 600, None)
    assert caught.value.where == where and caught.value.fix


def test_every_sbatch_header_line_is_one_line():
    from madengine_rocprof.models.context import AdditionalContext
    from madengine_rocprof.runner import slurm_jobs

    job = slurm_jobs.job_settings(AdditionalContext.model_validate({"slurm": {"nodes": 1, "qos": "high"}}), 600, None)
    with pytest.raises(UserError, match="line break"):
        slurm_jobs.batch_script(job, name="m", workspace="/shared/a\nb", plugin="/p", env={}, title="t")
    script = slurm_jobs.batch_script(job, name="m", workspace="/shared/run", plugin="/p", env={}, title="a\nb")
    header = script.split("\n\n")[0].splitlines()
    assert all(line.startswith(("#!", "#SBATCH --")) for line in header), header
    assert "#SBATCH --qos=high" in header and "# a b" in script


@pytest.mark.parametrize("value", ["99999999999999999999999", "abc", "-5", "1.5"])
def test_a_bad_input_size_limit_is_named(tmp_path, monkeypatch, value):
    """MADENGINE_ROCPROF_MAX_INPUT_MB=99999999999999999999999 overflowed the read (an internal error); text was
    ignored without a word."""
    monkeypatch.setenv("MADENGINE_ROCPROF_MAX_INPUT_MB", value)
    config = tmp_path / "c.json"
    config.write_text('{"tools": [{"name": "rocprofv3_lightweight"}]}')
    code, _out, err = cli("validate", config)
    assert_contract(code, err, allowed=(2,))
    assert "MADENGINE_ROCPROF_MAX_INPUT_MB" in err


def test_a_good_input_size_limit_applies(tmp_path, monkeypatch):
    config = tmp_path / "c.json"
    config.write_text('{"tools": [{"name": "rocprofv3_lightweight"}], "_pad": "' + "x" * (2 << 20) + '"}')
    monkeypatch.setenv("MADENGINE_ROCPROF_MAX_INPUT_MB", "1")
    code, _out, err = cli("validate", config)
    assert code == 2 and "over the limit" in err
    monkeypatch.setenv("MADENGINE_ROCPROF_MAX_INPUT_MB", "3")
    assert cli("validate", config)[0] == 0


@pytest.mark.parametrize("how", ["--profiler=abc", "env"])
def test_doctor_with_an_unknown_profiler_name_is_bad_input_not_no_profiler(monkeypatch, how):
    """doctor answered every refusal with 127 (no profiler fits), a bad name too."""
    argv = ["doctor"]
    if how == "env":
        monkeypatch.setenv("MADENGINE_ROCPROF_PROFILER", "abc")
    else:
        argv.append(how)
    code, _out, err = cli(*argv)
    assert_contract(code, err, allowed=(2,))
    assert "unknown profiler" in err


def test_a_failed_rerun_never_deletes_the_run_recorded_before_it(models, tmp_path):
    """A rerun replaced its run directory before it started: a rerun that failed (a pre-script, a bad cmd) had
    already deleted the profile recorded by the run before it. The previous run now waits in <out>/.previous until
    a rerun succeeds, and report discovery does not count it twice."""
    out = tmp_path / "out"
    fail = models.parent / "scripts" / "fail_pre.sh"
    fail.write_text("exit 7\n")
    base = ("run", "--tags", "ok_model", "--runner", "local", "--repo", models.parent, "--output-dir", out, "--quiet")
    failing = ("--additional-context", json.dumps({"pre_scripts": [{"path": "scripts/fail_pre.sh"}]}))
    assert cli(*base)[0] == 0
    ws = next(p for p in out.iterdir() if p.is_dir())
    (ws / "profiler" / "recorded.csv").write_text("a profile\n")
    for _ in range(2):  # the second failed rerun does not push the recorded run out either
        code, _out, err = cli(*base, *failing)
        assert_contract(code, err, allowed=(1,))
        kept = out / ".previous" / ws.name
        assert (kept / "profiler" / "recorded.csv").read_text() == "a profile\n"
    assert cli(*base)[0] == 0  # a successful rerun supersedes it
    assert not (out / ".previous").exists() and not (ws / "profiler" / "recorded.csv").exists()


def test_a_rerun_that_cannot_make_its_run_directory_puts_the_previous_one_back(models, tmp_path, monkeypatch):
    from madengine_rocprof.runner import lifecycle

    out = tmp_path / "out"
    base = ("run", "--tags", "ok_model", "--runner", "local", "--repo", models.parent, "--output-dir", out, "--quiet")
    assert cli(*base)[0] == 0
    ws = next(p for p in out.iterdir() if p.is_dir())
    (ws / "profiler" / "recorded.csv").write_text("a profile\n")

    def full_disk(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(lifecycle.shutil, "copytree", full_disk)
    code, _out, err = cli(*base)
    assert_contract(code, err, allowed=(2,))
    assert (ws / "profiler" / "recorded.csv").read_text() == "a profile\n"


@pytest.mark.parametrize(("context", "where"), [({"docker_gpus": "abc"}, "docker_gpus"),
                                                ({"docker_gpus": "1-0"}, "docker_gpus"),
                                                ({"docker_cpus": "-3"}, "docker_cpus"),
                                                ({"docker_mounts": {"relative": "/tmp"}}, "docker_mounts"),
                                                ({"docker_build_arg": {"": "x"}}, "docker_build_arg"),
                                                ({"model_args": '--a "b'}, "model_args")])
def test_validate_refuses_what_run_refuses(models, tmp_path, context, where):
    """`validate` passed contexts that `run` then refused (docker_gpus "abc", an unclosed quote in model_args), or
    that docker would refuse (a relative container path, an empty build argument name)."""
    config = tmp_path / "c.json"
    config.write_text(json.dumps(context))
    v_code, _out, v_err = cli("validate", config)
    r_code, _out, r_err = cli("run", "--tags", "ok_model", "--runner", "local", "--repo", models.parent,
                              "--output-dir", tmp_path / "out", "--additional-context-file", config)
    assert_contract(v_code, v_err, allowed=(2,))
    assert_contract(r_code, r_err, allowed=(2,))
    assert where in v_err and where in r_err and str(config) in v_err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("name", "value"), [("MADENGINE_ROCPROF_PYTHON", "/nonexistent/python3"),
                                             ("MADENGINE_ROCPROF_PYTHON", "/dev/null"),
                                             ("MADENGINE_ROCPROF_PYTHON", "python3 -u"),
                                             ("MADENGINE_ROCPROF_WRAPPER", "/nonexistent.pyz")])
def test_the_wrapper_script_names_a_bad_python_or_wrapper(tmp_path, name, value):
    """bash's own `exec: /dev/null: cannot execute: Permission denied` (exit 126) or python's `can't open file`
    named neither the variable nor the fix."""
    import subprocess

    from .contract_helpers import REPO

    done = subprocess.run(["bash", str(REPO / "scripts" / "rocprof_wrapper.sh"), "--dry-run", "--", "true"],
                          capture_output=True, text=True, env={**os.environ, name: value}, timeout=60, cwd=tmp_path)
    assert done.returncode == 127, done.stderr
    assert f"error: {name}: '{value}'" in done.stderr and "fix:" in done.stderr


def test_export_tools_writes_no_tools_json_when_the_wrapper_cannot_be_placed(tmp_path):
    """`export-tools --wrapper-dir DIR OUT` wrote OUT, then failed on DIR: exit 2 with a tools.json naming a wrapper
    that was never placed."""
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the wrapper folder should be")
    out = tmp_path / "tools.json"
    code, _out, err = cli("export-tools", "--wrapper-dir", blocker / "tools", out)
    assert_contract(code, err, allowed=(2,))
    assert not out.exists()


def test_install_that_cannot_place_the_wrapper_changes_nothing(tmp_path):
    """A failed install left a tools.json.bak-* beside an unchanged tools.json."""
    root = tmp_path / "madengine"
    tools_json = root / "scripts" / "common" / "tools.json"
    tools_json.parent.mkdir(parents=True)
    tools_json.write_text('{"tools": {"trace": {"cmd": "bash trace.sh"}}}')
    (tools_json.parent / "tools").write_text("a file where the tools folder should be")
    code, _out, err = cli("install", "--madengine", root)
    assert_contract(code, err, allowed=(2,))
    assert sorted(p.name for p in tools_json.parent.iterdir()) == ["tools", "tools.json"]
    assert tools_json.read_text() == '{"tools": {"trace": {"cmd": "bash trace.sh"}}}'


def test_a_fifo_in_the_script_folder_is_refused_before_anything_is_written(models, tmp_path):
    """The script folder is copied into the run directory; a FIFO in it stopped the copy with the fix for a full
    disk, after the output folder was made."""
    os.mkfifo(models.parent / "scripts" / "ok" / "pipe")
    out = tmp_path / "out"
    code, _out, err = cli("run", "--tags", "ok_model", "--runner", "local", "--repo", models.parent,
                          "--output-dir", out)
    assert_contract(code, err, allowed=(2,))
    assert "pipe" in err and "free space" not in err
    assert not out.exists()


def test_the_tracer_loads_no_native_library_from_a_folder_others_can_write(tmp_path, monkeypatch):
    """The native recorder's fallback cache is /tmp/madengine-rocprof-<uid>, in a folder everyone can write: a
    library planted there by another user first was loaded into the workload as it was."""
    from madengine_rocprof.tracer import api_recorder

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    source = api_recorder.SOURCE
    first = api_recorder.build(source, folder=tmp_path / "mine")  # the real build, in a folder of ours
    planted = shared / first.name
    planted.write_bytes(b"not the recorder")
    monkeypatch.setattr(api_recorder, "compiler", lambda env=None: None)  # nothing could be built there either
    with pytest.raises(api_recorder.Unavailable):
        api_recorder.build(source, folder=shared)
    assert api_recorder.build(source, folder=tmp_path / "mine") == first  # ours is still used


@pytest.mark.parametrize("command", [("counters", "register"), ("counters", "check"), ("validate",)])
@pytest.mark.parametrize("stem", ["we ird;name", "-x", "ü", ".hidden"])
def test_a_counter_file_whose_name_cannot_name_a_profile_is_bad_input(tmp_path, command, stem):
    """A counter file named `my counters.txt` (or `ü.txt`) reached the profile model unchecked: a pydantic
    ValidationError, an internal error."""
    path = tmp_path / f"{stem}.txt"
    path.write_text("# architectures: gfx942\npmc: SQ_WAVES\n")
    code, _out, err = cli(*command, "--", path)
    assert_contract(code, err, allowed=(2,))
    assert "cannot name a counter profile" in err and "rename the file" in err


def test_a_local_run_of_a_tool_this_machine_cannot_run_is_refused_before_anything_runs(models, tmp_path,
                                                                                       monkeypatch):
    """A counters tool on a machine without rocprofv3 or ncu: `validate` said OK, and `run --runner local` ran the
    workload, made a run directory and failed with no_profiler (exit 1). Now validate notes it, run refuses it."""
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no profiler on PATH
    monkeypatch.setenv("MADENGINE_ROCPROF_PROFILER", "")
    from madengine_rocprof.wrapper import detect

    if any(detect.find(name, os.environ) for name in ("rocprofv3", "rocprof", "ncu")):
        pytest.skip("a counter profiler is installed here")
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"tools": [{"name": "rocprofv3_compute"}]}))
    v_code, _out, v_err = cli("validate", config)
    assert v_code == 0 and "rocprofv3_compute' cannot run on this machine" in v_err
    out = tmp_path / "out"
    code, _out, err = cli("run", "--tags", "ok_model", "--runner", "local", "--repo", models.parent,
                          "--output-dir", out, "--additional-context-file", config)
    assert_contract(code, err, allowed=(2,))
    assert "cannot run on this machine" in err and "--runner docker" in err
    assert not out.exists()


@pytest.mark.parametrize("rate", ["nan", "inf", "abc", "0"])
def test_a_sampling_rate_the_sampler_cannot_use_is_refused_before_the_run(models, tmp_path, rate):
    """POWER_SAMPLING_RATE=nan passed the sampler's `<= 0` check: time.sleep(nan) killed it in the background (inf:
    it never woke), and the run went on without samples."""
    context = {"tools": [{"name": "gpu_info_power_profiler", "env_vars": {"POWER_SAMPLING_RATE": rate}}]}
    out = tmp_path / "out"
    code, _out, err = cli("run", "--tags", "ok_model", "--runner", "local", "--repo", models.parent,
                          "--output-dir", out, "--additional-context", json.dumps(context))
    assert_contract(code, err, allowed=(2,))
    assert "gpu_info_power_profiler" in err and "POWER_SAMPLING_RATE" in err
    assert not out.exists()
    from madengine_rocprof.samplers.__main__ import parse_args

    with pytest.raises(SystemExit):
        parse_args(["power", "--rate", rate if rate != "abc" else "nan"])
