"""The rocprofv3 option vocabulary (the wrapper's input language) and the `--` rule.

Everything before the first literal `--` is parsed against the table below; everything after it is the
application. rocprofv3's boolean options take an OPTIONAL value, so a token after one is a value only when it is a
truth word; anything else means the user forgot `--` and would have had the app swallowed.
"""
from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from typing import Final, Literal

from madengine_rocprof.errors import UserError

# How an option takes values: BOOL an optional truth word, VALUE one value, MULTI one or more, FLAG none.
Kind = Literal["bool", "value", "multi", "flag"]
BOOL: Final = "bool"
VALUE: Final = "value"
MULTI: Final = "multi"
FLAG: Final = "flag"
TRUE_WORDS = {"1", "yes", "y", "true", "t", "on"}
FALSE_WORDS = {"0", "no", "n", "false", "f", "off"}


@dataclass(frozen=True)
class Spec:
    long: str                 # canonical name, e.g. "--kernel-trace"
    kind: Kind
    short: str | None = None  # e.g. "-d"
    since: tuple[int, ...] = (6, 2)  # first ROCm release that has it
    group: str = "other"      # trace | counters | pc | io | post | filter | perfetto | display | advanced


def _s(long: str, kind: Kind, short: str | None = None, since: tuple[int, ...] = (6, 2), group: str = "other") -> Spec:
    return Spec(long, kind, short, since, group)


# rocprofv3 7.0 options (see shared/reference/rocprofv3.md); `since` gates them on older releases.
SPECS: tuple[Spec, ...] = (
    _s("--input", VALUE, "-i", group="io"),
    _s("--output-file", VALUE, "-o", group="io"),
    _s("--output-directory", VALUE, "-d", group="io"),
    _s("--output-format", MULTI, "-f", group="io"),
    _s("--output-config", BOOL, group="io"),
    _s("--log-level", VALUE, group="io"),
    _s("--extra-counters", VALUE, "-E", since=(7, 0), group="counters"),
    _s("--runtime-trace", BOOL, "-r", since=(6, 3), group="trace"),
    _s("--sys-trace", BOOL, "-s", group="trace"),
    _s("--hip-trace", BOOL, group="trace"),
    _s("--marker-trace", BOOL, group="trace"),
    _s("--kernel-trace", BOOL, group="trace"),
    _s("--memory-copy-trace", BOOL, group="trace"),
    _s("--memory-allocation-trace", BOOL, since=(6, 3), group="trace"),
    _s("--scratch-memory-trace", BOOL, group="trace"),
    _s("--hsa-trace", BOOL, group="trace"),
    _s("--rccl-trace", BOOL, group="trace"),
    _s("--kokkos-trace", BOOL, group="trace"),
    _s("--rocdecode-trace", BOOL, since=(6, 4), group="trace"),
    _s("--rocjpeg-trace", BOOL, since=(6, 4), group="trace"),
    _s("--hip-runtime-trace", BOOL, group="trace"),
    _s("--hip-compiler-trace", BOOL, group="trace"),
    _s("--hsa-core-trace", BOOL, group="trace"),
    _s("--hsa-amd-trace", BOOL, group="trace"),
    _s("--hsa-image-trace", BOOL, group="trace"),
    _s("--hsa-finalizer-trace", BOOL, group="trace"),
    _s("--pmc", MULTI, since=(6, 3), group="counters"),
    _s("--pc-sampling-beta-enabled", BOOL, since=(6, 4), group="pc"),
    _s("--pc-sampling-unit", VALUE, since=(6, 4), group="pc"),
    _s("--pc-sampling-method", VALUE, since=(6, 4), group="pc"),
    _s("--pc-sampling-interval", VALUE, since=(6, 4), group="pc"),
    _s("--stats", BOOL, group="post"),
    _s("--summary", BOOL, "-S", group="post"),
    _s("--summary-per-domain", BOOL, "-D", group="post"),
    _s("--summary-groups", MULTI, group="post"),
    _s("--summary-output-file", VALUE, group="post"),
    _s("--summary-units", VALUE, "-u", group="post"),
    _s("--mangled-kernels", BOOL, "-M", group="naming"),
    _s("--truncate-kernels", BOOL, "-T", group="naming"),
    _s("--kernel-rename", BOOL, group="naming"),
    _s("--kernel-include-regex", VALUE, group="filter"),
    _s("--kernel-exclude-regex", VALUE, group="filter"),
    _s("--kernel-iteration-range", MULTI, group="filter"),
    _s("--collection-period", MULTI, "-P", since=(6, 4), group="filter"),
    _s("--collection-period-unit", VALUE, since=(6, 4), group="filter"),
    _s("--selected-regions", BOOL, group="filter"),
    _s("--perfetto-backend", VALUE, group="perfetto"),
    _s("--perfetto-buffer-size", VALUE, group="perfetto"),
    _s("--perfetto-buffer-fill-policy", VALUE, group="perfetto"),
    _s("--perfetto-shmem-size-hint", VALUE, group="perfetto"),
    _s("--list-avail", FLAG, "-L", since=(6, 4), group="display"),
    _s("--list-metrics", FLAG, since=(6, 2), group="display"),  # 6.2/6.3 spelling of --list-avail
    _s("--preload", MULTI, group="advanced"),
    _s("--rocm-root", VALUE, group="advanced"),
    _s("--agent-index", VALUE, "-A", since=(7, 0), group="advanced"),
    _s("--pid", VALUE, "-p", since=(7, 0), group="advanced"),
    _s("--disable-signal-handlers", BOOL, group="advanced"),
    _s("--minimum-output-data", VALUE, group="advanced"),
    _s("--att", BOOL, group="att"),
    _s("--version", FLAG, since=(7, 0), group="display"),
    _s("--help", FLAG, "-h", group="display"),
)
BY_NAME: dict[str, Spec] = {}
for _spec in SPECS:
    BY_NAME[_spec.long] = _spec
    if _spec.short:
        BY_NAME[_spec.short] = _spec

# The wrapper's own options. None of these names exists in rocprofv3, so they can share the space before `--`.
WRAPPER_VALUE = {"--profiler", "--profile"}
WRAPPER_FLAGS = {"--drop-unsupported", "--dry-run", "--fail-on-no-output", "--no-filter"}


@dataclass
class Opt:
    """One parsed rocprofv3 option: canonical long name and its value (None for a bare bool/flag)."""

    name: str
    value: str | list[str] | None = None  # BOOL: truth word or None; VALUE: str; MULTI: list; FLAG: None
    token: str = ""       # what the user typed, for messages

    @property
    def spec(self) -> Spec:
        return BY_NAME[self.name] if self.name in BY_NAME else Spec(self.name, VALUE, group="att")

    @property
    def enabled(self) -> bool:
        """For bool options: True unless the value is a false word."""
        return not (isinstance(self.value, str) and self.value.lower() in FALSE_WORDS)

    @property
    def text(self) -> str:
        """The value of a VALUE option as one string (the parser gives such options exactly one)."""
        return self.value if isinstance(self.value, str) else ",".join(self.items)

    @property
    def items(self) -> list[str]:
        """The values of a MULTI option (a single value as a one-item list, none as an empty one)."""
        if self.value is None:
            return []
        return list(self.value) if isinstance(self.value, list) else [self.value]


@dataclass
class Parsed:
    options: list[Opt] = field(default_factory=list)
    app: list[str] = field(default_factory=list)
    wrapper: dict = field(default_factory=dict)  # profiler, profile, drop_unsupported, dry_run, ...

    def get(self, name: str) -> Opt | None:
        found = [o for o in self.options if o.name == name]
        return found[-1] if found else None

    def on(self, name: str) -> bool:
        opt = self.get(name)
        return bool(opt and opt.enabled)

    def values(self, name: str) -> list[str]:
        """All values given to a MULTI/VALUE option, repeated options concatenated."""
        out: list[str] = []
        for o in self.options:
            if o.name == name:
                out.extend(o.items)
        return out

    def last(self, name: str) -> str | None:
        """The last value given to a VALUE/MULTI option, None when it was not given."""
        given = self.values(name)
        return given[-1] if given else None


def _looks_like_app(token: str) -> bool:
    """A token that is surely the start of a command (used to explain a missing `--`)."""
    base = os.path.basename(token)
    return (
        "/" in token
        or token.endswith((".py", ".sh"))
        or base in {"python", "python3", "bash", "sh", "torchrun", "env", "mpirun", "srun", "deepspeed"}
        or base.startswith("python3.")
    )


def split_dashdash(argv: list[str], *, where: str = "command line", prog: str = "madengine-rocprof wrap"
                   ) -> tuple[list[str], list[str]]:
    """Split at the FIRST literal `--`. A missing `--` is an error (exit 2) that shows the fixed command."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    # Find where the app most likely starts, to print the corrected command.
    start = _guess_app_start(argv)
    if start is None:
        raise UserError(
            "no application given: put the command to profile after `--`",
            where=where,
            fix=f"{prog} " + shlex.join(argv + ["--", "python3", "train.py"]),
        )
    fixed = argv[:start] + ["--"] + argv[start:]
    raise UserError(
        f"missing `--` before the application `{argv[start]}`: rocprofv3 would read it as an option value"
        " (`ValueError: invalid truth value`)",
        where=where,
        fix=f"{prog} " + shlex.join(fixed),
    )


def _guess_app_start(argv: list[str]) -> int | None:
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "-" or not tok.startswith("-"):
            return i
        name, eq, _ = tok.partition("=")
        spec = BY_NAME.get(name)
        if eq or name in WRAPPER_FLAGS or spec is None or spec.kind == FLAG:
            i += 2 if (name in WRAPPER_VALUE and not eq) else 1
            continue
        if spec.kind == BOOL:
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            i += 2 if nxt is not None and nxt.lower() in TRUE_WORDS | FALSE_WORDS else 1
        elif spec.kind == VALUE:
            i += 2
        else:  # MULTI: values until the next option or something that is surely a command
            i += 1
            first = True
            while i < len(argv) and not argv[i].startswith("-") and (first or not _looks_like_app(argv[i])):
                i += 1
                first = False
    return None


def parse(argv: list[str], *, where: str = "command line", prog: str = "madengine-rocprof wrap") -> Parsed:
    """Parse `[wrapper and rocprofv3 options] -- app args`."""
    before, app = split_dashdash(argv, where=where, prog=prog)
    if not app:
        raise UserError("no application after `--`", where=where,
                        fix=f"{prog} " + shlex.join(before + ["--", "python3", "train.py"]))
    parsed = Parsed(app=list(app))
    i = 0
    while i < len(before):
        tok = before[i]
        if not tok.startswith("-") or tok in ("-",):
            raise UserError(
                f"unexpected word `{tok}` before `--`: options only go there",
                where=where,
                fix="put the application and its arguments after `--`",
            )
        name, eq, inline = tok.partition("=")
        if name in WRAPPER_FLAGS:
            parsed.wrapper[name[2:].replace("-", "_")] = True
            i += 1
            continue
        if name in WRAPPER_VALUE:
            value, i = (inline, i + 1) if eq else (_need_value(before, i, name, where), i + 2)
            parsed.wrapper[name[2:]] = value
            continue
        spec = BY_NAME.get(name)
        if spec is None and name.startswith("--att-"):
            spec = Spec(name, VALUE, group="att")  # thread-trace sub-options all take one value
        if spec is None:
            raise UserError(
                f"unknown rocprofv3 option `{name}`" + _closest(name),
                where=where,
                fix="see `rocprofv3 --help` (7.0 option names; abbreviations are rejected by 7.0)",
            )
        if spec.kind == FLAG:
            if eq:
                raise UserError(f"`{name}` takes no value", where=where)
            parsed.options.append(Opt(spec.long, None, tok))
            i += 1
        elif spec.kind == BOOL:
            truth: str | None = inline if eq else None
            if not eq and i + 1 < len(before) and not before[i + 1].startswith("-"):
                truth = before[i + 1]
                i += 1
            if truth is not None and truth.lower() not in TRUE_WORDS | FALSE_WORDS:
                raise UserError(f"invalid truth value `{truth}` for `{name}`", where=where,
                                fix=f"use {name}, {name}=yes or {name}=no")
            parsed.options.append(Opt(spec.long, truth, tok))
            i += 1
        elif spec.kind == VALUE:
            value, i = (inline, i + 1) if eq else (_need_value(before, i, name, where), i + 2)
            parsed.options.append(Opt(spec.long, value, tok))
        else:  # MULTI
            values = [inline] if eq else []
            i += 1
            while i < len(before) and not before[i].startswith("-"):
                values.append(before[i])
                i += 1
            if not values:
                raise UserError(f"`{name}` needs at least one value", where=where)
            parsed.options.append(Opt(spec.long, values, tok))
    return parsed


def _need_value(argv: list[str], i: int, name: str, where: str) -> str:
    if i + 1 >= len(argv):
        raise UserError(f"`{name}` needs a value", where=where)
    return argv[i + 1]


def _closest(name: str) -> str:
    import difflib

    names = [s.long for s in SPECS] + sorted(WRAPPER_VALUE | WRAPPER_FLAGS)
    match = difflib.get_close_matches(name, names, n=1)
    if not match and name.startswith("--"):
        match = [n for n in names if n.startswith(name)][:1]  # an abbreviation (6.x accepted these)
    return f" (did you mean `{match[0]}`?)" if match else ""


def render(options: list[Opt]) -> list[str]:
    """Options back to argv in the long spelling (works on every release; `-f` is 7.0+ only)."""
    out: list[str] = []
    for o in options:
        kind = o.spec.kind
        if kind == FLAG:
            out.append(o.name)
        elif kind == BOOL:
            out.append(o.name if o.value is None else f"{o.name}={o.value}")
        elif kind == VALUE:
            value = o.text
            out.extend([f"{o.name}={value}"] if value.startswith("-") else [o.name, value])
        else:
            out.append(o.name)
            out.extend(o.items)
    return out
