"""Write a synthetic rocpd SQLite database (rocprofv3 7.x `-f rocpd`, results.db) with N kernel dispatches.

Usage: python benchmarks/reports/make_rocpd.py OUT_DIR [--dispatches N] [--kernels K] [--agents A] [--seed S]
                                                [--processes P]
Writes OUT_DIR/bench-node/4242_results.db. The layout follows rocpd's: tables suffixed with the run's UUID, unsuffixed
views over them (`rocpd_kernel_dispatch`, `rocpd_info_kernel_symbol`, `rocpd_info_agent`, ...), and the `kernels`
and `top_kernels` views that join dispatches to kernel symbols, agents and processes. Deterministic per seed.
--processes P > 1 writes a merged database: one table set per process (its own UUID suffix and GUID, ids counting
from 1 in each, kernel ids naming different kernels in each), the unsuffixed views the UNION ALL of the P sets.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_kernel_trace import kernel_names  # noqa: E402

UUID = "_0000a1b2c3d4"  # process p > 0 of a merged database: UUID + f"_{p}", GUID with its last digit p + 1
GUID = "8f2d4c1e-0000-4000-8000-000000000001"
TABLES = {
    "rocpd_info_node": "id INTEGER PRIMARY KEY, guid TEXT, hostname TEXT",
    "rocpd_info_process": "id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, command TEXT",
    "rocpd_info_agent": "id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, type TEXT, "
    "absolute_index INTEGER, logical_index INTEGER, type_index INTEGER, name TEXT",
    "rocpd_info_queue": "id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, name TEXT",
    "rocpd_info_kernel_symbol": "id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, kernel_name TEXT, "
    "display_name TEXT, group_segment_size INTEGER, private_segment_size INTEGER",
    "rocpd_kernel_dispatch": "id INTEGER PRIMARY KEY, guid TEXT, nid INTEGER, pid INTEGER, tid INTEGER, "
    "agent_id INTEGER, kernel_id INTEGER, dispatch_id INTEGER, queue_id INTEGER, stream_id INTEGER, start INTEGER, "
    "end INTEGER, grid_size_x INTEGER, workgroup_size_x INTEGER",
}
KERNELS_VIEW = """CREATE VIEW kernels AS
SELECT D.id, D.guid, D.tid, S.display_name AS name, D.nid, P.pid, A.absolute_index AS agent_abs_index, D.kernel_id,
       D.dispatch_id, D.stream_id, D.queue_id, Q.name AS queue, D.start, D.end, (D.end - D.start) AS duration
FROM rocpd_kernel_dispatch D
JOIN rocpd_info_kernel_symbol S ON S.id = D.kernel_id AND S.guid = D.guid
JOIN rocpd_info_agent A ON A.id = D.agent_id AND A.guid = D.guid
LEFT JOIN rocpd_info_queue Q ON Q.id = D.queue_id AND Q.guid = D.guid
JOIN rocpd_info_process P ON P.id = D.pid AND P.guid = D.guid"""
TOP_KERNELS_VIEW = """CREATE VIEW top_kernels AS
SELECT S.display_name AS name, COUNT(*) AS total_calls, SUM(D.end - D.start) / 1000.0 AS total_duration,
       SUM(D.end - D.start) / COUNT(*) / 1000.0 AS average, 0.0 AS percentage
FROM rocpd_kernel_dispatch D JOIN rocpd_info_kernel_symbol S ON S.id = D.kernel_id AND S.guid = D.guid
GROUP BY S.display_name ORDER BY total_duration DESC"""


def write(path: Path, dispatches: int, kernels: int, agents: int, seed: int, processes: int = 1) -> tuple[int, int]:
    """Write the database; returns (file size in bytes, sum of the durations written: the benchmark's check)."""
    rng = random.Random(seed)
    total = [0]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=OFF")
    con.execute("PRAGMA synchronous=OFF")
    suffixes = [UUID + (f"_{p}" if p else "") for p in range(processes)]
    for table, columns in TABLES.items():
        for suffix in suffixes:
            con.execute(f"CREATE TABLE {table}{suffix} ({columns})")
        con.execute(f"CREATE VIEW {table} AS " + " UNION ALL ".join(f"SELECT * FROM {table}{s}" for s in suffixes))
    con.execute(KERNELS_VIEW)
    con.execute(TOP_KERNELS_VIEW)
    names = kernel_names(kernels)
    clock = [1_550_151_853_000_000] * agents

    def rows(p: int, guid: str, pid: int):
        for n in range(1, dispatches // processes + (p < dispatches % processes) + 1):
            agent = n % agents
            k = rng.randrange(kernels)
            duration = rng.randint(1_000, 200_000)
            total[0] += duration
            start = clock[agent]
            clock[agent] += duration + rng.randint(100, 3_000)
            yield (n, guid, 1, 1, pid, agent + 1, k + 1, n, agent + 1, 0, start, start + duration, 256 * (k + 1), 256)

    for p, suffix in enumerate(suffixes):
        guid, pid = GUID[:-1] + str(p + 1), 4242 + p
        if p == 0:
            con.execute(f"INSERT INTO rocpd_info_node{suffix} VALUES (1, ?, 'bench-node')", (guid,))
        con.execute(f"INSERT INTO rocpd_info_process{suffix} VALUES (1, ?, 1, ?, 'python train.py')", (guid, pid))
        con.executemany(
            f"INSERT INTO rocpd_info_agent{suffix} VALUES (?, ?, 1, ?, 'GPU', ?, ?, ?, 'gfx942')",
            [(a + 1, guid, pid, a + 2, a, a) for a in range(agents)],
        )
        con.executemany(
            f"INSERT INTO rocpd_info_queue{suffix} VALUES (?, ?, 1, ?, ?)",
            [(a + 1, guid, pid, f"queue {a}") for a in range(agents)],
        )
        rotated = names[p:] + names[:p]  # the same kernel id names another kernel in each process
        con.executemany(
            f"INSERT INTO rocpd_info_kernel_symbol{suffix} VALUES (?, ?, 1, ?, ?, ?, 0, 0)",
            [(k + 1, guid, pid, name, name) for k, name in enumerate(rotated)],
        )
        con.executemany(
            f"INSERT INTO rocpd_kernel_dispatch{suffix} VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows(p, guid, pid)
        )
    con.commit()
    con.close()
    return path.stat().st_size, total[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--dispatches", type=int, default=1_000_000)
    parser.add_argument("--kernels", type=int, default=120)
    parser.add_argument("--agents", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--processes", type=int, default=1)
    args = parser.parse_args()
    path = args.out_dir / "bench-node" / "4242_results.db"
    size, _ = write(path, args.dispatches, args.kernels, args.agents, args.seed, args.processes)
    print(f"wrote {path}: {args.dispatches:,} dispatches, {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
