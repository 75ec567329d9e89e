"""One result row per case (and variant) per run, stored as JSON lines in benchmarks/results/<area>.jsonl.

A row says what was measured (case, variant, figures with units), on what (device, versions), from which code
(commit) and how to reproduce it (the exact command). Rows are only ever appended; the table in RESULTS.md shows
the newest row per case, variant and device.
"""
from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

SCHEMA = 1
RESULTS_DIR = Path(__file__).resolve().parent / "results"
AREAS = ("workloads", "tracer", "reports", "escalate", "slurm", "gate", "runner")
REQUIRED = ("schema", "area", "case", "variant", "figures", "device", "versions", "commit", "command", "date", "source")
SOURCES = ("measured", "imported")


class BadRow(ValueError):
    """A row that breaks the schema; the message says which file, line and field."""


def figure(name: str, unit: str, values: Sequence[float], note: str | None = None) -> dict[str, Any]:
    """min / median / max of one quantity over the rounds (one value: all three equal)."""
    if not values:
        raise ValueError(f"figure {name!r}: no values")
    out: dict[str, Any] = {"name": name, "unit": unit, "n": len(values), "min": min(values),
                           "median": statistics.median(values), "max": max(values)}
    if note:
        out["note"] = note
    return out


def fixed(name: str, unit: str, value: float | str, note: str | None = None) -> dict[str, Any]:
    """A figure quoted as one value (a count, a yes/no, or one run's result)."""
    out: dict[str, Any] = {"name": name, "unit": unit, "value": value}
    if note:
        out["note"] = note
    return out


def make_row(area: str, case: str, variant: str, figures: list[dict[str, Any]], env: dict[str, Any],
             command: str, *, source: dict[str, Any] | None = None, note: str | None = None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "schema": SCHEMA, "area": area, "case": case, "variant": variant, "figures": figures,
        "device": env["device"], "versions": env["versions"], "commit": env["commit"], "command": command,
        "date": env["date"], "source": source or {"kind": "measured"},
    }
    if note:
        row["note"] = note
    validate(row)
    return row


def validate(row: Any, where: str = "row") -> None:
    """Raise BadRow naming the field when `row` breaks the schema."""
    if not isinstance(row, dict):
        raise BadRow(f"{where}: a row is a JSON object")
    missing = [k for k in REQUIRED if k not in row]
    if missing:
        raise BadRow(f"{where}: missing field(s) {', '.join(missing)}")
    if row["schema"] != SCHEMA:
        raise BadRow(f"{where}.schema: {row['schema']!r}, this code reads schema {SCHEMA}")
    if row["area"] not in AREAS:
        raise BadRow(f"{where}.area: {row['area']!r} is not one of {', '.join(AREAS)}")
    if not str(row["case"]).startswith(row["area"] + "."):
        raise BadRow(f"{where}.case: {row['case']!r} does not start with its area '{row['area']}.'")
    if row["source"].get("kind") not in SOURCES:
        raise BadRow(f"{where}.source.kind: one of {', '.join(SOURCES)}")
    if row["source"]["kind"] == "imported" and not (row["source"].get("commit") and row["source"].get("from")):
        raise BadRow(f"{where}.source: an imported row names the file it came `from` and the `commit` holding it")
    if not isinstance(row["figures"], list) or not row["figures"]:
        raise BadRow(f"{where}.figures: a non-empty list")
    for i, fig in enumerate(row["figures"]):
        at = f"{where}.figures[{i}]"
        if not isinstance(fig, dict) or not fig.get("name") or "unit" not in fig:
            raise BadRow(f"{at}: needs a name and a unit")
        if "value" in fig:
            continue
        if any(k not in fig for k in ("min", "median", "max")):
            raise BadRow(f"{at}: needs min, median and max (or one value)")
        if not fig["min"] <= fig["median"] <= fig["max"]:
            raise BadRow(f"{at}: min <= median <= max does not hold ({fig['min']}, {fig['median']}, {fig['max']})")
    if not isinstance(row["device"], dict) or not row["device"].get("name"):
        raise BadRow(f"{where}.device: needs a name")


def append(rows: Iterable[dict[str, Any]], results_dir: Path = RESULTS_DIR) -> list[Path]:
    """Append rows to <results_dir>/<area>.jsonl (validated first: nothing is written when one is bad)."""
    rows = list(rows)
    for i, row in enumerate(rows):
        validate(row, f"row {i}")
    results_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for area in dict.fromkeys(r["area"] for r in rows):
        path = results_dir / f"{area}.jsonl"
        with path.open("a") as fh:
            for row in rows:
                if row["area"] == area:
                    fh.write(json.dumps(row, sort_keys=True) + "\n")
        written.append(path)
    return written


def load(path: Path) -> list[dict[str, Any]]:
    """Every row of one .jsonl file, validated (BadRow names the file and line)."""
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise BadRow(f"{path}:{number}: not JSON ({err.msg}, column {err.colno})") from None
        validate(row, f"{path}:{number}")
        rows.append(row)
    return rows


def load_all(results_dir: Path = RESULTS_DIR) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in sorted(results_dir.glob("*.jsonl")):
        rows += load(path)
    return rows
