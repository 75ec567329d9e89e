"""The one input layer: every file a command reads (an argument or a file found below a run) comes through here.

What it promises, so that readers need not repeat it:
- Only regular files are read. A FIFO, a device (/dev/zero), a socket or a directory is refused by `stat` before it
  is opened, and the opened descriptor is checked again (`fstat`), so nothing hangs or fills memory.
- Every read has a size limit with a clear error (configs are small; traces may be large, and are streamed).
- JSON is strict: NaN, Infinity and numbers that overflow to them are refused, a key given twice with different
  values is refused (which one would count?), nesting is limited, integers are limited in size.
- Numbers from CSV fields are finite and within the range the reports compute in (`finite`, `int_in_range`).
- `dumps` is the one JSON writer's encoder: `allow_nan=False`, so no file the project writes holds a `NaN` token.

Every failure is a UserError (exit 2) naming the file and, where known, the line/column or JSON path.
Stdlib only: the report path imports this without pydantic.
"""
from __future__ import annotations

import gzip
import io
import json
import math
import os
import re
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import IO, Any

from madengine_rocprof.errors import UserError

MiB = 1024 * 1024
# Limits by what a file is. Configs, models.json, kernel rules, run.json: hand-written or small machine-written.
CONFIG_LIMIT = 64 * MiB
# Whole-file JSON traces (rocprofv3 results.json, Kineto) are parsed in memory: ~10x their size in Python objects.
JSON_TRACE_LIMIT = 4096 * MiB
# Streamed files (CSV traces, SQLite databases) are never held whole; the limit only catches a runaway file.
STREAM_LIMIT = 1024 * 1024 * MiB
LIMIT_ENV = "MADENGINE_ROCPROF_MAX_INPUT_MB"  # raises (or lowers) every limit above, for the unusual case

MAX_JSON_DEPTH = 200  # real files nest < 20 levels; Python's parser recurses and dies near 1000
INT64_MAX = 2**63 - 1  # counts and ids: what SQLite and the reports' integer columns hold
# Timestamps are unsigned 64-bit nanoseconds (rocprofiler-sdk's and the tracers' uint64): every value in [0, 2^64)
# is valid, and the reports compute with them exactly (Python ints; polars Int128 where a column holds one >= 2^63).
UINT64_MAX = 2**64 - 1
INT_DIGITS = 40  # a JSON integer longer than this is no count or timestamp any profiler writes

_KIND_OF_MODE = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class InputError(UserError):
    """Bad input found by this layer (a UserError, exit 2)."""


def limit_for(default: int) -> int:
    """`default`, or MADENGINE_ROCPROF_MAX_INPUT_MB when set (a whole number of MiB; anything else is refused: a
    huge value overflowed the read, text was ignored without a word)."""
    override = env_number(os.environ, LIMIT_ENV, 0, high=2**40, integer=True)
    return int(override) * MiB if override > 0 else default


def _not_regular(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KIND_OF_MODE if test(mode)), "not a regular file")


def check_regular(path: str | os.PathLike[str], kind: str = "file", limit: int | None = None) -> int:
    """stat `path` (following links): a regular file within `limit` bytes, else a UserError. Returns its size."""
    p = str(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError(f"{kind} not found", file=p,
                         fix="check the path (relative paths start at the current directory)") from None
    except OSError as err:
        raise InputError(f"cannot read {kind}: {err.strerror}", file=p) from None
    _check_stat(st, p, kind, limit)
    return st.st_size


def _check_stat(st: os.stat_result, p: str, kind: str, limit: int | None) -> None:
    other = _not_regular(st.st_mode)
    if other == "a directory":
        raise InputError(f"is a directory, expected a {kind}", file=p, fix="name a file inside it")
    if other:
        raise InputError(f"is {other}, not a regular file (expected: {kind})", file=p,
                         fix="save the content to a file and pass that file")
    if limit is not None and st.st_size > limit_for(limit):
        raise InputError(
            f"{kind} is {st.st_size:,} bytes, over the limit of {limit_for(limit):,} bytes", file=p,
            fix=f"check that the right file was given; to read it anyway set {LIMIT_ENV} to a size in MiB")


def is_regular(path: str | os.PathLike[str]) -> bool:
    """True for a regular file (following links); for discovery, which skips anything else."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


@contextmanager
def open_binary(path: str | os.PathLike[str], kind: str = "file",
                limit: int | None = STREAM_LIMIT) -> Iterator[IO[bytes]]:
    """Open a regular file for reading bytes. Checked by stat first, then opened without blocking (a FIFO swapped
    in between cannot hang the open) and checked again on the descriptor."""
    p = str(path)
    check_regular(p, kind, limit)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise InputError(f"cannot read {kind}: {err.strerror}", file=p) from None
    try:
        _check_stat(os.fstat(fd), p, kind, limit)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as fh:
        yield fh


@contextmanager
def open_text(path: str | os.PathLike[str], kind: str = "file", limit: int | None = STREAM_LIMIT,
              errors: str = "strict") -> Iterator[IO[str]]:
    """A regular file as UTF-8 text for streaming (CSV: newline='' as the csv module wants)."""
    with open_binary(path, kind, limit) as raw, io.TextIOWrapper(raw, encoding="utf-8", errors=errors,
                                                                 newline="") as fh:
        yield fh


def read_bytes(path: str | os.PathLike[str], kind: str = "file", limit: int = CONFIG_LIMIT) -> bytes:
    """The whole file; reads at most limit + 1 bytes: a file that grows after the stat still cannot exhaust memory."""
    cap = limit_for(limit)
    with open_binary(path, kind, limit) as fh:
        data = fh.read(cap + 1)
    if len(data) > cap:
        raise InputError(f"{kind} is over the limit of {cap:,} bytes", file=str(path),
                         fix=f"check that the right file was given; to read it anyway set {LIMIT_ENV}")
    return data


def decode_utf8(data: bytes, source: str, kind: str = "file") -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise InputError(f"not UTF-8 text ({err.reason} at byte {err.start})", file=source, line=line,
                         fix=f"save the {kind} as UTF-8") from None


def read_text(path: str | os.PathLike[str], kind: str = "file", limit: int = CONFIG_LIMIT) -> str:
    """A whole UTF-8 text file (a leading BOM is dropped)."""
    text = decode_utf8(read_bytes(path, kind, limit), str(path), kind)
    return text[1:] if text.startswith("\ufeff") else text


# ---------------------------------------------------------------- JSON


class _JsonRefused(ValueError):
    """Raised inside the parser's hooks; turned into an InputError with the file by `loads`."""

    def __init__(self, message: str, token: str | None = None) -> None:
        super().__init__(message)
        self.token = token  # the refused literal, to find its line and column (the hooks are not told where)


def _outside_strings(text: str) -> Iterator[tuple[int, str]]:
    """(index, character) of every character of JSON text outside string literals (their quotes included)."""
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        else:
            yield i, ch


def _token_position(text: str, token: str) -> tuple[int | None, int | None]:
    """Line and column (1-based) of the first `token` outside a JSON string, or (None, None)."""
    for i, ch in _outside_strings(text):
        if ch == token[0] and text.startswith(token, i):
            line_start = text.rfind("\n", 0, i) + 1
            return text.count("\n", 0, i) + 1, i - line_start + 1
    return None, None


def _refuse_constant(token: str) -> Any:
    raise _JsonRefused(f"{token} is not a JSON number (strict JSON has no NaN or Infinity)", token)


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise _JsonRefused(f"the number {token[:40]} is too large: it overflows to infinity", token)
    return value


def _bounded_int(token: str) -> int:
    digits = token.lstrip("-")
    if len(digits) > INT_DIGITS:
        raise _JsonRefused(f"an integer of {len(digits)} digits ({token[:20]}...) is larger than any value this "
                           f"tool reads", token)
    return int(token)


def _no_conflicting_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out and out[key] != value:
            raise _JsonRefused(f"key {key!r} appears twice in one object with different values; which one counts "
                               f"is ambiguous")
        out[key] = value
    return out


def _depth_problem(data: Any, max_depth: int) -> bool:
    todo = [(data, 1)]
    while todo:
        value, depth = todo.pop()
        if depth > max_depth:
            return True
        if isinstance(value, dict):
            todo.extend((v, depth + 1) for v in value.values() if isinstance(v, (dict, list)))
        elif isinstance(value, list):
            todo.extend((v, depth + 1) for v in value if isinstance(v, (dict, list)))
    return False


def _quick_depth(text: str, max_depth: int) -> bool:
    """Brackets nested deeper than max_depth, ignoring the insides of strings (before parsing: no recursion)."""
    depth = 0
    for _, ch in _outside_strings(text):
        if ch in "[{":
            depth += 1
            if depth > max_depth:
                return True
        elif ch in "]}":
            depth -= 1
    return False


def loads(text: str, source: str | None = None, kind: str = "file", max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Strict JSON text -> Python. Errors name the file, line and column (or the JSON path where known)."""
    fix = f"the {kind} must be strict JSON: check it near that place, or re-create it"
    if text.count("[") + text.count("{") > max_depth and _quick_depth(text, max_depth):
        raise InputError(f"JSON nested too deeply (more than {max_depth} levels)", file=source,
                         fix=f"no {kind} nests this deep: check that the right file was given")
    try:
        data = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float, parse_int=_bounded_int,
                          object_pairs_hook=_no_conflicting_duplicates)
    except json.JSONDecodeError as err:
        if kind != "trace" and text.startswith(("//", "/*", "#"), err.pos):
            raise InputError("invalid JSON: a comment (JSON has no comments)", file=source, line=err.lineno,
                             column=err.colno, fix='remove it, or keep the note in a "_comment" key') from None
        raise InputError(f"invalid JSON: {err.msg}", file=source, line=err.lineno, column=err.colno,
                         fix="check commas, quotes and brackets near that place (JSON allows no comments or "
                             "trailing commas)" if kind != "trace" else fix) from None
    except _JsonRefused as err:
        line, column = _token_position(text, err.token) if err.token else (None, None)
        raise InputError(f"invalid JSON: {err}", file=source, line=line, column=column, fix=fix) from None
    except RecursionError:
        raise InputError("JSON nested too deeply to read", file=source,
                         fix=f"no {kind} nests this deep: check that the right file was given") from None
    except ValueError as err:  # int/str conversion limits and similar
        raise InputError(f"invalid JSON: {err}", file=source, fix=fix) from None
    if _depth_problem(data, max_depth):
        raise InputError(f"JSON nested too deeply (more than {max_depth} levels)", file=source,
                         fix=f"no {kind} nests this deep: check that the right file was given")
    return data


def load_json(path: str | os.PathLike[str], kind: str = "file", limit: int = CONFIG_LIMIT,
              max_depth: int = MAX_JSON_DEPTH) -> Any:
    """A strict JSON file (plain, or gzip-compressed when the name ends in .gz), read within `limit` bytes
    (uncompressed size for .gz)."""
    p = str(path)
    data = _gunzip(path, kind, limit) if p.endswith(".gz") else read_bytes(path, kind, limit)
    text = decode_utf8(data, p, kind)
    return loads(text[1:] if text.startswith("\ufeff") else text, p, kind, max_depth)


def load_json_object(path: str | os.PathLike[str], kind: str = "file", limit: int = CONFIG_LIMIT) -> dict[str, Any]:
    data = load_json(path, kind, limit)
    if not isinstance(data, dict):
        raise InputError(f"expected a JSON object {{...}} at the top level, got {json_type(data)}", file=str(path),
                         line=1, fix=f"pass a {kind}")
    return data


def _gunzip(path: str | os.PathLike[str], kind: str, limit: int) -> bytes:
    cap = limit_for(limit)
    with open_binary(path, kind, limit) as raw:
        try:
            with gzip.GzipFile(fileobj=raw) as fh:
                data = fh.read(cap + 1)
        except (OSError, EOFError, gzip.BadGzipFile) as err:
            raise InputError(f"not a readable gzip file: {err}", file=str(path),
                             fix="the file is truncated or not gzip-compressed; re-create it") from None
    if len(data) > cap:
        raise InputError(f"{kind} is over the limit of {cap:,} bytes uncompressed", file=str(path),
                         fix=f"check that the right file was given; to read it anyway set {LIMIT_ENV}")
    return data


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "true/false", int: "a number", float: "a number", str: "a string", list: "an array",
            dict: "an object"}.get(type(value), type(value).__name__)


def dumps(data: Any, **kwargs: Any) -> str:
    """The project's JSON encoder: NaN and Infinity are a bug here (ValueError), never a token in a file."""
    return json.dumps(data, allow_nan=False, **kwargs)


# ---------------------------------------------------------------- typed values


def finite(value: Any, source: str | None, where: str, *, line: int | None = None,
           low: float | None = None) -> float:
    """A finite number (int or float, not bool) at least `low`; else an InputError naming the place."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{where}: expected a number, got {json_type(value)} {str(value)[:40]!r}", file=source,
                         line=line, fix="the file is corrupt or not of this kind; re-create it")
    if isinstance(value, int):
        if abs(value) > INT64_MAX:
            raise InputError(f"{where}: {value} is out of range (over 2^63)", file=source, line=line,
                             fix="the file is corrupt; re-create it")
        number = float(value)
    else:
        number = value
    if not math.isfinite(number):
        raise InputError(f"{where}: {value} is not a finite number", file=source, line=line,
                         fix="the file is corrupt; re-create it")
    if low is not None and number < low:
        raise InputError(f"{where}: {value} is below {low:g}", file=source, line=line,
                         fix="the file is corrupt; re-create it")
    return number


def int_in_range(value: Any, source: str | None, where: str, *, line: int | None = None, low: int = 0,
                 high: int = INT64_MAX) -> int:
    """An integer in [low, high] (a float with an integral value is accepted); else an InputError."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"{where}: expected a whole number, got {json_type(value)} {str(value)[:40]!r}",
                         file=source, line=line, fix="the file is corrupt or not of this kind; re-create it")
    if not low <= value <= high:
        raise InputError(f"{where}: {value} is outside [{low}, {high}]", file=source, line=line,
                         fix="the file is corrupt: no profiler writes this value; re-create it")
    return value


# ---------------------------------------------------------------- shapes of machine-written JSON

# A shape: a Python type (or tuple of them), `None` for null, or {"key": shape, ...} (an object; keys ending in "?"
# are optional), or [shape] (an array of shape). Extra keys are allowed: files gain fields across versions.
Shape = Any


_TYPE_NAMES = {str: "a string", int: "a whole number", float: "a number", bool: "true/false", dict: "an object",
               list: "an array"}


def _fits_type(value: Any, kind: Any) -> bool:
    if kind is None:
        return value is None
    if isinstance(value, bool):
        return kind is bool
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


def _describe(shape: Shape) -> str:
    if isinstance(shape, dict):
        return "an object"
    if isinstance(shape, list):
        return "an array"
    if shape is None:
        return "null"
    return _TYPE_NAMES.get(shape, str(shape))


def check_shape(value: Any, shape: Shape, source: str | None, where: str = "", fix: str | None = None) -> None:
    """Raise an InputError naming the JSON path of the first value that does not fit `shape`."""
    fix = fix or "the file is corrupt or was edited by hand; re-create it"
    for alternative in shape if isinstance(shape, tuple) else (shape,):
        if isinstance(alternative, dict) and isinstance(value, dict):
            for key, sub in alternative.items():
                name = key.rstrip("?")
                if name not in value:
                    if key.endswith("?"):
                        continue
                    raise InputError(f"'{name}' is missing", file=source, where=where or None, fix=fix)
                check_shape(value[name], sub, source, f"{where}.{name}" if where else name, fix)
            return
        if isinstance(alternative, list) and isinstance(value, list):
            for i, item in enumerate(value):
                check_shape(item, alternative[0], source, f"{where}[{i}]", fix)
            return
        if not isinstance(alternative, (dict, list)) and _fits_type(value, alternative):
            return
    wanted = " or ".join(_describe(alt) for alt in (shape if isinstance(shape, tuple) else (shape,)))
    raise InputError(f"expected {wanted}, got {json_type(value)}", file=source, where=where or None, fix=fix)


# ---------------------------------------------------------------- settings from environment variables

# Decimal notation only: float() would also take "nan", "inf", "1_000" and non-ASCII digits.
_ENV_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_ON = ("1", "yes", "true", "on")
_OFF = ("0", "no", "false", "off")


def number(raw: str, *, low: float = -math.inf, high: float = math.inf, integer: bool = False,
           low_open: bool = False) -> int | float:
    """The one rule for a number a user types (a command-line option, an environment variable): decimal notation only
    (no NaN, Infinity, `1_000` or non-ASCII digits), finite, a whole number when `integer`, within [low, high] (above
    `low` when `low_open`). A ValueError says what was wrong and what to give instead."""
    raw = raw.strip()
    kind = "a whole number" if integer else "a number"
    span = describe_range(low, high, low_open)
    value = float(raw) if _ENV_NUMBER.fullmatch(raw) and len(raw) < 40 else math.nan
    if not math.isfinite(value) or (integer and not value.is_integer()):
        raise ValueError(f"{bounded(raw, 60)!r} is not {kind}; give {kind} {span}")
    if value < low or value > high or (low_open and value == low):
        raise ValueError(f"{bounded(raw, 60)!r} is out of range; give {kind} {span}")
    return int(value) if integer else value


def describe_range(low: float, high: float, low_open: bool = False) -> str:
    if math.isinf(high):
        return f"{'above' if low_open else 'of at least'} {_plain(low)}" if math.isfinite(low) else ""
    return f"{'above' if low_open else 'from'} {_plain(low)} {'and at most' if low_open else 'to'} {_plain(high)}"


def bounded(text: str, limit: int = 200) -> str:
    """A user's value echoed in a message: at most `limit` characters, the rest counted (a 10 MB regex must not
    become 10 MB of stderr)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text.encode('utf-8', 'replace')):,} bytes)"


def env_number(env: Mapping[str, str], name: str, default: float, *, low: float = 0, high: float = 1e15,
               integer: bool = False) -> float:
    """Environment variable `name` by `number`'s rule; unset or blank gives `default`. Anything else (text, NaN,
    Infinity, out of range) is an InputError naming the variable. Stdlib only: the embedded tracer reads its
    settings with this inside the user's workload."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return number(raw, low=low, high=high, integer=integer)
    except ValueError as err:
        what, _, give = str(err).partition("; ")
        raise InputError(what, where=name, fix=f"set it to {give.removeprefix('give ')}, or unset it (default "
                                                f"{_plain(default)})") from None


def _plain(number: float) -> str:
    return f"{number:,.0f}" if float(number).is_integer() and abs(number) < 1e16 else f"{number:g}"


def env_flag(env: Mapping[str, str], name: str, default: bool = False) -> bool:
    """Environment variable `name` as on/off (1/0, yes/no, true/false, on/off, any case); unset or blank gives
    `default`; anything else is an InputError naming the variable."""
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in _ON or raw in _OFF:
        return raw in _ON
    raise InputError(f"{raw[:60]!r} is not on or off", where=name,
                     fix=f"set it to 1 or 0 (yes/no, true/false, on/off), or unset it (default {int(default)})")


def env_choice(env: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    """Environment variable `name` as one of `choices` (any case); unset or blank gives `default`."""
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in choices:
        return raw
    raise InputError(f"{raw[:60]!r} is not one of {', '.join(choices)}", where=name,
                     fix=f"set it to one of {', '.join(choices)}, or unset it (default {default})")
