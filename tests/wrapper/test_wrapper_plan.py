"""Planning details: embedded-tracer environment, output naming, detection fallbacks."""
from __future__ import annotations

import os

import pytest

from madengine_rocprof import wrapper
from madengine_rocprof.errors import UserError
from madengine_rocprof.wrapper import detect


def test_collection_period_becomes_the_tracer_window(make_env):
    p = wrapper.plan(["--kernel-trace", "-P", "500:2000", "--collection-period-unit", "msec"], ["python3", "x.py"],
                     "/o", env=make_env(MADENGINE_ROCPROF_PROFILER="embedded"))
    assert float(p.env_added["MADENGINE_ROCPROF_TRACER_DELAY_S"]) == pytest.approx(0.5)
    assert float(p.env_added["MADENGINE_ROCPROF_TRACER_MAX_SECONDS"]) == pytest.approx(2.0)


def test_embedded_keeps_the_users_pythonpath_after_the_injector(make_env):
    p = wrapper.plan(["--kernel-trace", "-T"], ["python3"], "/o", env=make_env(PYTHONPATH="/mine"))
    first, rest = p.env_added["PYTHONPATH"].split(os.pathsep, 1)
    assert os.path.isfile(os.path.join(first, "sitecustomize.py")) and rest == "/mine"
    assert p.env_added["MADENGINE_ROCPROF_TRACER_TRUNCATE"] == "1"


@pytest.mark.parametrize("args, profile, match", [
    (["--pmc", "SQ_WAVES"], "lightweight", "no equivalent for: --pmc"),
    (["--kernel-trace"], "compute_bound", "records kernel traces only"),
])
def test_embedded_refuses_what_it_cannot_do(make_env, args, profile, match):
    env = make_env(MADENGINE_ROCPROF_PROFILER="embedded", MADENGINE_ROCPROF_PROFILE=profile)
    with pytest.raises(UserError, match=match):
        wrapper.plan(args, ["python3"], "/o", env=env)


def test_template_keys_in_o_are_kept_but_not_in_d(make_env):
    env = make_env("rocprofv3")
    p = wrapper.plan(["--kernel-trace", "-o", "%hostname%/rank%rank%_%pid%"], ["x"], "/o", env=env)
    assert p.argv[p.argv.index("--output-file") + 1] == "%hostname%/rank%rank%_%pid%"
    with pytest.raises(UserError, match="template key"):
        wrapper.plan(["--kernel-trace", "-d", "out/%hostname%"], ["x"], env=env)


def test_unknown_profiler_name_and_version_probe_order(make_env):
    with pytest.raises(UserError, match="unknown profiler `rocprofv4`"):
        wrapper.plan(["--kernel-trace"], ["x"], "/o", env=make_env(MADENGINE_ROCPROF_PROFILER="rocprofv4"))
    prof = detect.find("rocprofv3", make_env("rocprofv3", FAKE_ROCPROF_VERSION="6.4.0"))
    assert prof is not None
    assert prof.release == (6, 4) and prof.probes[0].startswith("`rocprofv3 --version` exit 2")
    prof = detect.find("rocprofv3", make_env("rocprofv3", FAKE_ROCPROF_VERSION="7.1.0"))
    assert prof is not None
    assert (prof.release, prof.version) == ((7, 1), "7.1.0") and len(prof.probes) == 1


def test_no_filter_keeps_noise_on_the_console(tmp_path, make_env, capfd):
    result = wrapper.run(["--kernel-trace", "-f", "rocpd", "--no-filter"], ["true"], str(tmp_path / "o"),
                         env=make_env("rocprofv3"), cwd=str(tmp_path))
    assert result.outcome == "ok"
    assert capfd.readouterr().err.count("sql text value") == 3
    assert not (tmp_path / "o" / "wrapper_filtered.log").exists()
