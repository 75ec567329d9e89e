"""One error type for bad user input: it says where, what is wrong, and how to fix it.

The CLI prints it on stderr and exits with `exit_code`; nothing is written when it is raised.
"""
from __future__ import annotations

import errno

EXIT_INVALID = 2  # bad input: file, config, counters, command line; also a file system that refuses (see below)

_OS_FIXES = {
    errno.ENOSPC: "free some space on that file system, or write somewhere else",
    errno.EDQUOT: "free some space (disk quota), or write somewhere else",
    errno.EROFS: "that file system is read-only: choose a writable folder",
    errno.EACCES: "no permission there: choose a folder you can write to, or fix its permissions",
    errno.EPERM: "no permission there: choose a folder you can write to, or fix its permissions",
    errno.ENOTDIR: "a file stands where a folder is expected: move it away or choose another path",
    errno.EISDIR: "a folder stands where a file is expected: choose another path",
    errno.EEXIST: "something already exists there that is not what is expected: move it away or choose another path",
    errno.ENAMETOOLONG: "a file name is too long for the file system: choose a shorter name or path",
    errno.ELOOP: "too many symbolic links on the path: use a real folder",
    errno.ENOENT: "check the path",
}


def from_os_error(err: OSError, doing: str = "") -> UserError:
    """A file system refusal (full disk, read-only tree, a file where a folder should be, ...) as a UserError."""
    what = err.strerror or str(err)
    if doing:
        what = f"{doing}: {what}"
    target = err.filename if err.filename is not None else None
    if err.filename2 is not None:
        target = f"{err.filename} -> {err.filename2}"
    return UserError(what, file=None if target is None else str(target), fix=_OS_FIXES.get(err.errno or 0))


def too_deep(doing: str = "") -> UserError:
    """RecursionError from a reader: the input nests deeper than any real file does."""
    return UserError(f"{doing + ': ' if doing else ''}input nested too deeply to read (JSON nesting over ~1000 levels)",
                     fix="this is not a file this tool writes or reads: check that the right file was given")


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
            location = _bounded(str(self.file))
            if self.line is not None:
                location += f":{self.line}"
                if self.column is not None:
                    location += f":{self.column}"
        parts = [p for p in (location, _bounded(self.where or "")) if p]
        what = _bounded(self.what)
        text = ": ".join(parts + [what]) if parts else what
        if self.fix:
            text += f"\n  fix: {_bounded(self.fix)}"
        return text


class UserErrors(UserError):
    """Several independent problems in one input, reported together."""

    def __init__(self, errors: list[UserError]) -> None:
        if not errors:
            raise ValueError("UserErrors needs at least one error")
        super().__init__(errors[0].what, file=errors[0].file, exit_code=errors[0].exit_code)
        self.errors = errors

    def __str__(self) -> str:
        shown = [str(e) for e in self.errors[:MAX_LISTED]]
        if len(self.errors) > MAX_LISTED:  # 100,000 duplicate counters must not print 200,000 lines
            shown.append(f"... and {len(self.errors) - MAX_LISTED:,} more problem(s) in the same input, not listed "
                         "(fix the ones above and check again)")
        return "\n".join(shown)


# Every message is bounded where it is printed: a value echoed from the input (a 10 MB regex or config key) is cut
# in the middle, keeping its start and the reason after it; a list of problems shows its first MAX_LISTED.
MAX_PART = 1000
MAX_LISTED = 20


def _bounded(text: str) -> str:
    if len(text) <= MAX_PART:
        return text
    head, tail = text[: MAX_PART * 3 // 4], text[-MAX_PART // 4 :]
    return f"{head} ... ({len(text) - len(head) - len(tail):,} characters not shown) ... {tail}"
