"""Counter profiles: rocprofv3 text counter files (`pmc:` lines), parsed strictly.

rocprofv3 reads only lines containing a lower-case `pmc:`; it silently ignores `pmc :` and `PMC:` lines and (6.3+)
turns a commented `#pmc:` line into an empty extra pass. We refuse all three so a file means what it says.
Each pmc line is one pass: the workload is re-run once per line.

Header comments we understand (optional):
    # description: what the profile measures
    # architectures: gfx90a gfx942 gfx1100
"""
from __future__ import annotations

import re

from pydantic import BaseModel, Field, model_validator

from madengine_rocprof.errors import UserError, UserErrors

COUNTER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]*(\[[0-9]+\])?$")
ARCH_NAME = re.compile(r"^gfx[0-9a-f]+$")
_PMC = re.compile(r"^pmc:(.*)$")
_PMC_LIKE = re.compile(r"pmc\s*:", re.IGNORECASE)
_HEADER = re.compile(r"^#\s*(description|architectures)\s*:\s*(.*)$", re.IGNORECASE)


PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class CounterProfile(BaseModel):
    """A named set of counters: the pass plan (one list per pmc line) and the architectures it was checked for."""

    name: str = Field(pattern=PROFILE_NAME.pattern)
    description: str = ""
    architectures: list[str] = Field(default_factory=list, description="gfx names the file claims to support")
    passes: list[list[str]] = Field(min_length=1, description="pass plan: one list of counters per pmc line")

    @model_validator(mode="after")
    def _names(self) -> CounterProfile:
        for arch in self.architectures:
            if not ARCH_NAME.match(arch):
                raise ValueError(
                    f"'{arch}' is not a gfx architecture name (fix: use names such as gfx90a, gfx942, gfx1100)"
                )
        seen: set[str] = set()
        for i, group in enumerate(self.passes):
            if not group:
                raise ValueError(f"pass {i + 1} is empty (fix: remove it)")
            for c in group:
                if not COUNTER_NAME.match(c):
                    raise ValueError(
                        f"'{c}' is not a counter name (fix: use names as `rocprofv3 --list-avail` prints them)"
                    )
                if c in seen:
                    raise ValueError(f"counter {c} is listed twice (fix: keep one)")
                seen.add(c)
        return self

    @property
    def counters(self) -> list[str]:
        return [c for group in self.passes for c in group]

    def counters_by_arch(self) -> dict[str, list[str]]:
        """Per-architecture counter lists (a text file uses the same counters on every architecture it claims)."""
        return {arch: self.counters for arch in self.architectures}

    def to_text(self) -> str:
        """Render in rocprofv3's text format."""
        lines = [f"# {self.name}"]
        if self.description:
            lines.append(f"# description: {self.description}")
        if self.architectures:
            lines.append(f"# architectures: {' '.join(self.architectures)}")
        lines.append(f"# {len(self.passes)} pass(es): the workload runs {len(self.passes)} time(s)")
        lines += ["pmc: " + " ".join(group) for group in self.passes]
        return "\n".join(lines) + "\n"


def parse_counter_text(text: str, name: str, source: str | None = None) -> tuple[CounterProfile, dict[str, int]]:
    """Parse a rocprofv3 text counter file. Returns the profile and {counter: line number}.

    Raises UserErrors listing every bad line.
    """
    errors: list[UserError] = []
    if not PROFILE_NAME.match(name):  # the profile is known by this name (tools, `counters check NAME`, the registry)
        errors.append(UserError(f"'{name}' (the file's name) cannot name a counter profile", file=source,
                                fix="rename the file: letters, digits, '_', '.' and '-', starting with a letter "
                                    "or digit, e.g. my_counters.txt"))
    passes: list[list[str]] = []
    lines_of: dict[str, int] = {}
    description = ""
    architectures: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            header = _HEADER.match(line)
            if header:
                if header.group(1).lower() == "description":
                    description = header.group(2).strip()
                else:
                    architectures = header.group(2).replace(",", " ").split()
            elif _PMC_LIKE.search(line):
                errors.append(
                    UserError(
                        "commented-out pmc line: rocprofv3 6.3+ still runs it as an EMPTY extra pass",
                        file=source,
                        line=lineno,
                        fix="delete the line (or reword the comment without 'pmc:')",
                    )
                )
            continue
        match = _PMC.match(line)
        if not match:
            if _PMC_LIKE.match(line):
                errors.append(
                    UserError(
                        f"'{line.split(':')[0]}:' is silently IGNORED by rocprofv3 (it reads only lower-case 'pmc:' "
                        "with no space)",
                        file=source,
                        line=lineno,
                        fix="write the line as 'pmc: COUNTER ...'",
                    )
                )
            elif re.match(r"^(range|gpu|kernel)\s*:", line, re.IGNORECASE):
                errors.append(
                    UserError(
                        f"'{line.split(':')[0]}:' lines are legacy rocprof syntax; rocprofv3 ignores them",
                        file=source,
                        line=lineno,
                        fix="remove it; filter kernels with the tool's kernel_include_regex instead",
                    )
                )
            else:
                errors.append(UserError("not a 'pmc:' line or a '#' comment", file=source, line=lineno,
                                        fix="counter files hold only 'pmc: COUNTER ...' lines and '# comments'"))
            continue
        names = match.group(1).replace(",", " ").split()
        if not names:
            errors.append(
                UserError("pmc line lists no counters", file=source, line=lineno, fix="add counters or delete the line")
            )
            continue
        for counter in names:
            if not COUNTER_NAME.match(counter):
                errors.append(UserError(f"'{counter}' is not a counter name", file=source, line=lineno,
                                        fix="use names as `rocprofv3 --list-avail` prints them"))
            elif counter in lines_of:
                errors.append(
                    UserError(
                        f"counter {counter} already listed on line {lines_of[counter]}",
                        file=source,
                        line=lineno,
                        fix="keep one",
                    )
                )
            else:
                lines_of[counter] = lineno
        passes.append(names)
    if not passes and not errors:
        errors.append(
            UserError(
                "no 'pmc:' lines: the file collects nothing",
                file=source,
                fix="add a line such as 'pmc: SQ_WAVES GRBM_GUI_ACTIVE'",
            )
        )
    for arch in architectures:
        if not ARCH_NAME.match(arch):
            errors.append(
                UserError(
                    f"'{arch}' in '# architectures:' is not a gfx name",
                    file=source,
                    fix="e.g. '# architectures: gfx90a gfx942'",
                )
            )
    if errors:
        raise UserErrors(errors)
    return CounterProfile(name=name, description=description, architectures=architectures, passes=passes), lines_of
