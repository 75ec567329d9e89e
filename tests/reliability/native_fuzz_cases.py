"""Generated cases for the native readers' red-team pass (issue 33): real rocprofv3 kernel-trace CSVs and real Kineto
traces, mutated by a seeded random generator (case i is the same every run), each read by `report --json` with the
native reader on and off.

Both readers vouch only for a strict layout and hand anything else to the Python readers, so the contract per case:
the same exit code, and with exit 0 the same report (less generated_at), with exit 2 the same message; never exit 70,
"internal error" or a traceback (class 4); a valid-but-unusual file (the `valid` mutations) is read, never refused
(class 5). Used by test_reliability_fuzz_native.py (a fixed, small count) and by `python -m
tests.reliability.native_fuzz_cases --count N` for a longer measurement.
"""
from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import os
import random
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from madengine_rocprof.reports import csv_native, kineto_native

from .contract_helpers import BUG_MARK, cli

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "fixtures"
CSV_SEEDS = [FIX / "rocprofv3" / "docs-data" / "kernel_trace.csv",
             FIX / "rocprofv3" / "docs-data-2024" / "kernel_trace.csv"]
# small real traces (each report well under a second); events past MAX_EVENTS are dropped to keep a case fast
KINETO_SEEDS = [FIX / "kineto" / d for d in (
    "kineto_after_fix", "hta_cpu_only", "hta_mi250_minitoy", "ours_h100_gemm", "ours_h200_tt_v4",
    "tracelens_torch_compile_triton", "ours_h100_tt_v4_graph", "tracelens_mi210_gpu_only")]
MAX_EVENTS = 400
TRICKY_NAMES = ['k}, {"ph": "X"', 'a","b', "caf\u00e9_kernel", 'q"uote', "back\\slash", "tab\there",
                "\u6f22\u5b57<\U0001f600>", "x" * 70_000, "}, {", "\\u00e9", "a,b,c", " lead", "trail "]
INT64 = [0, 1, 2**31 - 1, 2**31, 2**53 + 1, 2**62, 2**63 - 2, 2**63 - 1, 2**63, 2**64, -1]
ODD = ["", "nan", "inf", "-inf", "Infinity", "1e400", "-1", "+5", " 7", "1_000", "\u0663", "0x10", "-0", "9" * 30,
       "1e3", "1.5", "null", "true", '"12"', "[]", "{}"]
INSERTS = ["\x00", '"', ",", "\n", "\r", "\ufeff", "\u00e9", "\\", "\t", "{", "}", "]", "[", "\x01", "\xff", ":"]


# ------------------------------------------------------------------------------------------------ CSV mutations


def _csv_quote(field: str) -> str:
    return '"' + field.replace('"', '""') + '"'


def csv_case(rng: random.Random, seed: str) -> tuple[bytes, str, bool]:
    """(file bytes, what was done, valid: a file the Python reader reads and so must never be refused)."""
    parsed = list(csv.reader(io.StringIO(seed)))
    cols = parsed[0]
    header = ",".join(_csv_quote(c) for c in cols)
    rows = [[f if f.isdigit() else _csv_quote(f) for f in row] for row in parsed[1:] if row]
    name_at, start_at, end_at = cols.index("Kernel_Name"), cols.index("Start_Timestamp"), cols.index("End_Timestamp")
    kind = rng.choice(["valid_name", "valid_crlf", "valid_quoted", "valid_int64", "valid_many", "valid_noeol",
                       "valid_blank", "truncate", "insert", "value", "dup", "drop", "swap", "fields", "bom",
                       "giant_line", "escape_quote"])
    valid = kind.startswith("valid")
    if kind == "valid_name":
        for row in rows:
            if rng.random() < 0.5:
                row[name_at] = _csv_quote(rng.choice(TRICKY_NAMES))
    elif kind == "valid_quoted":
        rows = [[f if f.startswith('"') else _csv_quote(f) for f in row] for row in rows]
    elif kind == "valid_int64":
        for row in rows:
            a, b = sorted((rng.choice(INT64[:8]), rng.choice(INT64[:8])))
            row[start_at], row[end_at] = str(a), str(b)
    elif kind == "valid_many":  # many distinct names
        base = rows[0]
        rows = []
        for i in range(rng.choice([2_000, 20_000])):
            row = list(base)
            row[name_at] = _csv_quote(f"k_{i}_{rng.random()}")
            rows.append(row)
    elif kind == "escape_quote":
        rows[rng.randrange(len(rows))][name_at] = '"a ""quoted"" name"'
        valid = True
    elif kind == "giant_line":
        rows[rng.randrange(len(rows))][name_at] = _csv_quote("g" * rng.choice([1 << 20, 3 << 20]))
        valid = True
    elif kind == "fields":
        row = rows[rng.randrange(len(rows))]
        row.insert(rng.randrange(len(row) + 1), rng.choice(["", "x", '"y"']))
    elif kind == "swap":
        row = rows[rng.randrange(len(rows))]
        a, b = rng.randrange(len(row)), rng.randrange(len(row))
        row[a], row[b] = row[b], row[a]
    elif kind == "dup":
        rows.insert(rng.randrange(len(rows)), list(rows[rng.randrange(len(rows))]))
    elif kind == "drop" and len(rows) > 1:
        del rows[rng.randrange(len(rows))]
    elif kind == "value":
        row = rows[rng.randrange(len(rows))]
        row[rng.choice([start_at, end_at, rng.randrange(len(row))])] = rng.choice(ODD + [str(v) for v in INT64])
    text = "\n".join([header] + [",".join(r) for r in rows]) + "\n"
    if kind == "valid_crlf":
        text = text.replace("\n", "\r\n")
    elif kind == "valid_noeol":
        text = text.rstrip("\n")
    elif kind == "valid_blank":
        parts = text.split("\n")
        parts.insert(rng.randrange(1, len(parts)), "")
        text = "\n".join(parts)
    elif kind == "bom":
        text = "\ufeff" + text
    elif kind == "truncate":
        text = text[: rng.randrange(len(text))]
    elif kind == "insert":
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(text) + 1)
            text = text[:i] + rng.choice(INSERTS) + text[i:]
    data = text.encode("utf-8", "surrogateescape") if "\xff" not in text else text.encode("latin-1", "replace")
    return data, kind, valid


# --------------------------------------------------------------------------------------------- Kineto mutations


def _load_kineto(folder: Path) -> tuple[dict, str]:
    path = next(p for p in sorted(folder.iterdir()) if p.name.endswith((".json", ".json.gz")))
    raw = path.read_bytes()
    doc = json.loads(gzip.decompress(raw) if path.name.endswith(".gz") else raw)
    doc["traceEvents"] = doc["traceEvents"][:MAX_EVENTS]
    return doc, path.name.removesuffix(".gz")


def _dump(rng: random.Random, doc: dict) -> str:
    style = rng.choice(["compact", "indent1", "indent4", "torch", "ascii"])
    if style == "compact":
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
    if style == "indent1":
        return json.dumps(doc, indent=1, ensure_ascii=False)
    if style == "indent4":
        return json.dumps(doc, indent=4, ensure_ascii=False)
    if style == "ascii":
        return json.dumps(doc, ensure_ascii=True)
    # torch's own layout: one event per line, "  {...},"
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    events = ",\n".join("  " + json.dumps(e, ensure_ascii=False) for e in doc["traceEvents"])
    return json.dumps(head)[:-1] + ', "traceEvents": [\n' + events + "\n]}"


def _ts_text(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}"


def kineto_case(rng: random.Random, doc: dict) -> tuple[bytes, str, bool]:
    doc = json.loads(json.dumps(doc))
    events = [e for e in doc["traceEvents"] if isinstance(e, dict)]
    kind = rng.choice(["valid_names", "valid_order", "valid_decimals", "valid_crlf", "valid_int64", "valid_style",
                       "valid_many", "valid_deep_args", "ts_string", "dur_odd", "dup_key", "truncate", "insert",
                       "exponent", "bom", "giant_event", "nest_deep", "retype", "drop_key"])
    valid = kind.startswith("valid")
    timed = [e for e in events if "ts" in e] or events
    raw_ts: dict[int, str] = {}  # id(event) -> literal ts text to put in the JSON
    if kind == "valid_names":
        for e in events:
            if e.get("ph") == "X" and rng.random() < 0.5:
                e["name"] = rng.choice(TRICKY_NAMES)
    elif kind == "valid_order":
        for i, e in enumerate(events):
            items = list(e.items())
            rng.shuffle(items)
            events[i] = dict(items)
        doc["traceEvents"] = events
    elif kind == "valid_decimals":
        d = rng.randint(0, 3)
        for e in timed:
            if isinstance(e.get("ts"), (int, float)):
                raw_ts[id(e)] = _ts_text(round(float(e["ts"]), d), d)
    elif kind == "valid_int64":
        for e in events:
            if isinstance(e.get("args"), dict):
                for k in ("correlation", "External id", "stream"):
                    if k in e["args"]:
                        e["args"][k] = rng.choice(INT64[:8])
    elif kind == "valid_many":
        proto = next((e for e in events if e.get("cat") in ("kernel", "cpu_op")), None)
        if proto is not None:
            for i in range(rng.choice([2_000, 10_000])):
                e = dict(proto)
                e["name"] = f"distinct_{i}_{rng.random()}"
                events.append(e)
            doc["traceEvents"] = events
    elif kind == "valid_deep_args":
        e = rng.choice(events)
        nest: object = 1
        for _ in range(rng.choice([5, 40, 200])):
            nest = {"n": nest}
        e.setdefault("args", {})
        if isinstance(e["args"], dict):
            e["args"]["deep"] = nest
    elif kind == "nest_deep":
        e = rng.choice(events)
        depth = rng.choice([1000, 5000])
        e["args"] = {"deep": "@DEEP@"}
    elif kind == "ts_string":
        e = rng.choice(timed)
        e["ts"] = rng.choice(["1_000.000", " 12.5", "\u0663", "12", "1e3"])
    elif kind == "dur_odd":
        e = rng.choice(timed)
        e["dur"] = rng.choice([float("inf"), float("nan"), -1, 1e308, 2**64, 0, -0.0, 1e-9])
    elif kind == "retype":
        e = rng.choice(events)
        e[rng.choice(list(e))] = rng.choice([None, True, [], {}, "x", 2**70, -5])
    elif kind == "drop_key":
        e = rng.choice(events)
        del e[rng.choice(list(e))]
    elif kind == "giant_event":
        e = rng.choice(events)
        e["name"] = "G" * rng.choice([1 << 20, 4 << 20])
        valid = True
    text = _dump(rng, doc)
    if kind == "nest_deep":  # too deep for json.dumps: spliced in as text
        text = text.replace('"@DEEP@"', "[" * depth + "1" + "]" * depth)
    if raw_ts:
        # rewrite every "ts": number with the chosen decimals (a valid JSON number either way)
        d = len(next(iter(raw_ts.values())).partition(".")[2])
        text = re.sub(r'("ts": ?)(-?\d+(?:\.\d+)?)', lambda m: m.group(1) + _ts_text(float(m.group(2)), d), text)
    if kind == "valid_crlf":
        text = text.replace("\n", "\r\n")
    elif kind == "dup_key":
        spots = list(re.finditer(r'\{"(ph|name|ts|cat)": ?', text))
        if spots:
            s = rng.choice(spots)
            text = text[: s.end()] + json.dumps(rng.choice(["X", 5, None])) + ", " + text[s.start() + 1:]
    elif kind == "exponent":
        spots = list(re.finditer(r'"(ts|dur)": ?(\d+(?:\.\d+)?)', text))
        if spots:
            s = rng.choice(spots)
            odd = rng.choice(["1e3", "1E+2", "1e1000000", "Infinity", "-0", "0.0001", "00"])
            text = text[: s.start(2)] + odd + text[s.end(2):]
    elif kind == "bom":
        text = "\ufeff" + text
    elif kind == "truncate":
        text = text[: rng.randrange(len(text))]
    elif kind == "insert":
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(len(text) + 1)
            text = text[:i] + rng.choice(INSERTS) + text[i:]
    return text.encode("utf-8", "surrogatepass"), kind, valid


# ------------------------------------------------------------------------------------------------- running a case


def _report(run: Path, out: Path, native: bool) -> tuple[int, object, str]:
    os.environ[csv_native.ENV_SWITCH] = os.environ[kineto_native.ENV_SWITCH] = "1" if native else "0"
    try:
        code, _, err = cli("report", run, "--json", out, "-q", "--top", "1000")
    finally:
        os.environ.pop(csv_native.ENV_SWITCH, None)
        os.environ.pop(kineto_native.ENV_SWITCH, None)
    body: object = None
    if code == 0:
        body = json.loads(out.read_text())
        assert isinstance(body, dict)
        body.pop("generated_at", None)
        out.unlink()
    return code, body, err


def run_case(reader: str, index: int, tmp: Path) -> dict:
    """One generated case: returns what happened (for counting); raises AssertionError on a broken contract."""
    rng = random.Random(f"{reader}:{index}")
    if reader == "csv":
        seed = rng.choice(CSV_SEEDS)
        data, kind, valid = csv_case(rng, seed.read_text())
        name = "kernel_trace.csv"
    else:
        doc, name = _load_kineto(rng.choice(KINETO_SEEDS))
        data, kind, valid = kineto_case(rng, doc)
        if rng.random() < 0.5:
            data, name = gzip.compress(data, 1), name + ".gz"
    run = tmp / f"{reader}{index}"
    run.mkdir()
    (run / name).write_bytes(data)
    native = _report(run, tmp / f"n{index}.json", True)
    why_not = (csv_native if reader == "csv" else kineto_native).why_not
    python = _report(run, tmp / f"p{index}.json", False)
    where = f"{reader} case {index} ({kind})"
    for code, _, err in (native, python):
        assert code in (0, 2), (where, code, err[-2000:])
        assert "Traceback" not in err and BUG_MARK not in err and "internal error" not in err, (where, err[-3000:])
        if code == 2:
            assert err.startswith("error: "), (where, err[-2000:])
    assert native[0] == python[0], (where, native[0], python[0], native[2][-1500:], python[2][-1500:])
    if native[0] == 0:
        assert native[1] == python[1], (where, "reports differ")
    else:
        assert native[2] == python[2], (where, native[2][-1500:], python[2][-1500:])
    if valid:
        assert native[0] == 0, (where, "a valid file refused", native[2][-1500:])
    return {"kind": kind, "code": native[0], "native": why_not == "", "why_not": why_not[:60]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=600, help="cases per reader")
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--reader", choices=["csv", "kineto", "both"], default="both")
    args = parser.parse_args(argv)
    readers = ["csv", "kineto"] if args.reader == "both" else [args.reader]
    failures = 0
    for reader in readers:
        seen: Counter = Counter()
        began = time.monotonic()
        for i in range(args.first, args.first + args.count):
            with tempfile.TemporaryDirectory(prefix="nfuzz_") as tmp:
                try:
                    got = run_case(reader, i, Path(tmp))
                except AssertionError as exc:
                    failures += 1
                    print(f"FAIL {exc}"[:3000], flush=True)
                    continue
            seen[(got["kind"], got["code"], got["native"])] += 1
            seen["why:" + got["why_not"]] += 1
        print(f"{reader}: {args.count} cases in {time.monotonic() - began:.0f} s")
        for key, n in sorted(seen.items(), key=str):
            print(f"  {key}: {n}")
    print(f"failures: {failures}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())


# ------------------------------------------------------------------- the Kineto scanner fed in pieces of any size


def pieces_case(index: int, tmp: Path, piece: int) -> dict:
    """A generated valid-but-unusual trace (escapes, `}, {` in names, UTF-8, any key order, CRLF) read natively with
    every decompressed chunk handed to the scanner in pieces of `piece` bytes, so events, strings, escapes, numbers
    and UTF-8 sequences are cut at every position; the report must equal the Python reader's."""
    from madengine_rocprof.reports import kineto_reader as kr

    rng = random.Random(f"pieces:{index}")
    doc, name = _load_kineto(rng.choice(KINETO_SEEDS))
    doc["traceEvents"] = doc["traceEvents"][:60]
    for e in doc["traceEvents"]:
        if isinstance(e, dict) and e.get("ph") == "X" and rng.random() < 0.6:
            e["name"] = rng.choice([n for n in TRICKY_NAMES if len(n) < 1000]) + rng.choice(["", "\u00e9", "\\"])
    style = random.Random(f"pieces-style:{index}")
    while True:  # a valid layout of a small trace (a giant or 10,000-event one would take long fed a byte at a time)
        data, kind, valid = kineto_case(style, doc)
        if valid and kind not in ("valid_many", "giant_event"):
            break
    run = tmp / f"pieces{index}_{piece}"
    run.mkdir()
    (run / name).write_bytes(data)
    real = kr._Stream.next_chunk

    def in_pieces(stream):
        chunk, at = getattr(stream, "_piece_of", (b"", 0))
        if at >= len(chunk):
            chunk, at = real(stream), 0
            if not chunk:
                return chunk
        stream._piece_of = (chunk, at + piece)
        return chunk[at:at + piece]

    kr._Stream.next_chunk = in_pieces  # type: ignore[method-assign]
    try:
        native = _report(run, tmp / f"pn{index}.json", True)
        why_not = kineto_native.why_not
    finally:
        kr._Stream.next_chunk = real  # type: ignore[method-assign]
    python = _report(run, tmp / f"pp{index}.json", False)
    where = f"pieces case {index} piece {piece} ({kind})"
    assert native[0] == python[0] and native[1] == python[1] and (native[0] == 0 or native[2] == python[2]), (
        where, native[0], python[0], native[2][-800:], python[2][-800:])
    return {"kind": kind, "code": native[0], "native": why_not == "", "why_not": why_not[:60]}
