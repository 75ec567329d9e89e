"""rocprofv3 `--output-format json` (results.json, top key `rocprofiler-sdk-tool`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import dispatches
from madengine_rocprof.reports.model import TimingSource

TOP_KEY = "rocprofiler-sdk-tool"


def is_rocprofv3_json(path: Path) -> bool:
    """Cheap check on the first bytes: legacy rocprof and other tools also write results.json."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return TOP_KEY in fh.read(4096)
    except OSError:
        return False


def _load(path: Path) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except json.JSONDecodeError as err:
        raise UserError(
            f"not valid JSON: {err.msg}",
            file=str(path),
            line=err.lineno,
            column=err.colno,
            fix="the file is truncated or corrupt; re-run the profiler",
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"cannot read: {err}", file=str(path)) from None
    tool = doc.get(TOP_KEY) if isinstance(doc, dict) else None
    if isinstance(tool, dict):
        tool = [tool]  # older SDKs write one object, newer ones a list (one per process)
    if not isinstance(tool, list) or not all(isinstance(t, dict) for t in tool):
        raise UserError(f"no `{TOP_KEY}` object", file=str(path), where=TOP_KEY, fix="pass a rocprofv3 results.json")
    return tool


def _kernel_names(path: Path, tool: dict, where: str) -> dict[int, str]:
    symbols = tool.get("kernel_symbols", [])
    items = symbols.values() if isinstance(symbols, dict) else symbols
    names = {}
    for sym in items:
        if not isinstance(sym, dict) or "kernel_id" not in sym:
            raise UserError("kernel symbol without kernel_id", file=str(path), where=f"{where}.kernel_symbols")
        names[int(sym["kernel_id"])] = (
            sym.get("formatted_kernel_name") or sym.get("demangled_kernel_name") or sym.get("kernel_name") or "?"
        )
    return names


def _dispatches(path: Path) -> Iterator[tuple[str, int, int, str]]:
    for n, tool in enumerate(_load(path)):
        where = f"{TOP_KEY}[{n}]"
        names = _kernel_names(path, tool, where)
        records = tool.get("buffer_records", {}).get("kernel_dispatch", [])
        for i, rec in enumerate(records):
            try:
                info = rec["dispatch_info"]
                kernel_id = int(info["kernel_id"])
                start, end = int(rec["start_timestamp"]), int(rec["end_timestamp"])
                queue = info.get("queue_id", {})
                agent = info.get("agent_id", {})
            except (KeyError, TypeError, ValueError) as err:
                raise UserError(
                    f"kernel dispatch record lacks or has a bad {err}",
                    file=str(path),
                    where=f"{where}.buffer_records.kernel_dispatch[{i}]",
                    fix="the file is corrupt; re-run the profiler",
                ) from None
            if kernel_id not in names:
                raise UserError(
                    f"kernel_id {kernel_id} is not in kernel_symbols",
                    file=str(path),
                    where=f"{where}.buffer_records.kernel_dispatch[{i}]",
                )
            if end < start:
                raise UserError(
                    "end_timestamp is before start_timestamp",
                    file=str(path),
                    where=f"{where}.buffer_records.kernel_dispatch[{i}]",
                )
            track = f"agent {agent.get('handle', '?') if isinstance(agent, dict) else agent} queue " + str(
                queue.get("handle", "?") if isinstance(queue, dict) else queue
            )
            yield names[kernel_id], start, end, track


def read_json(src: TimingSource) -> TimingSource:
    rows: dict[str, list] = {"name": [], "start": [], "end": [], "device": []}
    for name, start, end, track in _dispatches(src.path):
        rows["name"].append(name)
        rows["start"].append(start)
        rows["end"].append(end)
        rows["device"].append(track.split(" queue ")[0])
    return dispatches.aggregate(src, dispatches.frame(rows))


def iter_json(path: Path) -> Iterator[tuple[str, int, int, str]]:
    yield from _dispatches(path)
