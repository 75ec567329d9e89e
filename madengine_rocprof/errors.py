"""One error type for bad user input: it says where, what is wrong, and how to fix it.

The CLI prints it on stderr and exits with `exit_code`; nothing is written when it is raised.
"""
from __future__ import annotations

EXIT_INVALID = 2  # bad input: file, config, counters, command line


class UserError(Exception):
    """Input the user can fix. Rendered as `FILE:LINE:COL: WHERE: WHAT (fix: FIX)`."""

    def __init__(
        self,
        what: str,
        *,
        file: str | None = None,
        where: str | None = None,
        fix: str | None = None,
        line: int | None = None,
        column: int | None = None,
        exit_code: int = EXIT_INVALID,
    ) -> None:
        super().__init__(what)
        self.what = what
        self.file = file
        self.where = where
        self.fix = fix
        self.line = line
        self.column = column
        self.exit_code = exit_code

    def __str__(self) -> str:
        location = ""
        if self.file:
            location = str(self.file)
            if self.line is not None:
                location += f":{self.line}"
                if self.column is not None:
                    location += f":{self.column}"
        parts = [p for p in (location, self.where) if p]
        text = ": ".join(parts + [self.what]) if parts else self.what
        if self.fix:
            text += f"\n  fix: {self.fix}"
        return text


class UserErrors(UserError):
    """Several independent problems in one input, reported together."""

    def __init__(self, errors: list[UserError]) -> None:
        if not errors:
            raise ValueError("UserErrors needs at least one error")
        super().__init__(errors[0].what, file=errors[0].file, exit_code=errors[0].exit_code)
        self.errors = errors

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)
