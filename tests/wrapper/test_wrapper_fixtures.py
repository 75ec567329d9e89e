"""Our writers and output scanning against real rocprofv3 outputs and inputs (tests/fixtures/rocprofv3)."""
from __future__ import annotations

import csv
import shutil
import socket
import sys

from madengine_rocprof import wrapper
from madengine_rocprof.wrapper import options, outputs, planner, rocprof_csv


def header(path) -> list[str]:
    with open(path, newline="") as fh:
        return next(csv.reader(fh))


def test_writer_headers_are_rocprofv3_7_headers(rocprof_fixtures, tmp_path):
    data = rocprof_fixtures / "docs-data"
    assert list(rocprof_csv.KERNEL_TRACE) == header(data / "kernel_trace.csv")
    assert list(rocprof_csv.COUNTER_COLLECTION) == header(data / "counter_collection.csv")
    assert list(rocprof_csv.STATS) == header(data / "hip_api_stats.csv")
    # Byte-level style: quoted header, quoted strings, bare numbers, like the real file.
    real_first_row = (data / "kernel_trace.csv").read_text().splitlines()[1]
    values = next(csv.reader([real_first_row]))
    typed = [int(v) if v.lstrip("-").isdigit() else v for v in values]
    rocprof_csv.write_rows(str(tmp_path / "k.csv"), rocprof_csv.KERNEL_TRACE, [typed])
    assert (tmp_path / "k.csv").read_text().splitlines()[1] == real_first_row


def test_scan_counts_dispatches_in_a_real_output_tree(rocprof_fixtures, tmp_path):
    data = rocprof_fixtures / "docs-data"
    host = tmp_path / socket.gethostname()
    host.mkdir()
    shutil.copy(data / "kernel_trace.csv", host / "123_kernel_trace.csv")
    shutil.copy(data / "counter_collection.csv", host / "123_counter_collection.csv")
    files, dispatches = outputs.collect(str(tmp_path), {})
    kinds = {f["kind"]: f for f in files}
    with open(data / "kernel_trace.csv", newline="") as fh:
        trace_rows = sum(1 for _ in csv.DictReader(fh))
    assert kinds["kernel_trace"]["rows"] == trace_rows == dispatches  # the trace wins over counters
    only_counters = tmp_path / "c"
    (only_counters / "pmc_1" / "h").mkdir(parents=True)
    shutil.copy(data / "counter_collection.csv", only_counters / "pmc_1" / "h" / "9_counter_collection.csv")
    with open(data / "counter_collection.csv", newline="") as fh:
        distinct = len({row["Dispatch_Id"] for row in csv.DictReader(fh)})
    assert outputs.collect(str(only_counters), {})[1] == distinct


def test_real_input_files_drive_passes_and_profiles(rocprof_fixtures, tmp_path, make_env):
    inputs = rocprof_fixtures / "inputs"
    for name in ("counter-collection_input2_input.txt", "counter-collection_input3_input.json"):
        shutil.copy(inputs / name, tmp_path / name)
    parsed = options.parse(["-i", "counter-collection_input3_input.json", "--", "x"])
    assert planner.counters_requested(parsed, str(tmp_path)) == ["SQ_WAVES", "GRBM_COUNT", "GRBM_GUI_ACTIVE"]
    assert planner.infer_profile(parsed, str(tmp_path)) == "compute_bound"
    result = wrapper.run(["-i", "counter-collection_input2_input.txt"], [sys.executable, "-c", "pass"],
                         str(tmp_path / "o"), env=make_env("rocprofv3"), cwd=str(tmp_path))
    dirs = sorted({f["path"].split("/")[0] for f in result.manifest["outputs"]})
    assert result.outcome == "ok" and dirs == ["pmc_1", "pmc_2"]  # one pass per pmc line
    result = wrapper.run(["-i", "counter-collection_input3_input.json"], [sys.executable, "-c", "pass"],
                         str(tmp_path / "j"), env=make_env("rocprofv3"), cwd=str(tmp_path))
    assert sorted({f["path"].split("/")[0] for f in result.manifest["outputs"]}) == ["pass_1", "pass_2"]


def test_input_file_output_keys_that_rocprofv3_would_call_conflicting_fail_early(rocprof_fixtures, tmp_path,
                                                                              make_env):
    # rocprofv3 raises "conflicting value for output_file" when the file and the command line (where the wrapper
    # always puts -d, -o and --output-format) set one key to different values.
    import pytest

    from madengine_rocprof.errors import UserError

    name = "counter-collection_kernel_filtering_input.json"
    shutil.copy(rocprof_fixtures / "inputs" / name, tmp_path / name)
    (tmp_path / "job.yaml").write_text("jobs:\n  - pmc: [SQ_WAVES]\n    output_format: [csv]\n")
    env = make_env("rocprofv3")
    with pytest.raises(UserError, match="output_file, output_format") as info:
        wrapper.plan(["-i", name], ["x"], str(tmp_path / "o"), env=env, cwd=str(tmp_path))
    assert name in str(info.value)
    with pytest.raises(UserError, match="output_format"):
        wrapper.plan(["-i", "job.yaml"], ["x"], str(tmp_path / "o"), env=env, cwd=str(tmp_path))
    (tmp_path / "one.json").write_text('{"jobs": [{"pmc": ["SQ_WAVES"], "output_directory": "/x"}]}')
    with pytest.raises(UserError, match="output_directory"):
        wrapper.plan(["-i", "one.json"], ["x"], str(tmp_path / "o"), env=env, cwd=str(tmp_path))
    wrapper.plan(["-i", "counter-collection_input3_input.json"], ["x"], str(tmp_path / "o"), env=env,
                 cwd=str(rocprof_fixtures / "inputs"))  # no output keys: fine
