"""Kineto JSON traces written the way torch.profiler's exporter lays them out (torch 2.13's output_json.cpp: one
key per line, `ts`/`dur` with three decimals), for tests and benchmarks/tracer. Names go through json.dumps, as
Kineto escapes them."""
from __future__ import annotations

import json
from collections.abc import Iterable

HEADER = ('{\n  "schemaVersion": 1,\n  "deviceProperties": [],\n  "displayTimeUnit": "ms",\n'
          '  "baseTimeNanoseconds": %d,\n  "traceEvents": [\n')
META = ('  {\n    "ph": "M",\n    "name": "process_name",\n    "ts": %s,\n    "pid": %d,\n    "tid": 0,\n'
        '    "args": {\n      "name": "python"\n    }\n  },\n')
CPU_OP = ('  {\n    "ph": "X",\n    "cat": "cpu_op",\n    "name": %s,\n    "pid": %d,\n    "tid": %d,\n'
          '    "ts": %s,\n    "dur": %s\n    ,\n    "args": {\n      "External id": %d,"Record function id": 0,'
          ' "Ev Idx": %d\n    }\n  },\n')
KERNEL = ('  {\n    "ph": "X",\n    "cat": "kernel",\n    "name": %s,\n    "pid": %d,\n    "tid": %d,\n'
          '    "ts": %s,\n    "dur": %s\n    ,\n    "args": {\n      "External id": %d, "queued": 0, "device": %d,'
          ' "context": 1, "stream": %d, "correlation": %d, "registers per thread": %d, "shared memory": %d,'
          ' "blocks per SM": 0.5, "warps per SM": 4, "grid": [%d, %d, %d], "block": [%d, %d, %d],'
          ' "est. achieved occupancy %%": 0\n    }\n  },\n')
RUNTIME = ('  {\n    "ph": "X",\n    "cat": "cuda_runtime",\n    "name": %s,\n    "pid": %d,\n    "tid": %d,\n'
           '    "ts": %s,\n    "dur": %s\n    ,\n    "args": {\n      "External id": %d, "cbid": 211,'
           ' "correlation": %d\n    }\n  },\n')
FOOTER = ('  {\n    "ph": "i",\n    \n    "s": "g",\n    "name": "Record Window End",\n    "pid": "",\n'
          '    "tid": "",\n    "ts": %s\n    \n  }\n  ],"traceName": "/tmp/x.json" }')


def us(ns: int) -> str:
    """Integer nanoseconds as Kineto prints microseconds: three decimals."""
    return f"{ns // 1000}.{ns % 1000:03d}"


CPU_OP_EXTERNAL_LATER = ('  {\n    "ph": "X",\n    "cat": "cpu_op",\n    "name": %s,\n    "pid": %d,\n    "tid": %d,\n'
                         '    "ts": %s,\n    "dur": %s\n    ,\n    "args": {\n      "Record function id": 0,'
                         ' "Concrete Inputs": ["", "{1}"], "External id": %d, "Ev Idx": %d\n    }\n  },\n')
SPAN = ('  {\n    "ph": "X", "cat": "Trace", "ts": %s, "dur": 1.000,\n    "pid": "Spans", "tid": "PyTorch Profiler",\n'
        '    "name": "PyTorch Profiler (0)",\n    "args": {\n      "Op count": 0\n    }\n  },\n')


def cpu_op(name: str, tid: int, start_ns: int, dur_ns: int, external: int, pid: int = 4242,
           external_first: bool = True) -> str:
    """A cpu_op event; `external_first=False`: "External id" later in the args (other Kineto versions)."""
    layout = CPU_OP if external_first else CPU_OP_EXTERNAL_LATER
    return layout % (json.dumps(name, ensure_ascii=False), pid, tid, us(start_ns), us(dur_ns), external, external)


def span(start_ns: int) -> str:
    """Kineto's profiler span: an X event with its keys in another order, in a category no reader wants."""
    return SPAN % us(start_ns)


def kernel(name: str, start_ns: int, dur_ns: int, corr: int, *, device: int = 0, stream: int = 7, regs: int = 32,
           shared: int = 0, grid=(1, 1, 1), block=(128, 1, 1)) -> str:
    return KERNEL % (json.dumps(name, ensure_ascii=False), device, stream, us(start_ns), us(dur_ns), corr, device,
                     stream, corr, regs, shared, *grid, *block)


def runtime_call(name: str, tid: int, start_ns: int, dur_ns: int, corr: int, pid: int = 4242) -> str:
    return RUNTIME % (json.dumps(name, ensure_ascii=False), pid, tid, us(start_ns), us(dur_ns), corr, corr)


def document(base_ns: int, events: Iterable[str], end_ns: int = 0) -> str:
    return HEADER % base_ns + META % (us(0), 4242) + "".join(events) + FOOTER % us(end_ns)


def write(path, base_ns: int, events: Iterable[str], end_ns: int = 0) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(HEADER % base_ns + META % (us(0), 4242))
        for e in events:
            fh.write(e)
        fh.write(FOOTER % us(end_ns))
