"""Additional context: loading, deep merge, unknown keys, and every bad-input case."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from madengine_rocprof.errors import UserError, UserErrors
from madengine_rocprof.models import AdditionalContext, deep_merge, load_context


def write(tmp_path, text, name="ctx.json"):
    p = tmp_path / name
    p.write_text(text)
    return p


def messages(err: UserError) -> list[str]:
    return [str(e) for e in getattr(err, "errors", [err])]


def test_file_then_cli_deep_merge_keeps_nested_keys(tmp_path):
    p = write(tmp_path, json.dumps({"docker_env_vars": {"A": "1", "B": "2"}, "tools": [{"name": "lightweight"}]}))
    ctx, warnings = load_context(p, '{"docker_env_vars": {"B": "3"}, "tools": [{"name": "rocprofv3_compute"}]}')
    assert ctx.docker_env_vars == {"A": "1", "B": "3"}  # madengine's shallow merge would drop A
    assert [t.name for t in ctx.tools] == ["rocprofv3_compute"]  # lists are replaced, not appended
    assert warnings == []


def test_unknown_keys_kept_and_warned_comments_silent(tmp_path):
    p = write(tmp_path, json.dumps({"_comment": "hi", "tool": [], "gpu_vendor": "nvidia"}))
    ctx, warnings = load_context(p, None)
    assert ctx.gpu_vendor == "NVIDIA"
    assert ctx.extra_keys() == {"_comment": "hi", "tool": []}
    assert len(warnings) == 1 and "tool" in warnings[0] and "tools" in warnings[0]
    assert ctx.to_madengine()["tool"] == [] and ctx.to_madengine()["_comment"] == "hi"


def test_invalid_json_reports_line_and_column(tmp_path):
    p = write(tmp_path, '{"a": 1,\n  "b": }')
    with pytest.raises(UserError) as e:
        load_context(p, None)
    assert (e.value.line, e.value.column) == (2, 8) and e.value.file == str(p)


def test_invalid_cli_json_names_the_option():
    with pytest.raises(UserError) as e:
        load_context(None, "{'single': 'quotes'}")
    assert e.value.file == "--additional-context" and e.value.line == 1


@pytest.mark.parametrize("text", ["[]", "3", '"x"', "null"])
def test_top_level_must_be_object(tmp_path, text):
    with pytest.raises(UserError, match="top level must be a JSON object"):
        load_context(write(tmp_path, text), None)


def test_wrong_type_reports_json_path(tmp_path):
    ctx = {
        "tools": [
            {"name": "lightweight"},
            {"name": "gpu_info_power_profiler", "env_vars": {"POWER_SAMPLING_RATE": 0.1}},
        ]
    }
    with pytest.raises(UserErrors) as e:
        load_context(write(tmp_path, json.dumps(ctx)), None)
    [err] = e.value.errors
    assert err.where == "tools[1].env_vars.POWER_SAMPLING_RATE" and "string" in err.what and err.fix


@pytest.mark.parametrize("vendor", ["INTEL", "amd gpu", 1])
def test_gpu_vendor_must_be_amd_or_nvidia(tmp_path, vendor):
    with pytest.raises(UserErrors) as e:
        load_context(write(tmp_path, json.dumps({"gpu_vendor": vendor})), None)
    assert e.value.errors[0].where == "gpu_vendor"


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(UserError, match="not found"):
        load_context(tmp_path / "nope.json", None)
    with pytest.raises(UserError, match="is a directory"):
        load_context(tmp_path, None)


def test_tool_entry_unknown_key_suggests_closest(tmp_path):
    with pytest.raises(UserErrors) as e:
        load_context(write(tmp_path, '{"tools": [{"name": "lightweight", "env_var": {}}]}'), None)
    err = e.value.errors[0]
    assert err.where == "tools[0].env_var" and "env_vars" in (err.fix or "")


def test_several_errors_reported_together(tmp_path):
    with pytest.raises(UserErrors) as e:
        load_context(write(tmp_path, '{"debug": "yes", "timeout": "10", "docker_gpus": 0}'), None)
    assert sorted(err.where or "" for err in e.value.errors) == ["debug", "docker_gpus", "timeout"]


# ---- property tests: the merge rule and the loader ------------------------------------------------------

# text a config can hold: no NUL, no lone surrogate (those are refused: tests/reliability)
config_text = st.characters(codec="utf-8", exclude_characters="\x00")
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(config_text, max_size=3))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text("abc", min_size=1, max_size=2), inner, max_size=3)
    ),
    max_leaves=8,
)
objects = st.dictionaries(st.text("abcd_", min_size=1, max_size=3), json_values, max_size=4)


def assert_merged(base, override, merged):
    """The documented rule, checked key by key: objects merge recursively, anything else from the CLI replaces."""
    assert set(merged) == set(base) | set(override)
    for key, value in merged.items():
        if key in override and isinstance(override[key], dict) and isinstance(base.get(key), dict):
            assert_merged(base[key], override[key], value)
        elif key in override:
            assert value == override[key]
        else:
            assert value == base[key]


@settings(max_examples=150, deadline=None)
@given(objects, objects)
def test_deep_merge_properties(base, override):
    base_before, override_before = json.dumps(base), json.dumps(override)
    merged = deep_merge(base, override)
    assert_merged(base, override, merged)
    assert json.dumps(base) == base_before and json.dumps(override) == override_before  # inputs untouched
    assert deep_merge(base, {}) == base and deep_merge(merged, override) == merged  # identity, idempotence


env = st.dictionaries(
    st.from_regex(r"[A-Z_][A-Z0-9_]{0,6}", fullmatch=True), st.text(config_text, max_size=5), max_size=3
)


@settings(max_examples=100, deadline=None)
@given(
    file_env=env,
    cli_env=env,
    vendor=st.sampled_from(["amd", "AMD", "Nvidia", "NVIDIA"]),
    extra=st.dictionaries(
        st.from_regex(r"_?[a-z]{1,5}", fullmatch=True).filter(lambda k: k not in AdditionalContext.model_fields),
        json_scalars,
        max_size=2,
    ),
)
def test_loader_roundtrip_property(tmp_path_factory, file_env, cli_env, vendor, extra):
    p = tmp_path_factory.mktemp("ctx") / "c.json"
    p.write_text(json.dumps({"gpu_vendor": vendor, "docker_env_vars": file_env, **extra}))
    ctx, warnings = load_context(p, json.dumps({"docker_env_vars": cli_env}))
    assert ctx.gpu_vendor == vendor.upper()
    assert ctx.docker_env_vars == {**file_env, **cli_env}
    assert ctx.extra_keys() == extra
    assert len(warnings) == sum(1 for k in extra if not k.startswith("_"))


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=30))
def test_loader_never_crashes_on_arbitrary_cli_text(text):
    try:
        load_context(None, text)
    except UserError as err:
        assert str(err)  # a clear message, never a traceback


def test_validation_errors_carry_line_and_column(tmp_path):
    text = '{\n  "tools": [\n    {"name": "lightweight"},\n    {"name": "x", "env_vars": {"RATE": 0.1}}\n  ]\n}'
    with pytest.raises(UserErrors) as e:
        load_context(write(tmp_path, text), None)
    err = e.value.errors[0]
    assert (err.line, err.column) == (4, text.splitlines()[3].index("0.1") + 1)


@settings(max_examples=150, deadline=None)
@given(json_values, st.sampled_from([None, 0, 2]))
def test_value_positions_point_at_each_value(value, indent):
    from madengine_rocprof.models.json_positions import value_positions
    text = json.dumps(value, indent=indent)
    lines = text.split("\n")
    for path, (line, column) in value_positions(text).items():
        offset = sum(len(text_line) + 1 for text_line in lines[:line - 1]) + column - 1
        decoded, _ = json.JSONDecoder().raw_decode(text, offset)
        expected = value
        for key in path:
            expected = expected[key]
        assert decoded == expected


@st.composite
def valid_contexts(draw):
    names = st.sampled_from(["lightweight", "rocprofv3_compute", "gpu_info_power_profiler", "rocprofv3_full"])
    env_values = st.dictionaries(st.from_regex(r"[A-Z][A-Z0-9_]{0,5}", fullmatch=True), st.text(max_size=4), max_size=2)
    ctx = {
        "gpu_vendor": draw(st.sampled_from(["AMD", "NVIDIA"])),
        "guest_os": draw(st.sampled_from(["UBUNTU", "CENTOS"])),
        "tools": draw(st.lists(st.fixed_dictionaries({"name": names}, optional={"env_vars": env_values}), max_size=3)),
        "docker_env_vars": draw(env_values),
        "debug": draw(st.booleans()),
    }
    if draw(st.booleans()):
        ctx["distributed"] = {"launcher": "torchrun", "nproc_per_node": draw(st.integers(1, 8))}
    if draw(st.booleans()):
        ctx["timeout"] = draw(st.floats(1, 1e5))
    return ctx


@settings(max_examples=100, deadline=None)
@given(valid_contexts())
def test_valid_contexts_roundtrip_through_madengine_form(data):
    import jsonschema

    from madengine_rocprof.models import validate_context
    from madengine_rocprof.models.schema import context_schema
    jsonschema.validate(data, context_schema())
    ctx, warnings = validate_context(data)
    assert warnings == []
    again, _ = validate_context(json.loads(json.dumps(ctx.to_madengine())))
    assert again == ctx
