"""Issue 25, item 1: the input layer's own promises (madengine_rocprof/inputs.py), one test each."""
from __future__ import annotations

import gzip
import json
import math
import os
import socket
from pathlib import Path

import pytest

from madengine_rocprof import inputs
from madengine_rocprof.errors import UserError

from .contract_helpers import assert_contract, cli


def test_special_files_are_refused_before_open(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sock_path = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sock_path))
    try:
        for path, kind in ((fifo, "FIFO"), (Path("/dev/zero"), "character device"), (sock_path, "socket"),
                           (tmp_path, "directory")):
            with pytest.raises(UserError) as err:
                inputs.read_text(path, "config file")
            assert kind in str(err.value) and str(path) in str(err.value)
            assert err.value.exit_code == 2
    finally:
        server.close()


def test_a_link_to_a_regular_file_is_read(tmp_path):
    target = tmp_path / "real.json"
    target.write_text('{"a": 1}')
    link = tmp_path / "link.json"
    link.symlink_to(target)
    assert inputs.load_json(link) == {"a": 1}


def test_size_limit_is_a_clear_error_and_can_be_raised(tmp_path, monkeypatch):
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"x": "y" * (2 * 1024 * 1024)}))
    monkeypatch.setenv(inputs.LIMIT_ENV, "1")
    with pytest.raises(UserError) as err:
        inputs.load_json(big, "config file")
    assert "over the limit of 1,048,576 bytes" in str(err.value) and inputs.LIMIT_ENV in str(err.value)
    code, _, stderr = cli("validate", big)
    assert_contract(code, stderr)
    assert code == 2 and "over the limit" in stderr
    monkeypatch.setenv(inputs.LIMIT_ENV, "8")
    assert len(inputs.load_json(big)["x"]) == 2 * 1024 * 1024


@pytest.mark.parametrize("text, what", [
    ('{"a": NaN}', "NaN"), ('{"a": Infinity}', "Infinity"), ('{"a": -Infinity}', "-Infinity"),
    ('{"a": 1e999}', "overflows to infinity"), ('{"a": ' + "9" * 41 + "}", "41 digits"),
    ('{"a": 1, "a": 2}', "appears twice"), ("[" * 300 + "]" * 300, "nested too deeply"),
    ('{"a": 1,}', "line 1"), ("", "invalid JSON"),
])
def test_strict_json_refusals_name_the_problem(text, what):
    with pytest.raises(UserError) as err:
        inputs.loads(text, "f.json")
    assert what in str(err.value) or (what == "line 1" and err.value.line == 1), str(err.value)
    assert "f.json" in str(err.value)


def test_a_key_repeated_with_the_same_value_changes_nothing():
    assert inputs.loads('{"a": 1, "a": 1, "b": [1, 2]}') == {"a": 1, "b": [1, 2]}


def test_gzip_json_is_read_within_the_uncompressed_limit(tmp_path, monkeypatch):
    """For trace readers (Kineto `.json.gz`): the same strict loader, the limit applies after decompression."""
    path = tmp_path / "trace.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump({"traceEvents": [{"ts": 1.5}], "pad": "z" * (3 * 1024 * 1024)}, fh)
    assert inputs.load_json(path, "trace", inputs.JSON_TRACE_LIMIT)["traceEvents"] == [{"ts": 1.5}]
    assert path.stat().st_size < 1024 * 1024  # compresses well: only the uncompressed size can hit the limit
    monkeypatch.setenv(inputs.LIMIT_ENV, "1")
    with pytest.raises(UserError, match="uncompressed"):
        inputs.load_json(path, "trace", inputs.JSON_TRACE_LIMIT)
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(b"not gzip")
    with pytest.raises(UserError, match="gzip"):
        inputs.load_json(bad, "trace")


def test_project_json_is_written_without_nan():
    with pytest.raises(ValueError):
        inputs.dumps([math.inf])
    from madengine_rocprof.atomic import write_json

    with pytest.raises(ValueError):
        write_json("/nonexistent-dir-never-created/x.json", {"x": math.nan})


def test_check_shape_names_the_json_path():
    shape = {"a": [{"b": (int, None)}], "c?": str}
    inputs.check_shape({"a": [{"b": 1}, {"b": None}]}, shape, "f.json")
    with pytest.raises(UserError) as err:
        inputs.check_shape({"a": [{"b": 1}, {"b": "x"}]}, shape, "f.json")
    assert err.value.where == "a[1].b" and "expected a whole number or null, got a string" in str(err.value)
    with pytest.raises(UserError) as err:
        inputs.check_shape({"a": [], "c": True}, shape, "f.json")
    assert err.value.where == "c"


@pytest.mark.parametrize("value, ok", [(0, True), (2**63 - 1, True), (2**63, False), (-1, False), (1.0, True),
                                       (1.5, False), (True, False), ("1", False), (None, False), (math.nan, False)])
def test_int_in_range(value, ok):
    if ok:
        assert inputs.int_in_range(value, "f", "x") == int(value)
    else:
        with pytest.raises(UserError):
            inputs.int_in_range(value, "f", "x")


def test_unexpected_exceptions_become_exit_2_with_the_bug_mark(monkeypatch):
    """The top-level handler: never a traceback, never exit 1; the message is marked so tests can tell that no
    input case reaches it."""
    from madengine_rocprof.cli import BUG_MARK
    from madengine_rocprof.cli import kernels as kernels_cli

    def broken(args):
        raise KeyError("oops")

    monkeypatch.setattr(kernels_cli, "_check", broken)
    code, _, err = cli("kernels", "check", "x.json")
    assert code == 2 and BUG_MARK in err and "KeyError" in err and "Traceback" not in err and "fix:" in err
