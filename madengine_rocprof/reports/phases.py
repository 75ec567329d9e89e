"""Which part of a training step the host time of CPU operators went to: forward, backward, optimizer or other.

The trace has the structure, no guess is needed:
- backward: the autograd engine runs each backward node as `autograd::engine::evaluate_function: XBackward0`; that
  operator and every operator nested in it on its thread are backward;
- optimizer: PyTorch wraps every `optimizer.step()` in a record_function range `Optimizer.step#AdamW.step` (Kineto
  category user_annotation); operators that start inside one on the same thread are the optimizer's;
- other: operators inside `Optimizer.zero_grad#...`, and, where the trace marks steps (`ProfilerStep#N`), operators
  outside every step (a step is a window of the whole process: the autograd engine's own thread has no markers);
- forward: the rest: the model's forward, the loss and whatever else runs in the step outside backward and optimizer.
  Without step markers, "forward" holds everything outside the three phases above (the name says so).

Times are self times (cpu_ops: a call's duration less its direct children's), so the phases add up to the host self
time of the report, each nanosecond once. The embedded tracer keeps the markers in `<prefix>phase_markers.csv`
beside its kernel_trace.csv (tracer/convert.py); the Kineto reader takes them from the trace. They are no operators
and never reach the operator tables.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from madengine_rocprof.errors import UserError
from madengine_rocprof.reports.blocks import Column, Section, Table

PHASES = ("forward", "backward", "optimizer", "other")
MARKER = re.compile(r"^(?:Optimizer\.(?:step|zero_grad)#|ProfilerStep#\d+$)")
MARKERS_SUFFIX = "phase_markers.csv"
MARKERS_HEADER = ("Name", "Thread_Id", "Start_Timestamp", "End_Timestamp")
_BACKWARD = "autograd::engine::evaluate_function: "


def markers_file(kernel_trace: Path) -> Path:
    """The embedded tracer's marker file beside a kernel_trace.csv (same prefix)."""
    return kernel_trace.with_name(kernel_trace.name[: -len("kernel_trace.csv")] + MARKERS_SUFFIX)


def read_markers(path: Path) -> list[tuple[str, str, int, int]]:
    """(name, thread, start ns, end ns) of each marker row; a malformed file is bad input, named by line."""
    found = []
    with open(path, newline="", encoding="utf-8") as fh:
        rows = csv.reader(fh)
        header = next(rows, None)
        if header is None or tuple(header) != MARKERS_HEADER:
            raise UserError("not a phase-marker file: the header is not " + ",".join(MARKERS_HEADER), file=str(path),
                            where="line 1", fix="remove the file, or write it again with the embedded tracer")
        for number, row in enumerate(rows, start=2):
            try:
                name, thread, start, end = row
                begin, finish = int(start), int(end)
            except ValueError:
                raise UserError("expected Name,Thread_Id,Start_Timestamp,End_Timestamp with integer times",
                                file=str(path), where=f"line {number}", fix="remove the file, or write it again "
                                "with the embedded tracer") from None
            if finish < begin or not MARKER.match(name):
                raise UserError(f"not a phase marker: {name[:80]!r} from {begin} to {finish}", file=str(path),
                                where=f"line {number}", fix="remove the file, or write it again with the tracer")
            found.append((name, thread, begin, finish))
    return found


def self_time_per_phase(operators: Iterable[tuple[str, object, int, int]],
                        markers: Iterable[tuple[str, object, int, int]]) -> dict[str, int]:
    """Self time (ns) per phase of operator calls (name, thread, start, end), given the markers of the same threads."""
    windows: dict[object, list[tuple[int, int, str]]] = {}
    steps: list[tuple[int, int, str]] = []
    for name, thread, start, end in markers:
        if name.startswith("ProfilerStep#"):
            steps.append((start, end, "step"))
        else:
            kind = "optimizer" if name.startswith("Optimizer.step#") else "other"
            windows.setdefault(str(thread), []).append((start, end, kind))
    by_thread: dict[object, list[tuple[int, int, str]]] = {}
    for name, thread, start, end in operators:
        by_thread.setdefault(str(thread), []).append((start, -end, name))
    totals = dict.fromkeys(PHASES, 0)
    for thread, calls in by_thread.items():
        calls.sort(key=lambda c: (c[0], c[1]))  # a parent before its children (cpu_ops' order)
        marks = windows.get(thread, []) + steps
        stack: list[list] = []  # [end, phase, self time so far]
        for start, neg_end, name in calls:
            end = -neg_end
            while stack and stack[-1][0] <= start:
                done = stack.pop()
                totals[done[1]] += done[2]
            if stack:
                stack[-1][2] -= min(end, stack[-1][0]) - start
            if name.startswith(_BACKWARD) or (stack and stack[-1][1] == "backward"):
                phase = "backward"
            else:
                phase = _window_phase(marks, start, bool(steps))
            stack.append([end, phase, end - start])
        while stack:
            done = stack.pop()
            totals[done[1]] += done[2]
    return totals


def _window_phase(marks: list[tuple[int, int, str]], start: int, steps_marked: bool) -> str:
    inside = {kind for begin, end, kind in marks if begin <= start < end}
    if "optimizer" in inside:
        return "optimizer"
    if "other" in inside or (steps_marked and "step" not in inside):
        return "other"
    return "forward"


def summary(per_source: list[dict[str, int] | None], steps_marked: bool) -> dict[str, Any] | None:
    """The run's phases (sources without markers leave it None: no guess)."""
    known = [p for p in per_source if p is not None]
    if not known:
        return None
    totals = {phase: sum(p[phase] for p in known) for phase in PHASES}
    whole = sum(totals.values())
    return {"self_ns": totals, "share": {k: (v / whole if whole else None) for k, v in totals.items()},
            "steps_marked": steps_marked, "sources": len(known),
            "sources_without_markers": len(per_source) - len(known)}


def section(run: dict[str, Any], top: int) -> Section | None:
    data = run["summary"].get("phases")
    if not data:
        return None
    forward = "forward" if data["steps_marked"] else "forward (and anything else outside the phases)"
    names = {"forward": forward, "backward": "backward (autograd engine)", "optimizer": "optimizer (Optimizer.step)",
             "other": "other (zero_grad, outside the steps)"}
    return Section("Host time per training phase (self time)", blocks=[Table(
        [Column("phase"), Column("time (ms)", "ms"), Column("share", "pct")],
        [[names[p], data["self_ns"][p], data["share"][p]] for p in PHASES],
        note="backward: operators run by the autograd engine (evaluate_function and what it calls); optimizer: "
        "operators inside Optimizer.step; the phases add up to the host self time."
        + (f" {data['sources_without_markers']} process(es) without phase markers are left out."
           if data["sources_without_markers"] else ""),
    )])
