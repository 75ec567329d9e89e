import json

import pytest

from madengine_rocprof.errors import UserError
from madengine_rocprof.runner.selection import load_models, parse_tag, select_models


def _cards(tmp_path, cards):
    path = tmp_path / "models.json"
    path.write_text(json.dumps(cards))
    return load_models(path)


CARDS = [
    {
        "name": "a1",
        "dockerfile": "docker/x",
        "scripts": "scripts/x/run.sh",
        "tags": ["fam", "pytorch"],
        "args": "--n 1",
    },
    {"name": "a2", "dockerfile": "docker/x", "scripts": "scripts/x/run.sh", "tags": ["fam", "triton"]},
    {"name": "b1", "dockerfile": "docker/y", "scripts": "scripts/y/run.sh", "tags": ["other"]},
]


def test_select_by_name_tag_and_all_in_file_order(tmp_path):
    cards = _cards(tmp_path, CARDS)
    assert [c.name for c in select_models(cards, ["a2"])] == ["a2"]
    assert [c.name for c in select_models(cards, ["fam"])] == ["a1", "a2"]
    assert [c.name for c in select_models(cards, ["b1", "triton"])] == ["a2", "b1"]
    assert [c.name for c in select_models(cards, ["all"])] == ["a1", "a2", "b1"]
    assert [c.name for c in select_models(cards, ["fam", "a1"])] == ["a1", "a2"]  # each model once


def test_name_key_value_appends_args_madengine_style(tmp_path):
    cards = _cards(tmp_path, CARDS)
    (card,) = select_models(cards, ["a1:batch-size=4:num-steps=2"])
    assert card.args == "--n 1 --batch-size 4 --num-steps 2"
    (card,) = select_models(cards, ["a2:msg=two words"])
    assert card.args == "--msg 'two words'"


def test_key_from_the_tag_is_quoted_like_the_value(tmp_path):
    """The args string is split again by the runner: a quote in a key must not make it unsplittable."""
    import shlex

    (card,) = select_models(_cards(tmp_path, CARDS), ["a2:it's=1:x=$(id)"])
    assert shlex.split(card.args) == ["--it's", "1", "--x", "$(id)"]


def test_unknown_tag_suggests_the_closest(tmp_path):
    cards = _cards(tmp_path, CARDS)
    with pytest.raises(UserError) as err:
        select_models(cards, ["fma"], "models.json")
    assert "'fma'" in str(err.value) and "did you mean 'fam'" in str(err.value)
    assert err.value.where == "--tags"


@pytest.mark.parametrize("bad", ["a1:novalue", "a1:=3"])
def test_bad_key_value(bad):
    with pytest.raises(UserError):
        parse_tag(bad)


@pytest.mark.parametrize("content, where", [
    ('{"name": "x"}', None),
    ('[{"name": "x", "dockerfile": "d"}]', "[0].scripts"),
    ('[{"name": "x", "dockerfile": "d", "scripts": "s", "tags": "notalist"}]', "[0].tags"),
    ('[{"name": "x", "dockerfile": "d", "scripts": "s", "timeout": -1}]', "[0].timeout"),
])
def test_bad_models_file(tmp_path, content, where):
    path = tmp_path / "models.json"
    path.write_text(content)
    with pytest.raises(UserError) as err:
        load_models(path)
    assert err.value.file == str(path)
    assert err.value.where == where


def test_invalid_json_has_line_and_column(tmp_path):
    path = tmp_path / "models.json"
    path.write_text('[\n  {"name": }\n]')
    with pytest.raises(UserError) as err:
        load_models(path)
    assert (err.value.line, err.value.column) == (2, 12)


def test_duplicate_names_rejected(tmp_path):
    with pytest.raises(UserError, match="defined twice"):
        _cards(tmp_path, [CARDS[0], CARDS[0]])


def test_shipped_models_json_is_madengine_shaped(repo):
    cards = load_models(repo / "models.json")
    names = [c.name for c in cards]
    assert names == ["tiny_llama_v1", "tiny_llama_v2", "tiny_llama_v3", "tiny_llama_v4"]
    for card in cards:
        assert (repo / card.scripts).is_file(), card.scripts
        assert "tinytransformer" in card.tags
        assert card.dockerfile.startswith("docker/")
        raw = card.raw
        for key in ("name", "dockerfile", "scripts", "n_gpus", "owner", "training_precision", "tags", "args"):
            assert key in raw, (card.name, key)
