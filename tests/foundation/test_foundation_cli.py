"""CLI: validate, tools, counters, schema, export-tools; shipped files; the generated schema."""
from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest

from madengine_rocprof.cli import main
from madengine_rocprof.models.schema import render_schema

CONFIGS = ["rocprofv3_compute_bound", "rocprofv3_memory_bound", "rocprofv3_multi_gpu", "rocprofv3_lightweight",
           "rocprofv3_pc_sampling", "rocprofv3_comprehensive", "rocprofv3_multi_node"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_schema_file_is_generated_and_fresh(repo, capsys):
    assert (repo / "profiling-configs" / "schema.json").read_text() == render_schema(), \
        "profiling-configs/schema.json is stale: run `madengine-rocprof schema --write`"
    assert run(capsys, "schema", "--check")[0] == 0


def test_schema_check_detects_stale(tmp_path, capsys):
    stale = tmp_path / "schema.json"
    stale.write_text("{}")
    assert run(capsys, "schema", "--check", "--path", str(stale))[0] == 1
    assert run(capsys, "schema", "--write", "--path", str(stale))[0] == 0
    assert stale.read_text() == render_schema()


@pytest.mark.parametrize("name", CONFIGS)
def test_shipped_configs_validate(repo, capsys, name):
    path = repo / "profiling-configs" / f"{name}.json"
    data = json.loads(path.read_text())
    jsonschema.validate(data, json.loads(render_schema()))
    assert data["$schema"] == "./schema.json"
    code, out, err = run(capsys, "validate", str(path))
    assert code == 0, err
    assert "warning" not in out


def test_all_shipped_files_validate_in_one_call(repo, capsys, counter_defs):
    files = sorted(str(p) for p in (repo / "profiling-configs").glob("rocprofv3_*.json"))
    files += sorted(str(p) for p in (repo / "counters").glob("*.txt"))
    assert len(files) == 12
    code, out, err = run(capsys, "validate", "--counter-defs", str(counter_defs), *files)
    assert code == 0, err
    assert out.count("OK ") == 12


def test_schema_rejects_what_the_model_rejects():
    schema = json.loads(render_schema())
    for bad in ({"gpu_vendor": "INTEL"}, {"tools": [{"cmd": "x"}]}, {"docker_env_vars": {"A": 1}}, {"tools": "x"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
    jsonschema.validate({"_comment": "x", "unknown_key": [1]}, schema)  # extra keys allowed


@pytest.mark.parametrize("content, needle", [
    ('{"tools": [{"name": "rocprof_compute"}]}', "tools[0].name: unknown tool 'rocprof_compute'"),
    ('{"tools": [{"name": "gpu_info_power_profiler", "env_vars": {"POWER_SAMPLING_RATE": 0.1}}]}',
     "tools[0].env_vars.POWER_SAMPLING_RATE"),
    ('{"gpu_vendor": "ARM"}', "gpu_vendor"),
    ('{"gpu_vendor": "NVIDIA", "tools": [{"name": "rocprofv3_pc_sampling"}]}', "does not support NVIDIA"),
    ('{"tools": [}', ":1:12: invalid JSON"),
    ('["tools"]', "top level must be a JSON object"),
    ('{"name": "t", "trace": ["kernel"], "pc_sampling": {"method": "stochastic", "unit": "time", "interval": 1000}}',
     "needs unit 'cycles'"),
])
def test_validate_errors(tmp_path, capsys, content, needle):
    path = tmp_path / "f.json"
    path.write_text(content)
    code, out, err = run(capsys, "validate", str(path))
    assert code == 2 and needle in err and str(path) in err and "fix:" in err


def test_validate_counter_file_errors(tmp_path, capsys, counter_defs):
    path = tmp_path / "c.txt"
    path.write_text("pmc: SQ_WAVES TCC_HIT_sum\n")
    code, _, err = run(capsys, "validate", "--arch", "gfx1100", "--counter-defs", str(counter_defs), str(path))
    assert code == 2 and f"{path}:1" in err and "TCC_HIT_sum does not exist on gfx1100" in err


def test_validate_missing_and_directory(tmp_path, capsys):
    code, _, err = run(capsys, "validate", str(tmp_path / "nope.json"), str(tmp_path))
    assert code == 2 and "not found" in err and "is a directory" in err and "2 of 2" in err


def test_counters_check_reports_reruns(repo, capsys, counter_defs):
    code, out, _ = run(capsys, "counters", "check", str(repo / "counters" / "memory_bound.txt"),
                       "--arch", "gfx942", "--counter-defs", str(counter_defs))
    assert code == 0 and "2 passes: costs 2 re-runs" in out and str(counter_defs) in out
    code, out, _ = run(capsys, "counters", "check", "compute_bound", "--arch", "gfx90a")
    assert code == 0 and "1 pass: costs 1 re-run" in out and "built-in table" in out


def test_counters_check_suggests_packing(tmp_path, capsys, counter_defs):
    path = tmp_path / "loose.txt"
    path.write_text("pmc: SQ_WAVES\npmc: SQ_INSTS_VALU\npmc: GRBM_COUNT\n")
    code, out, _ = run(capsys, "counters", "check", str(path), "--arch", "gfx90a", "--counter-defs", str(counter_defs))
    assert code == 0 and "3 passes" in out and "fewest passes valid on gfx90a: 1" in out
    assert "pmc: SQ_WAVES SQ_INSTS_VALU GRBM_COUNT" in out


def test_counters_register_and_list(tmp_path, capsys, isolated_home, counter_defs):
    path = tmp_path / "my_l2.txt"
    path.write_text("# description: L2 hits\npmc: TCC_HIT_sum TCC_MISS_sum\n")
    assert (
        run(capsys, "counters", "register", str(path), "--arch", "gfx90a", "--counter-defs", str(counter_defs))[0] == 0
    )
    code, out, _ = run(capsys, "counters", "list")
    assert code == 0 and "my_l2" in out and "L2 hits" in out and "compute_bound" in out


def test_tools_list_and_show(capsys):
    code, out, _ = run(capsys, "tools", "list")
    assert code == 0 and "rocprofv3_pc_sampling" in out and "core" in out
    code, out, _ = run(capsys, "tools", "show", "rocprofv3_compute")
    shown = json.loads(out)
    assert shown["madengine_entry"]["cmd"].endswith(" --") and shown["definition"]["counters"] == "compute_bound"
    code, _, err = run(capsys, "tools", "show", "rocprofv3_compue")
    assert code == 2 and "rocprofv3_compute" in err


def test_export_tools(tmp_path, capsys):
    out_file = tmp_path / "scripts" / "common" / "tools.json"
    code, _, _ = run(capsys, "export-tools", str(out_file), "--tools", "rocprofv3_compute,gpu_info_power_profiler")
    data = json.loads(out_file.read_text())
    assert code == 0 and list(data["tools"]) == ["rocprofv3_compute", "gpu_info_power_profiler"]
    assert data["tools"]["gpu_info_power_profiler"]["cmd"] == ""
    assert "-i ../scripts/common/tools/counters/compute_bound.txt" in data["tools"]["rocprofv3_compute"]["cmd"]
    assert [p.name for p in out_file.parent.iterdir()] == ["tools.json"]  # no temp files left


def test_export_tools_bad_name_writes_nothing(tmp_path, capsys):
    out_file = tmp_path / "tools.json"
    code, _, err = run(capsys, "export-tools", str(out_file), "--tools", "nope")
    assert code == 2 and not out_file.exists() and list(tmp_path.iterdir()) == []


def test_console_entry_point_runs(repo):
    result = subprocess.run([sys.executable, "-m", "madengine_rocprof", "validate",
                             str(repo / "profiling-configs" / "rocprofv3_compute_bound.json")],
                            capture_output=True, text=True, cwd=repo, timeout=60)
    assert result.returncode == 0, result.stderr


def test_validate_warns_about_cmd_without_separator_and_unknown_keys(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text('{"tool": [], "tools": [{"name": "lightweight", "cmd": "bash my_wrapper.sh --kernel-trace"}]}')
    code, out, _ = run(capsys, "validate", str(path))
    assert code == 0 and "tools[0].cmd does not end with '--'" in out and "did you mean 'tools'" in out


def test_validate_recognises_the_schema_file(repo, tmp_path, capsys):
    code, out, _ = run(capsys, "validate", str(repo / "profiling-configs" / "schema.json"))
    assert code == 0 and "JSON Schema, up to date" in out
    stale = tmp_path / "schema.json"
    stale.write_text(render_schema().replace("madengine additional context", "old"))
    assert run(capsys, "validate", str(stale))[0] == 2
