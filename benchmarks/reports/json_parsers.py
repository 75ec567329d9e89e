"""Which JSON parser for Kineto traces: CPU seconds to decode one 64 MiB block of the benchmark trace's events.

Usage: python benchmarks/reports/json_parsers.py TRACE.json.gz   (make_kineto_trace.py writes one)
Best of 3 per parser, CPU time (process_time), so the machine's load does not enter. orjson is timed when it is
importable (it is not a dependency: it has no way to keep a float's text, so timestamps would pass through a float).
"""

from __future__ import annotations

import gzip
import json
import sys
import time
from decimal import Decimal
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
from madengine_rocprof.reports import kineto_reader  # noqa: E402


def main() -> int:
    with gzip.open(sys.argv[1], "rb") as fh:
        raw = fh.read(64 << 20)
    start = raw.index(b'"traceEvents": [') + len(b'"traceEvents": [')
    block = b"[" + raw[start: next(kineto_reader._boundaries(raw))] + b"]"
    parsers = {
        "msgspec, typed records, floats as text (the reader)": kineto_reader._EVENTS.decode,
        "json (stdlib), parse_float=str": lambda b: json.loads(b, parse_float=str),
        "json (stdlib), parse_float=Decimal": lambda b: json.loads(b, parse_float=Decimal),
    }
    try:
        import orjson  # type: ignore[import-not-found]

        parsers["orjson (floats: binary, inexact)"] = orjson.loads
    except ImportError:
        pass
    for label, decode in parsers.items():
        best = min(_cpu(decode, block) for _ in range(3))
        print(f"{label}: {best:.3f} s CPU, {len(block) / best / 1e6:.0f} MB/s")
    return 0


def _cpu(decode, block: bytes) -> float:
    start = time.process_time()
    decode(block)
    return time.process_time() - start


if __name__ == "__main__":
    sys.exit(main())
