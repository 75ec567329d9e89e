"""Reports: read every profiler output this project meets, find hotspots, compare runs.

`load_runs(paths)` reads RUN directories, `build_report(runs, baseline)` makes the report dict (the JSON output);
`sections.build` turns it into headed tables and charts that `markdown.render` and `html_page.render` only format;
`perfetto.write_trace` draws a run.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from madengine_rocprof.reports.model import RunData

__all__ = ["build_report", "load_runs"]


def __getattr__(name: str) -> Any:
    # build_report pulls in polars and every reader: importing a light module of this package (categories, for
    # `run` and `escalate`'s option parsing) must not, so a machine without polars can still run workloads
    if name == "build_report":
        from madengine_rocprof.reports.analysis import build_report

        return build_report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _labels(paths: list[Path]) -> list[str]:
    """Directory names, made unique by adding parent directories where two runs share a name."""
    resolved = [p.resolve() for p in paths]
    depth = 1
    while True:
        labels = ["/".join(p.parts[-depth:]) for p in resolved]
        if len(set(labels)) == len(labels) or depth > max(len(p.parts) for p in resolved):
            return labels
        depth += 1


def load_runs(paths: list[Path]) -> list[RunData]:
    from madengine_rocprof.reports.discover import expand_runs, load_run

    expanded: list[Path] = []
    for path in paths:
        for run_path in expand_runs(Path(path)):
            if run_path.resolve() not in {p.resolve() for p in expanded}:
                expanded.append(run_path)
    return [load_run(path, label) for path, label in zip(expanded, _labels(expanded), strict=True)]
