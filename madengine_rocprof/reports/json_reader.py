"""rocprofv3 `--output-format json` (results.json, top key `rocprofiler-sdk-tool`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from madengine_rocprof import inputs
from madengine_rocprof.errors import UserError
from madengine_rocprof.reports import dispatches
from madengine_rocprof.reports.csv_readers import check_dispatches
from madengine_rocprof.reports.model import TimingSource

TOP_KEY = "rocprofiler-sdk-tool"
FIX = "the file is corrupt or not a rocprofv3 results.json; re-run the profiler"


def is_rocprofv3_json(path: Path) -> bool:
    """Cheap check on the first bytes: legacy rocprof and other tools also write results.json."""
    if not inputs.is_regular(path):
        return False
    try:
        with inputs.open_binary(path, "results.json") as fh:
            return TOP_KEY in fh.read(4096).decode("utf-8", errors="replace")
    except (UserError, OSError):
        return False


def _load(path: Path) -> list[dict]:
    doc = inputs.load_json(path, "rocprofv3 results.json", inputs.JSON_TRACE_LIMIT)
    tool = doc.get(TOP_KEY) if isinstance(doc, dict) else None
    if isinstance(tool, dict):
        tool = [tool]  # older SDKs write one object, newer ones a list (one per process)
    if not isinstance(tool, list) or not all(isinstance(t, dict) for t in tool):
        raise UserError(f"no `{TOP_KEY}` object", file=str(path), where=TOP_KEY, fix="pass a rocprofv3 results.json")
    return tool


def _kernel_names(path: Path, tool: dict, where: str) -> dict[int, str]:
    symbols = tool.get("kernel_symbols", [])
    if not isinstance(symbols, (dict, list)):
        raise UserError(f"kernel_symbols is {inputs.json_type(symbols)}, expected an object or an array",
                        file=str(path), where=f"{where}.kernel_symbols", fix=FIX)
    items = symbols.values() if isinstance(symbols, dict) else symbols
    names: dict[int, str] = {}
    for n, sym in enumerate(items):
        place = f"{where}.kernel_symbols[{n}]"
        if not isinstance(sym, dict) or "kernel_id" not in sym:
            raise UserError("kernel symbol without kernel_id", file=str(path), where=place, fix=FIX)
        kernel_id = inputs.int_in_range(sym["kernel_id"], str(path), f"{place}.kernel_id")
        name = sym.get("formatted_kernel_name") or sym.get("demangled_kernel_name") or sym.get("kernel_name") or "?"
        if not isinstance(name, str):
            raise UserError(f"the kernel name is {inputs.json_type(name)}, expected a string", file=str(path),
                            where=place, fix=FIX)
        if names.get(kernel_id, name) != name:  # which name would its dispatches count under?
            raise UserError(f"kernel_id {kernel_id} names two kernels: {names[kernel_id][:60]!r} and {name[:60]!r}",
                            file=str(path), where=place, fix=FIX)
        names[kernel_id] = name
    return names


def _object(value: object, path: Path, where: str) -> dict:
    if not isinstance(value, dict):
        raise UserError(f"expected an object, got {inputs.json_type(value)}", file=str(path), where=where, fix=FIX)
    return value


def _handle(value: object) -> str:
    return str(value.get("handle", "?") if isinstance(value, dict) else value)


def _records(path: Path, tool: dict, n: int, kind: str, what: str) -> Iterator[tuple[dict, str, int, int]]:
    """(record, its JSON path, start, end) of every `buffer_records.<kind>` record of tool n, typed and checked."""
    where = f"{TOP_KEY}[{n}].buffer_records"
    records = _object(tool.get("buffer_records", {}), path, where).get(kind, [])
    if not isinstance(records, list):
        raise UserError(f"expected an array, got {inputs.json_type(records)}", file=str(path),
                        where=f"{where}.{kind}", fix=FIX)
    for i, rec in enumerate(records):
        place = f"{where}.{kind}[{i}]"
        rec = _object(rec, path, place)
        for key in ("start_timestamp", "end_timestamp"):
            if key not in rec:
                raise UserError(f"{what} record lacks {key}", file=str(path), where=place, fix=FIX)
        start = inputs.int_in_range(rec["start_timestamp"], str(path), f"{place}.start_timestamp",
                                    high=inputs.UINT64_MAX)
        end = inputs.int_in_range(rec["end_timestamp"], str(path), f"{place}.end_timestamp", high=inputs.UINT64_MAX)
        if end < start:
            raise UserError("end_timestamp is before start_timestamp", file=str(path), where=place, fix=FIX)
        yield rec, place, start, end


def _dispatches(path: Path, tools: list[dict] | None = None) -> Iterator[tuple[str, int, int, str]]:
    for n, tool in enumerate(_load(path) if tools is None else tools):
        names = _kernel_names(path, tool, f"{TOP_KEY}[{n}]")
        for rec, place, start, end in _records(path, tool, n, "kernel_dispatch", "kernel dispatch"):
            if "dispatch_info" not in rec:
                raise UserError("kernel dispatch record lacks dispatch_info", file=str(path), where=place, fix=FIX)
            info = _object(rec["dispatch_info"], path, f"{place}.dispatch_info")
            kernel_id = inputs.int_in_range(info.get("kernel_id"), str(path), f"{place}.dispatch_info.kernel_id")
            if kernel_id not in names:
                raise UserError(f"kernel_id {kernel_id} is not in kernel_symbols", file=str(path), where=place, fix=FIX)
            track = f"agent {_handle(info.get('agent_id', {}))} queue {_handle(info.get('queue_id', {}))}"
            yield names[kernel_id], start, end, track


def _agent(value) -> str:
    return f"agent {_handle(value)}"


def _copies(path: Path, tools: list[dict], devices: set[str]) -> dict[str, list]:
    """buffer_records.memory_copy (field names of rocprofiler-sdk's serializer) as dispatch-table rows; the device
    is the destination agent if kernels ran there, else the source agent if they did, else the destination."""
    rows: dict[str, list] = {"name": [], "start": [], "end": [], "device": []}
    for n, tool in enumerate(tools):
        for rec, _, start, end in _records(path, tool, n, "memory_copy", "memory copy"):
            dst, src = _agent(rec.get("dst_agent_id")), _agent(rec.get("src_agent_id"))
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
    table = dispatches.frame(rows)
    check_dispatches(table, str(src.path))
    copies = _copies(src.path, tools, set(rows["device"]))
    return dispatches.aggregate(src, table, dispatches.frame(copies) if copies["name"] else None)


def iter_json(path: Path) -> Iterator[tuple[str, int, int, str]]:
    yield from _dispatches(path)
