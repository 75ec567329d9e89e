"""Settings from environment variables (the embedded tracer's MADENGINE_ROCPROF_TRACER_*, the ncu bounds): one table
read with the input layer's rules. The wrapper refuses a bad value before the app starts (exit 2 naming the
variable); inside a workload the tracer warns and uses the default, and the app's own result stands.

Found by a red-team pass: `MADENGINE_ROCPROF_TRACER_STEPS=inf` (or `nan`, `1e400`) made the tracer fail to arm
with `OverflowError('cannot convert float infinity to integer')` and record nothing; `=-1` and `TRACER_CPU=2` were
taken silently; `MADENGINE_ROCPROF_NCU_LAUNCH_SKIP=abc` went straight to ncu's command line."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from madengine_rocprof import inputs, wrapper
from madengine_rocprof.errors import UserError
from madengine_rocprof.wrapper import nvidia
from madengine_rocprof.wrapper import tracer_settings as settings
from madengine_rocprof.wrapper.options import parse

from .contract_helpers import REPO

NUMBERS = ["SKIP_STEPS", "STEPS", "DELAY_S", "MAX_SECONDS", "MAX_KERNELS", "BUFFER_MB"]
FLAGS = ["CPU", "SHAPES", "TRUNCATE", "CORRELATION", "API", "MEMCPY", "STATS", "MANGLED", "NATIVE_ROWS"]
CHOICES = ["BACKEND", "API_DOMAIN", "API_RECORDER"]
BAD_NUMBERS = ["abc", "nan", "inf", "-inf", "1e400", "-1", "1_000", "٣", "0x10", "99999999999999999999999"]


def test_the_table_names_every_variable_the_tracer_documents():
    suffixes = {suffix for suffix, _r, _d in settings.TABLE.values()}
    assert set(NUMBERS) | set(FLAGS) | set(CHOICES) == suffixes
    from madengine_rocprof.tracer import native_rows, runtime

    for suffix in suffixes:
        assert settings.PREFIX + suffix in (runtime.__doc__ or "") + (native_rows.__doc__ or ""), suffix


@pytest.mark.parametrize("bad", BAD_NUMBERS)
@pytest.mark.parametrize("suffix", NUMBERS)
def test_bad_numbers_are_refused_naming_the_variable(suffix, bad):
    name = settings.PREFIX + suffix
    with pytest.raises(UserError) as caught:
        settings.check({name: bad})
    assert caught.value.where == name and caught.value.fix


@pytest.mark.parametrize("suffix", FLAGS)
@pytest.mark.parametrize("bad", ["2", "maybe", "-1", "y e s"])
def test_flags_are_on_or_off_only(suffix, bad):
    with pytest.raises(UserError, match="not on or off"):
        settings.check({settings.PREFIX + suffix: bad})


@pytest.mark.parametrize("suffix", CHOICES)
def test_choices_refuse_unknown_words(suffix):
    with pytest.raises(UserError, match="is not one of"):
        settings.check({settings.PREFIX + suffix: "bogus"})


def test_good_values_are_read_exactly():
    given = {"STEPS": " 12 ", "DELAY_S": "1.5e0", "CPU": "Yes", "API_DOMAIN": "DRIVER", "MAX_KERNELS": "",
             "STATS": "off"}
    env = {settings.PREFIX + suffix: value for suffix, value in given.items()}
    values = settings.read(env)
    assert (values["steps"], values["delay_s"], values["want_cpu"], values["api_domain"]) == (12, 1.5, True, "driver")
    assert values["max_kernels"] == 2_000_000 and values["stats"] is False and values["api_recorder"] == ""
    settings.check(env)  # nothing to refuse


def test_every_problem_is_named_at_once():
    env = {settings.PREFIX + "STEPS": "inf", settings.PREFIX + "CPU": "2"}
    with pytest.raises(UserError) as caught:
        settings.check(env)
    text = str(caught.value)
    assert settings.PREFIX + "STEPS" in text and settings.PREFIX + "CPU" in text


def test_inside_the_workload_a_bad_value_is_a_warning_and_the_default():
    warnings: list[str] = []
    values = settings.read({settings.PREFIX + "STEPS": "inf", settings.PREFIX + "DELAY_S": "nan"}, warn=warnings.append)
    assert values["steps"] == 0 and values["delay_s"] == 0.0
    assert len(warnings) == 2 and "MADENGINE_ROCPROF_TRACER_STEPS='inf'" in warnings[0]


def test_the_wrapper_refuses_a_bad_tracer_setting_before_the_app_starts(tmp_path):
    marker = tmp_path / "ran"
    env = {**os.environ, "MADENGINE_ROCPROF_TRACER_STEPS": "inf", "MADENGINE_ROCPROF_PROFILER": "embedded",
           "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "madengine_rocprof.wrapper", "-d", str(tmp_path / "out"), "--",
                           "touch", str(marker)], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "MADENGINE_ROCPROF_TRACER_STEPS" in done.stderr and "fix:" in done.stderr
    assert "Traceback" not in done.stderr
    assert not marker.exists() and not (tmp_path / "out").exists()


TRACED_APP = """
import torch
m = torch.nn.Linear(4, 4); o = torch.optim.SGD(m.parameters(), lr=0.1)
for _ in range(3):
    o.zero_grad(); m(torch.randn(2, 4)).sum().backward(); o.step()
print("APP DONE")
"""


def test_a_bad_value_set_inside_the_workload_still_traces(tmp_path):
    """The variable set behind the wrapper's back (after its check): the tracer warns, uses the default, records."""
    out = tmp_path / "out"
    env = {**os.environ, "MADENGINE_ROCPROF_TRACER_OUT": str(out), "MADENGINE_ROCPROF_TRACER_HOME": str(REPO),
           "PYTHONPATH": str(REPO / "madengine_rocprof" / "tracer" / "inject"), "CUDA_VISIBLE_DEVICES": "",
           "MADENGINE_ROCPROF_TRACER_STEPS": "inf", "MADENGINE_ROCPROF_TRACER_MAX_KERNELS": "nan"}
    done = subprocess.run([sys.executable, "-c", TRACED_APP], capture_output=True, text=True, env=env, timeout=180,
                          cwd=tmp_path)
    assert done.returncode == 0 and "APP DONE" in done.stdout, done.stderr
    assert "cannot arm the tracer" not in done.stderr, done.stderr
    assert "MADENGINE_ROCPROF_TRACER_STEPS='inf'" in done.stderr
    assert list(out.rglob("*_kernel_trace.csv")), (done.stderr, list(out.rglob("*")))


@pytest.mark.parametrize(("name", "bad"), [(nvidia.ENV_LAUNCH_SKIP, "abc"), (nvidia.ENV_LAUNCH_COUNT, "-3"),
                                           (nvidia.ENV_LAUNCH_COUNT, "1e400"), (nvidia.ENV_CLOCK, "turbo")])
def test_ncu_settings_are_checked_before_ncu_sees_them(name, bad):
    with pytest.raises(UserError) as caught:
        nvidia.ncu_argv("/bin/ncu", "compute_bound", "/tmp/out", parse(["--", "app"]), {name: bad})
    assert caught.value.where == name


def test_ncu_settings_that_are_fine_reach_ncu():
    argv = nvidia.ncu_argv("/bin/ncu", "compute_bound", "/tmp/out", parse(["--", "app"]),
                           {nvidia.ENV_LAUNCH_SKIP: "5", nvidia.ENV_LAUNCH_COUNT: " 20 ", nvidia.ENV_CLOCK: "base"})
    assert argv[argv.index("--launch-skip") + 1] == "5" and argv[argv.index("--launch-count") + 1] == "20"
    assert argv[argv.index("--clock-control") + 1] == "base"


def test_env_number_keeps_the_input_layer_rules():
    assert inputs.env_number({}, "X", 7) == 7
    assert inputs.env_number({"X": "3"}, "X", 7, integer=True) == 3
    with pytest.raises(UserError):
        inputs.env_number({"X": "3.5"}, "X", 7, integer=True)
    with pytest.raises(UserError):
        inputs.env_number({"X": "11"}, "X", 7, high=10)


def test_plan_reports_tracer_settings_as_bad_input():
    with pytest.raises(UserError, match="MADENGINE_ROCPROF_TRACER_BACKEND"):
        wrapper.plan([], ["true"], "/tmp/out", profiler="embedded",
                     env={**os.environ, "MADENGINE_ROCPROF_TRACER_BACKEND": "cuda"})
