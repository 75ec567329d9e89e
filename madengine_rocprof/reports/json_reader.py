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


def _dispatches(path: Path, tools: list[dict] | None = None) -> Iterator[tuple[str, int, int, str]]:
    for n, tool in enumerate(_load(path) if tools is None else tools):
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


def _agent(value) -> str:
    return f"agent {value.get('handle', '?') if isinstance(value, dict) else value}"


def _copies(path: Path, tools: list[dict], devices: set[str]) -> dict[str, list]:
    """buffer_records.memory_copy (field names of rocprofiler-sdk's serializer) as dispatch-table rows; the device
    is the destination agent if kernels ran there, else the source agent if they did, else the destination."""
    rows: dict[str, list] = {"name": [], "start": [], "end": [], "device": []}
    for n, tool in enumerate(tools):
        records = tool.get("buffer_records", {}).get("memory_copy", [])
        for i, rec in enumerate(records):
            where = f"{TOP_KEY}[{n}].buffer_records.memory_copy[{i}]"
            try:
                start, end = int(rec["start_timestamp"]), int(rec["end_timestamp"])
                dst, src = _agent(rec.get("dst_agent_id")), _agent(rec.get("src_agent_id"))
            except (KeyError, TypeError, ValueError) as err:
                raise UserError(
                    f"memory copy record lacks or has a bad {err}", file=str(path), where=where,
                    fix="the file is corrupt; re-run the profiler",
                ) from None
            if end < start:
                raise UserError("end_timestamp is before start_timestamp", file=str(path), where=where)
            rows["name"].append(f"memory copy {rec.get('operation', '')}".strip())
            rows["start"].append(start)
            rows["end"].append(end)
            rows["device"].append(dst if dst in devices or src not in devices else src)
    return rows


def read_json(src: TimingSource) -> TimingSource:
    """Kernel dispatches, and the same process's memory copies for the devices' busy time."""
    tools = _load(src.path)
    rows: dict[str, list] = {"name": [], "start": [], "end": [], "device": []}
    for name, start, end, track in _dispatches(src.path, tools):
        rows["name"].append(name)
        rows["start"].append(start)
        rows["end"].append(end)
        rows["device"].append(track.split(" queue ")[0])
    copies = _copies(src.path, tools, set(rows["device"]))
    return dispatches.aggregate(src, dispatches.frame(rows), dispatches.frame(copies) if copies["name"] else None)


def iter_json(path: Path) -> Iterator[tuple[str, int, int, str]]:
    yield from _dispatches(path)
