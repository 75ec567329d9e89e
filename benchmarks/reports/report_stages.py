"""Where one `madengine-rocprof report` process spends its CPU and memory: the trace reader against everything after it.

Usage (from the checkout to measure; CHECKOUT defaults to this one):
    python benchmarks/reports/report_stages.py [--checkout DIR] RUN_DIR [report options, e.g. --json r.json --html
    r.html -q]

Runs the report in this process, as the CLI does, with each stage wrapped: the Kineto reader (`kineto_reader._read`),
the table frames (`TraceTables._frame`), the launch links and per-device aggregation the reader's caller does, each
report analysis, and the writers. Prints per stage the process CPU seconds (user + system, all threads: the figure
the machine's load does not inflate), how often it ran, and the peak and current RSS after it; and the split: reader
CPU against the rest ("post-read"). Stages nest (the analyses are inside `build_report`, frames are built inside the
analyses that first ask for them), so their times are not to be added up.
"""

from __future__ import annotations

import functools
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


STAGES: dict[str, list[Any]] = {}  # label -> [cpu seconds, calls, peak MiB, RSS MiB after the last call]


def _wrap(owner: Any, name: str, label: str) -> None:
    inner = getattr(owner, name)

    @functools.wraps(inner)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            stage = STAGES.setdefault(label, [0.0, 0, 0.0, 0.0])
            stage[0] += time.process_time() - start
            stage[1] += 1
            stage[2] = max(stage[2], _peak_mib())
            stage[3] = _rss_mib()

    setattr(owner, name, timed)


def main() -> int:
    args = sys.argv[1:]
    checkout = Path(__file__).resolve().parents[2]
    if args[:1] == ["--checkout"]:
        checkout, args = Path(args[1]).resolve(), args[2:]
    sys.path.insert(0, str(checkout))
    begin = time.process_time()
    from madengine_rocprof import cli
    from madengine_rocprof.cli import report as cli_report
    from madengine_rocprof.reports import analysis, dispatches, kineto_reader, multinode, trace_tables
    from madengine_rocprof.reports.analyses import efficiency, idle, launch

    imported = time.process_time()
    _wrap(kineto_reader, "_read", "reader: kineto_reader._read")
    _wrap(trace_tables.TraceTables, "_frame", "tables: TraceTables._frame (frames built)")
    _wrap(dispatches, "launch_times", "links: dispatches.launch_times")
    _wrap(dispatches, "aggregate", "aggregate: dispatches.aggregate")
    _wrap(analysis, "timeline_rows", "analysis: timeline_rows")
    _wrap(analysis, "collectives_of_run", "analysis: collectives")
    _wrap(efficiency, "for_run", "analysis: efficiency")
    _wrap(idle, "analyze_run", "analysis: idle")
    _wrap(launch, "analyze_run", "analysis: launch")
    _wrap(analysis, "per_rank", "analysis: per_rank")
    _wrap(multinode, "analyze", "analysis: multinode")
    _wrap(cli_report, "build_report", "build_report (all analyses)")
    _wrap(cli_report.markdown, "render", "write: markdown.render")
    _wrap(cli_report.html_page, "render", "write: html_page.render")
    _wrap(cli_report, "write_json_to", "write: JSON")
    status = cli.main(["report", *args])
    end = time.process_time()
    print(f"\ncheckout {checkout}; load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}", file=sys.stderr)
    print(f"{'stage':45s} {'cpu_s':>7s} {'calls':>5s} {'peak_MiB':>8s} {'rss_MiB':>8s}", file=sys.stderr)
    for label, (cpu, calls, peak, rss) in STAGES.items():
        print(f"{label:45s} {cpu:7.2f} {calls:5d} {peak:8.0f} {rss:8.0f}", file=sys.stderr)
    reader = STAGES.get("reader: kineto_reader._read", [0.0])[0]
    print(f"total {end - begin:.2f} s CPU (imports {imported - begin:.2f}, reader {reader:.2f}, post-read "
          f"{end - imported - reader:.2f}); peak RSS {_peak_mib():.0f} MiB", file=sys.stderr)
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
