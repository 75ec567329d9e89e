"""Embedded tracer: torch.profiler (Kineto) injected into Python workloads through sitecustomize.

`inject/sitecustomize.py` arms `runtime` in every Python process that inherits PYTHONPATH (so `python x.py`, shell
scripts that start Python, and torchrun workers). Files follow rocprofv3's layout and headers:
OUT/<hostname>/<pid>_kernel_trace.csv, <pid>_kernel_stats.csv and <pid>_perfetto_trace.json. This package imports
torch only inside `runtime`; `convert` is standard library only.
"""
