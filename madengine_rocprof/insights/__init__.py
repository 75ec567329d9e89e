"""Beyond one profile: `compare` (a statistical regression gate between runs) and `escalate` (trace first, then
counters for the kernels that matter). Both read runs through madengine_rocprof.reports."""
