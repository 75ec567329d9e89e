"""The benchmark suite: one runner with named cases per area, machine-readable results, one generated table.

    python -m benchmarks list
    python -m benchmarks run CASE... [--rounds N] [--out DIR] [--record | --results DIR]
    python -m benchmarks add [--case CASE] FILE...   # rows (or a script's lines) from the device machine
    python -m benchmarks render [--check]     # benchmarks/RESULTS.md and the README's measured table

See benchmarks/README.md.
"""
