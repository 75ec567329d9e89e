"""`madengine-rocprof wrap`, `doctor` and `install --madengine`."""
from __future__ import annotations

import json

import pytest

from madengine_rocprof.cli import main


def test_wrap_passes_everything_through(tmp_path, make_env, monkeypatch, capsys):
    for key, value in make_env("rocprofv3").items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)
    code = main(["wrap", "--kernel-trace", "-d", "o", "--dry-run", "--", "python3", "x.py", "--", "-h"])
    assert code == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["app_argv"] == ["python3", "x.py", "--", "-h"]
    assert plan["output_dir"] == str(tmp_path / "o")
    assert main(["wrap", "--kernel-trace", "python3", "x.py"]) == 2
    assert "fix: madengine-rocprof wrap --kernel-trace -- python3 x.py" in capsys.readouterr().err


def test_doctor_reports_choice_and_override(make_env, monkeypatch, capsys):
    for key, value in make_env("rocprofv3", "ncu").items():
        monkeypatch.setenv(key, value)
    assert main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["chosen"]["name"] == "rocprofv3" and "--version" in report["chosen"]["why"]
    assert {r["name"]: r["found"] for r in report["found"]} == {"rocprofv3": True, "rocprof": False, "ncu": True,
                                                               "nsys": False, "embedded": True}
    monkeypatch.setenv("MADENGINE_ROCPROF_PROFILER", "embedded")
    assert main(["doctor"]) == 0
    assert "chosen: embedded -- chosen by MADENGINE_ROCPROF_PROFILER=embedded" in capsys.readouterr().out
    assert main(["doctor", "--profiler", "nsys"]) == 127


def test_install_into_madengine_with_backup(tmp_path, capsys):
    pytest.importorskip("pydantic")
    root = tmp_path / "madengine"
    tools_json = root / "scripts" / "common" / "tools.json"
    tools_json.parent.mkdir(parents=True)
    original = {"tools": {"rocprof": {"cmd": "bash ../scripts/common/tools/rocprof_wrapper.sh --runtime-trace --"},
                          "trace": {"cmd": "bash ../scripts/common/tools/trace.sh"}}}
    tools_json.write_text(json.dumps(original))
    assert main(["install", "--madengine", str(root)]) == 0
    merged = json.loads(tools_json.read_text())
    assert merged["tools"]["trace"] == original["tools"]["trace"]  # madengine's other tools are kept
    assert "rocprofv3_compute" in merged["tools"]
    assert "rocprof_wrapper.sh" in merged["tools"]["rocprof"]["cmd"]
    [backup] = list(tools_json.parent.glob("tools.json.bak-*"))
    assert json.loads(backup.read_text()) == original
    tools_dir = tools_json.parent / "tools"
    assert (tools_dir / "rocprof_wrapper.sh").exists() and (tools_dir / "madengine_rocprof_wrapper.pyz").exists()
    assert (tools_dir / "counters" / "compute_bound.txt").exists()


def test_install_refuses_a_folder_without_tools_json(tmp_path, capsys):
    assert main(["install", "--madengine", str(tmp_path)]) == 2
    assert "no scripts/common/tools.json" in capsys.readouterr().err


def test_install_twice_in_one_second_keeps_the_original_backup(tmp_path, capsys, monkeypatch):
    pytest.importorskip("pydantic")
    import datetime as real_dt

    from madengine_rocprof.cli import install

    class FrozenDatetime(real_dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return real_dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=tz)

    monkeypatch.setattr(install.dt, "datetime", FrozenDatetime)
    root = tmp_path / "madengine"
    tools_json = root / "scripts" / "common" / "tools.json"
    tools_json.parent.mkdir(parents=True)
    original = {"tools": {"trace": {"cmd": "bash ../scripts/common/tools/trace.sh"}}}
    tools_json.write_text(json.dumps(original))
    assert main(["install", "--madengine", str(root)]) == 0
    assert main(["install", "--madengine", str(root)]) == 0
    backups = sorted(tools_json.parent.glob("tools.json.bak-*"))
    assert len(backups) == 2
    assert json.loads(backups[0].read_text()) == original  # the upstream file survives a second install
