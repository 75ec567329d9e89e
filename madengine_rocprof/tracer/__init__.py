"""Embedded tracer: CUPTI (cupti-python) on CUDA, else torch.profiler (Kineto), injected through sitecustomize.

`inject/sitecustomize.py` arms `runtime` in every Python process that inherits PYTHONPATH (so `python x.py`, shell
scripts that start Python, and torchrun workers). Files follow rocprofv3's layout and headers:
OUT/<hostname>/<pid>_kernel_trace.csv, <pid>_kernel_stats.csv and <pid>_perfetto_trace.json. This package imports
torch only inside `runtime` and cupti only inside `cupti_backend`; `convert`, `cupti_records`, `demangle`,
`line_writer` and `select` are standard library only.
"""
