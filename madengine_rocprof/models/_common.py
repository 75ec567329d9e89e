"""Helpers shared by the models: strict JSON reading and pydantic errors turned into UserErrors."""
from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from madengine_rocprof import inputs
from madengine_rocprof.errors import UserError, UserErrors


def closest(name: str, choices: Iterable[str]) -> str | None:
    """The choice that looks most like `name` (for 'did you mean' hints), or None."""
    choices = list(choices)
    by_lower = {c.lower(): c for c in choices}
    match = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.5)
    return by_lower[match[0]] if match else None


def unknown_name(kind: str, name: str, choices: Iterable[str], list_command: str, **where: Any) -> UserError:
    """'unknown tool 'x'' with the closest known name and the command that lists them all."""
    guess = closest(name, choices)
    return UserError(f"unknown {kind} '{name}'",
                     fix=(f"did you mean '{guess}'? " if guess else "") + f"`{list_command}` shows them all", **where)


def json_path(loc: Iterable[Any]) -> str:
    """('tools', 1, 'env_vars', 'X') -> 'tools[1].env_vars.X'."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + str(part)
    return text


def read_text_file(path: str | os.PathLike[str], kind: str = "file") -> str:
    """Read a UTF-8 text file through the input layer: a regular file within the config size limit."""
    return inputs.read_text(path, kind)


def _text_problem(text: str) -> str | None:
    if "\x00" in text:
        return "contains a NUL character (\\u0000)"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (an unpaired \\ud800-\\udfff escape)"
    return None


def check_strings(data: Any, source: str | None) -> None:
    """Every key and string value must be able to reach an environment, a command line or a file name: no NUL, no
    lone surrogate. One check for `validate` and `run` (and models.json), so what validates also runs."""
    todo: list[tuple[tuple[Any, ...], Any]] = [((), data)]
    while todo:
        loc, value = todo.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                problem = _text_problem(key)
                if problem:
                    raise UserError(f"key {key!r} {problem}", file=source, where=json_path(loc) or None,
                                    fix="remove that character")
                todo.append(((*loc, key), item))
        elif isinstance(value, list):
            todo.extend(((*loc, i), item) for i, item in enumerate(value))
        elif isinstance(value, str):
            problem = _text_problem(value)
            if problem:
                raise UserError(f"the value {problem}", file=source, where=json_path(loc) or None,
                                fix="remove that character: environments, command lines and file names cannot hold it")


def load_json(text: str, source: str | None) -> Any:
    """Strict JSON (the input layer's: line and column, no NaN, no conflicting duplicate keys, bounded nesting),
    then every string checked for what cannot reach an environment or a command line."""
    data = inputs.loads(text, source, "config file")
    check_strings(data, source)
    return data


def parse_json_object(text: str, source: str) -> dict[str, Any]:
    """Parse JSON text whose top level must be an object; errors carry line and column."""
    data = load_json(text, source)
    if not isinstance(data, dict):
        raise UserError(
            f"top level must be a JSON object {{...}}, got {type(data).__name__ if data is not None else 'null'}",
            file=source,
            fix='wrap the content in {...}: a config is {"tools": [{"name": "rocprofv3_compute"}]}, a tool file '
                '{"name": "my_tool", "trace": ["kernel"]}',
        )
    return data


_TYPE_FIXES = {
    "string_type": "use a JSON string in quotes, e.g. \"0.1\"",
    "int_type": "use a whole number without quotes",
    "int_parsing": "use a whole number without quotes",
    "bool_type": "use true or false without quotes",
    "bool_parsing": "use true or false without quotes",
    "list_type": "use a JSON array [...]",
    "dict_type": "use a JSON object {...}",
    "model_type": "use a JSON object {...}",
    "literal_error": "use one of the values listed",
    "enum": "use one of the values listed",
    "greater_than": "use a larger value",
    "greater_than_equal": "use a larger value",
    "less_than_equal": "use a smaller value",
    "string_pattern_mismatch": "use letters, digits, '_', '.' and '-' only",
    "too_short": "add at least one item",
    "float_type": "use a number without quotes",
    "float_parsing": "use a number without quotes",
}


def validation_errors(err: ValidationError, source: str | None,
                      known_fields: Mapping[tuple, Iterable[str]] | None = None,
                      text: str | None = None) -> UserErrors:
    """Convert a pydantic ValidationError into UserErrors with JSON paths and fixes.

    With the source `text`, each error also gets the line and column of the value (or of its nearest parent)."""
    from madengine_rocprof.models.json_positions import value_positions

    positions = value_positions(text) if text is not None else {}
    out: list[UserError] = []
    for e in err.errors(include_url=False):
        loc = [p for p in e["loc"] if not (isinstance(p, str) and ("[" in p or p.startswith("function-")))]
        where = json_path(loc) or "(top level)"
        kind = e["type"]
        msg = e["msg"]
        fix = _TYPE_FIXES.get(kind)
        if kind == "extra_forbidden":
            msg = f"unknown key '{loc[-1]}'"
            parent = tuple(p for p in loc[:-1] if not isinstance(p, int))
            names = list((known_fields or {}).get(parent, []))
            guess = closest(str(loc[-1]), names) if names else None
            fix = (
                f"did you mean '{guess}'?"
                if guess
                else ("known keys: " + ", ".join(sorted(names)) if names else "remove it")
            )
        elif kind == "missing":
            msg = "required key is missing"
            fix = f"add \"{loc[-1]}\"" if loc else None
        elif kind.startswith("value_error") or kind == "assertion_error":
            msg = msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
            if " (fix: " in msg:
                msg, fix = msg.split(" (fix: ", 1)
                fix = fix.rstrip(")")
        if "input" in e and kind.endswith("_type"):
            msg += f" (got {json.dumps(e['input'], allow_nan=False)[:60]})"
        line = column = None
        for cut in range(len(loc), -1, -1):  # the value itself, else its closest parent present in the file
            if tuple(loc[:cut]) in positions:
                line, column = positions[tuple(loc[:cut])]
                break
        out.append(UserError(msg, file=source, where=where, fix=fix, line=line, column=column))
    return UserErrors(out)
