"""Which pattern of an ordered list first matches each of many texts, as column operations.

Classifying a kernel name tries up to ~75 regular expressions (categories.py) in order. One Python `re.search` per
pattern per name costs ~100 us a name: minutes for a trace of 1M distinct names (Triton autotuning, templated
kernels). Here each pattern runs once over the whole column of texts no earlier pattern took (polars: Rust's
linear-time regex engine), so the Python work per text is a few list operations.

Rust's engine has no lookaround (`(?<![a-z])adam`, `norm(?!al)`): such a pattern runs with its lookarounds removed,
which matches a superset, and Python's `re` confirms the texts that superset takes. The two engines agree on ASCII
text without line breaks (the kernel-name keys); any other text is classified by Python's `re` alone, so the result
is always `first_match(text, patterns)`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_LOOKAROUND_START = ("(?<!", "(?<=", "(?!", "(?=")


# The column engine sees ASCII text only (see `first_matches`), where Unicode and ASCII classes agree; its Unicode
# `\w{0,80}` builds automata 10x slower than the ASCII one
_ASCII_ESCAPES = {"\\w": "[0-9A-Za-z_]", "\\d": "[0-9]", "\\b": "(?-u:\\b)"}
_ASCII_IN_CLASS = {"\\w": "0-9A-Za-z_", "\\d": "0-9"}


def column_pattern(pattern: str) -> tuple[str, bool]:
    """`pattern` for the column engine on ASCII text, and whether it matches exactly the same texts (False: a
    superset, made by removing its lookaround groups; a removed assertion can only let more texts match)."""
    out: list[str] = []
    exact = True
    i = 0
    while i < len(pattern):
        if pattern.startswith(_LOOKAROUND_START, i):
            exact = False
            i = _group_end(pattern, i)
        elif pattern[i] == "\\":
            out.append(_ASCII_ESCAPES.get(pattern[i : i + 2], pattern[i : i + 2]))
            i += 2
        elif pattern[i] == "[":
            end = _class_end(pattern, i)
            members = re.sub(r"\\.", lambda m: _ASCII_IN_CLASS.get(m.group(), m.group()), pattern[i:end])
            out.append(members)
            i = end
        else:
            out.append(pattern[i])
            i += 1
    return "".join(out), exact


def _class_end(pattern: str, start: int) -> int:
    """Index after the character class opening at `start` (`]` first in the class is a literal)."""
    i = start + 1
    if pattern.startswith("^", i):
        i += 1
    if pattern.startswith("]", i):
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def _group_end(pattern: str, start: int) -> int:
    """Index after the group opening at `start` (nested groups, escapes and character classes skipped)."""
    depth, i = 0, start
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            i = _class_end(pattern, i)
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError(f"unbalanced group in pattern {pattern!r}")


def first_match(text: str, patterns: Sequence[re.Pattern]) -> int:
    """Index of the first pattern that `search`es `text`, -1 when none: what `first_matches` computes per text."""
    for index, pattern in enumerate(patterns):
        if pattern.search(text):
            return index
    return -1


def _column_safe(text: str) -> bool:
    return text.isascii() and "\n" not in text and "\r" not in text


class OrderedPatterns:
    """Patterns tried in order; `first_matches(texts)` gives, for each text, the index of the first that matches."""

    def __init__(self, patterns: Sequence[re.Pattern]) -> None:
        self.patterns = tuple(patterns)
        self.columns = tuple(column_pattern(p.pattern) for p in self.patterns)
        for p in self.patterns:  # the column engine sees the pattern's text only, not its flags
            if p.flags & ~re.UNICODE:
                raise ValueError(f"a pattern for columns takes no flags (lower-case the text instead): {p.pattern!r}")

    def first_matches(self, texts: Sequence[str], lower: bool = False) -> list[int]:
        """`first_match` of each text (of `text.lower()` with `lower`: lower-cased in the column, no copy of the
        texts in Python; ASCII lower-cases the same in both)."""
        import polars as pl  # here, not at the top: `run`/`validate` classify nothing and must parse without polars

        result = [-1] * len(texts)
        in_column = []
        for i, text in enumerate(texts):
            if _column_safe(text):
                in_column.append(i)
            else:
                result[i] = first_match(text.lower() if lower else text, self.patterns)
        values = pl.Series([texts[i] for i in in_column], dtype=pl.String)
        left = pl.DataFrame({"i": pl.Series(in_column, dtype=pl.UInt32),
                             "text": values.str.to_lowercase() if lower else values})
        for index, (pattern, (column, exact)) in enumerate(zip(self.patterns, self.columns, strict=True)):
            if left.height == 0:
                break
            hit = left["text"].str.contains(column)
            if not hit.any():
                continue
            taken, left = left.filter(hit), left.filter(~hit)
            if not exact:  # a superset took these: Python's `re` keeps those the pattern itself matches
                matched = pl.Series([pattern.search(text) is not None for text in taken["text"]], dtype=pl.Boolean)
                taken, rest = taken.filter(matched), taken.filter(~matched)
                if rest.height:
                    left = pl.concat([left, rest])  # row order does not matter: each row carries its index
            for i in taken["i"]:
                result[i] = index
        return result
