"""User-written regular expressions (kernel rules), matched in linear time.

Python's `re` backtracks: a rule such as `(a+)+$` takes exponential time on a long kernel name and hangs every report
that classifies kernels. User patterns are therefore compiled with RE2 (google-re2), whose matching time is linear in
the name's length for any pattern. RE2 has no backreferences or lookaround; a pattern that uses them is refused when
the rules file is checked, registered or loaded, with the reason. Built-in taxonomy patterns are the project's own
and stay in `re`.
"""
from __future__ import annotations

from typing import Any

SYNTAX_HELP = ("RE2 syntax (Python `re` without backreferences and lookaround), matched anywhere in the name, "
               "case-insensitive")


class UserPattern:
    """A compiled user pattern: `.pattern` (the text) and `.search(name)` (a match or None), as with `re`."""

    def __init__(self, pattern: str, compiled: Any) -> None:
        self.pattern = pattern
        self._compiled = compiled

    def search(self, name: str) -> Any:
        try:
            return self._compiled.search(name)
        except UnicodeEncodeError:  # a lone surrogate (from a JSON \ud800 escape): RE2 matches UTF-8 bytes
            return self._compiled.search(name.encode("utf-8", "replace").decode("utf-8"))

    def __repr__(self) -> str:
        return f"UserPattern({self.pattern!r})"


def compile_user(pattern: str) -> UserPattern:
    """Compile a user's pattern case-insensitively with RE2; ValueError with the reason when RE2 refuses it."""
    try:
        import re2  # type: ignore[import-untyped]
    except ImportError:  # a pinned dependency; missing only after `pip install --no-deps`
        raise ValueError("kernel rules need the google-re2 package (pip install google-re2)") from None
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False  # the reason comes back in the exception; RE2's own log would go to stderr
    try:
        return UserPattern(pattern, re2.compile(pattern, options))
    except re2.error as err:
        reason = err.args[0].decode("utf-8", "replace") if err.args and isinstance(err.args[0], bytes) else str(err)
        raise ValueError(reason) from None
    except (TypeError, UnicodeEncodeError) as err:
        raise ValueError(f"not a usable pattern: {err}") from None
