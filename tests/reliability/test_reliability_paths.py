"""Issue 14, item 4: every path that comes from a models.json card or a context stays inside its root (the folder of
models.json, --output-dir), or is refused with a clear error before anything is written."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from madengine_rocprof.cli import main as cli_main


def _run(capsys, models: Path, out: Path, tag: str, *extra: str) -> tuple[int, str]:
    code = cli_main(["run", "--tags", tag, "--models", str(models), "--output-dir", str(out), "--runner", "local",
                     "--quiet", *extra])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _edit_card(models: Path, card_name: str, /, **changes: str) -> None:
    cards = json.loads(models.read_text())
    for card in cards:
        if card["name"] == card_name:
            card.update(changes)
    models.write_text(json.dumps(cards))


@pytest.mark.parametrize("name", ["../../../outside_x", "a/b", "..", "."])
def test_a_model_name_cannot_place_the_run_directory_elsewhere(models, tmp_path, capsys, name):
    _edit_card(models, "ok_model", name=name)
    out = tmp_path / "deep" / "er" / "out"
    code, text = _run(capsys, models, out, "reltest")
    assert code == 2 and "cannot name a run directory" in text and "[3].name" in text
    assert not out.exists() and not (tmp_path / "outside_x__none").exists()


@pytest.mark.parametrize("field, value", [
    ("scripts", "../../../../../../../../etc/passwd"),
    ("scripts", "/etc/passwd"),
    ("dockerfile", "../../../../../../etc/x"),
])
def test_card_paths_stay_inside_the_models_folder(models, tmp_path, capsys, field, value):
    _edit_card(models, "ok_model", **{field: value})
    out = tmp_path / "out"
    code, text = _run(capsys, models, out, "ok_model")
    assert code == 2 and "leads outside" in text and f"ok_model.{field}" in text
    assert not out.exists()


def test_a_script_folder_that_is_a_link_out_is_refused(models, tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "run.sh").write_text("echo 'performance: 1 x'\n")
    (models.parent / "scripts" / "linked").symlink_to(outside)
    _edit_card(models, "ok_model", scripts="scripts/linked/run.sh")
    code, text = _run(capsys, models, tmp_path / "out", "ok_model")
    assert code == 2 and "leads outside" in text


def test_a_script_beside_models_json_is_refused(models, tmp_path, capsys):
    (models.parent / "run.sh").write_text("echo 'performance: 1 x'\n")
    _edit_card(models, "ok_model", scripts="run.sh")
    code, text = _run(capsys, models, tmp_path / "out", "ok_model")
    assert code == 2 and "folder of its own" in text


def test_links_in_the_script_folder_are_copied_as_links_never_followed(models, tmp_path, capsys):
    (models.parent / "scripts" / "ok" / "etc").symlink_to("/etc")
    out = tmp_path / "out"
    code, text = _run(capsys, models, out, "ok_model")
    assert code == 0, text
    copied = out / "ok_model__none" / "model_scripts" / "etc"
    assert copied.is_symlink() and str(copied.readlink()) == "/etc"


@pytest.mark.parametrize("path", ["../../../../../../etc/hostname", "/etc/hostname"])
def test_context_script_paths_stay_inside_the_models_folder(models, tmp_path, capsys, path):
    out = tmp_path / "out"
    code, text = _run(capsys, models, out, "ok_model", "--additional-context",
                      json.dumps({"pre_scripts": [{"path": path}]}))
    assert code == 2 and "leads outside" in text and "pre_scripts[0]" in text
    assert not out.exists()


@pytest.mark.parametrize("kind", ["symlink", "file"])
def test_a_run_directory_that_is_not_a_folder_is_left_alone(models, tmp_path, capsys, kind):
    out = tmp_path / "out"
    out.mkdir()
    target = tmp_path / "precious"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    ws = out / "ok_model__none"
    if kind == "symlink":
        ws.symlink_to(target)
    else:
        ws.write_text("a file")
    code, text = _run(capsys, models, out, "ok_model")
    assert code == 2 and "not a run directory" in text and "Traceback" not in text
    assert (target / "keep.txt").read_text() == "mine" and not (out / "perf.csv").exists()
