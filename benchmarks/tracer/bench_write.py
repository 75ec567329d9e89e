"""How fast the embedded tracer turns a recorded window into its files (issues 25 item 5, 26 item 5).

Cases (each prints one JSON line per measurement; see README.md here for the commands and results):
  kineto N      a Kineto JSON trace of N CPU operators in torch.profiler's layout (tests/wrapper/kineto_files.py):
                read + kernel_trace.csv + kernel_stats.csv, by today's `convert` and, when git has it, by the
                convert of commit OLD (json.load, floats, a temporary-file writer) on the same file.
  kineto-gpu N  the same with N GPU kernels, each with its runtime launch call (2N events).
  file PATH     a real Kineto export (e.g. a perfetto_trace.json the tracer wrote), CPU operators.
  cupti N       the CUPTI backend's path after the buffers are parsed: N kernel records -> Chrome-trace dict
                (cupti_records.chrome_trace) -> rows -> files, then the Chrome trace JSON.
  cupti-json N  the CUPTI backend's whole write from raw records: N records (~8% kernels, ~1% memcpy, ~91% runtime
                API calls of the libcudart interposer, as a real run has them) in synthetic activity buffers and an
                interposer window -> Chrome trace JSON -> kernel_trace/kernel_stats/hip_api_trace/hip_api_stats/
                memory_copy_trace CSVs: by the Python dict path (cupti_records.chrome_trace, what the tracer did
                before) and by the C writer (native/cupti_json.c) then `convert.write_files(path)`; the CSVs must
                be identical. Buffers are walked by a C cuptiActivityGetNextRecord (tests/wrapper/fakes).
  in-memory N   not a path the tracer takes: N `a + 1` ops profiled on the CPU, Kineto's in-memory results listed
                and four columns read, compared with what the JSON gives (README.md, "The 1M records/s target").
  v1 STEPS      TinyTransformer v1 on the CPU for STEPS optimizer steps with the tracer in the process, then the
                tracer's own finish() timed: torch.profiler stop, Kineto's JSON export, our read and write.
  --rounds N --out DIR [--file PATH]   the suite's case `tracer.write` (python -m benchmarks run tracer.write):
                kineto 1000000 (and PATH, or $MRT_TRACE_FILE) N times, native and Python paths, to DIR/results.jsonl.
The native converter (tracer/native/kineto_rows.c) reads and writes in one call: its line has read_write_s.
Records/s = rows written / (read + write seconds). Times: wall clock and this process's CPU time (the machine is
shared; CPU time is the steadier figure).
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from madengine_rocprof.tracer import convert  # noqa: E402
from tests.wrapper import kineto_files as kf  # noqa: E402

OLD = "48486a8"  # main before the streaming writer: json.load + float times + one temporary file per CSV
OPS = [f"aten::op_{i}" for i in range(180)] + ["aten::mm", "aten::add", "aten::empty", "autograd::engine::evaluate_"
                                                "function: MmBackward0", 'void f<"quoted">(int)']


def versions() -> dict:
    out = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            out["cpu"] = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        import torch

        out["torch"] = torch.__version__
    except ImportError:
        pass
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        out["commit"] = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                                       text=True, check=True).stdout.strip()
    return out


def make_trace(path: Path, n: int, gpu: bool, seed: int = 1) -> None:
    """n CPU operators, or n kernels each with its runtime launch call, in Kineto's layout; seeded."""
    rng = random.Random(seed)

    def events():
        t = 0
        for i in range(1, n + 1):
            if not gpu:
                t += rng.randint(100, 5000)
                yield kf.cpu_op(rng.choice(OPS), 4242, t, rng.randint(50, 20000), i)
                continue
            t += rng.randint(1000, 9000)
            yield kf.runtime_call("cudaLaunchKernel", 4243, t, 3000, i)
            yield kf.kernel(f"void kernel_{rng.randint(1, 300)}<float>(float*, int)", t + 5000, rng.randint(900, 90000),
                            i, grid=(rng.randint(1, 4096), 1, 1), block=(256, 1, 1))

    kf.write(path, 1_790_857_026_000_000_000, events())


def _clock():
    return time.perf_counter(), time.process_time()


def _since(start) -> tuple[float, float]:
    wall, cpu = _clock()
    return round(wall - start[0], 3), round(cpu - start[1], 3)


def time_native(path: Path, cpu: bool, out: Path) -> dict | None:
    """The native converter (native/kineto_rows.c): read + write in one call, as the tracer runs it; None where it
    does not build or does not take the file. Built before the clock starts (a first use compiles it)."""
    from madengine_rocprof.tracer import native_rows

    if native_rows.library() is None:
        return None
    start = _clock()
    done = native_rows.convert_file(str(path), str(out), "native_", cpu=cpu, truncate=False, max_rows=None, api=False,
                                    memcpy=False, stats=True, names_of=convert._json_string,
                                    direction_of=convert.copy_direction)
    wall, cpu_s = _since(start)
    if done is None:
        return {"impl": "native", "not_used": native_rows.why_not}
    rows = done[1]
    return {"impl": "native", "rows": rows, "read_write_s": wall, "read_write_cpu_s": cpu_s,
            "rows_per_s_wall": round(rows / max(wall, 1e-9)), "rows_per_s_cpu": round(rows / max(cpu_s, 1e-9)),
            "identical_to_python": all((out / f"native_{f}").read_bytes() == (out / f"new_{f}").read_bytes()
                                       for f in ("kernel_trace.csv", "kernel_stats.csv"))}


def time_convert(path: Path, cpu: bool, out: Path) -> dict:
    start = _clock()
    events = convert.read_kineto(str(path), cpu=cpu)
    read_wall, read_cpu = _since(start)
    start = _clock()
    convert.write_files(events, str(out), "new_", cpu=cpu, stats=True)
    write_wall, write_cpu = _since(start)
    rows = len(events)
    return {"impl": "streaming", "rows": rows, "read_s": read_wall, "write_s": write_wall,
            "read_cpu_s": read_cpu, "write_cpu_s": write_cpu,
            "rows_per_s_wall": round(rows / max(read_wall + write_wall, 1e-9)),
            "rows_per_s_cpu": round(rows / max(read_cpu + write_cpu, 1e-9))}


def old_convert():
    """The convert module of commit OLD, loaded from git (None when git or the commit is missing)."""
    try:
        source = subprocess.run(["git", "-C", str(REPO), "show", f"{OLD}:madengine_rocprof/tracer/convert.py"],
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    spec = importlib.util.spec_from_loader("old_convert", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{OLD}:convert.py", "exec"), module.__dict__)  # noqa: S102 - our own earlier code
    return module


def time_old(path: Path, cpu: bool, out: Path) -> dict | None:
    old = old_convert()
    if old is None:
        return None
    start = _clock()
    trace = old.load(str(path))
    read_wall, read_cpu = _since(start)
    start = _clock()
    old.write_files(trace, str(out), "old_", cpu=cpu)
    write_wall, write_cpu = _since(start)
    rows = sum(1 for e in trace["traceEvents"] if e.get("cat") == ("cpu_op" if cpu else "kernel"))
    return {"impl": f"json.load ({OLD})", "rows": rows, "read_s": read_wall, "write_s": write_wall,
            "read_cpu_s": read_cpu, "write_cpu_s": write_cpu,
            "rows_per_s_wall": round(rows / max(read_wall + write_wall, 1e-9)),
            "rows_per_s_cpu": round(rows / max(read_cpu + write_cpu, 1e-9))}


def same_rows(out: Path) -> bool:
    new = (out / "new_kernel_trace.csv").read_bytes()
    old = out / "old_kernel_trace.csv"
    return not old.exists() or new == old.read_bytes()


def case_kineto(n: int, gpu: bool, path: Path | None = None, old: bool = True) -> list[dict]:
    """Prints (and returns) one JSON line per implementation: the Python path, the native one, the old one."""
    lines = []
    with tempfile.TemporaryDirectory(prefix="bench_tracer_") as tmp:
        folder = Path(tmp)
        if path is None:
            path = folder / "trace.json"
            make_trace(path, n, gpu)
        size = path.stat().st_size
        result = time_convert(path, not gpu, folder)
        result["peak_rss_mb_so_far"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        head = {"case": "kineto-gpu" if gpu else "kineto", "file_mb": round(size / 1e6, 1)}
        lines.append({**head, **result, "load_avg": os.getloadavg()})
        print(json.dumps(lines[-1]), flush=True)
        native = time_native(path, not gpu, folder)
        if native is not None:
            native["peak_rss_mb_so_far"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
            lines.append({**head, **native, "load_avg": os.getloadavg()})
            print(json.dumps(lines[-1]), flush=True)
        earlier = time_old(path, not gpu, folder) if old else None
        if earlier is not None:
            # synthetic times are whole nanoseconds below 2**53 us, so both must give the same bytes
            earlier["peak_rss_mb_so_far"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
            lines.append({**head, **earlier, "identical_kernel_trace": same_rows(folder)})
            print(json.dumps(lines[-1]), flush=True)
    return lines


def suite(rounds: int, out: Path, trace_file: Path | None) -> None:
    """`--rounds N --out DIR [--file PATH]` (python -m benchmarks run tracer.write): kineto 1000000 (and the real
    trace PATH) N times, native and Python paths; one line per case and path in DIR/results.jsonl, each figure
    {min, median, max} over the rounds: rows/s = rows / (read + write CPU seconds)."""
    runs: dict[str, list[dict]] = {}
    for _ in range(rounds):
        todo: list[tuple[str, Path | None]] = [("kineto 1M CPU operators (242 MB)", None)]
        todo += [("400-step v1 trace", trace_file)] if trace_file else []
        for label, path in todo:
            for line in case_kineto(1_000_000, False, path, old=False):
                runs.setdefault(f"{label}, {line['impl'] if line['impl'] == 'native' else 'python'}", []).append(line)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "results.jsonl", "w", encoding="utf-8") as fh:
        for variant, lines in runs.items():
            cpu_s = [ln.get("read_write_cpu_s", ln.get("read_cpu_s", 0) + ln.get("write_cpu_s", 0)) for ln in lines]
            spread = {"rows_per_s": [ln["rows_per_s_cpu"] for ln in lines], "read_write_cpu_s": cpu_s,
                      "load_avg_1min": [ln["load_avg"][0] for ln in lines]}
            figures = {k: {"min": min(v), "median": sorted(v)[len(v) // 2], "max": max(v)} for k, v in spread.items()}
            checks = {"rows": lines[0]["rows"]}
            if "identical_to_python" in lines[0]:
                checks["identical_to_python"] = all(ln["identical_to_python"] for ln in lines)
            fh.write(json.dumps({"variant": variant, "rounds": len(lines), "figures": figures, "checks": checks})
                     + "\n")


def case_cupti(n: int) -> None:
    from madengine_rocprof.tracer import cupti_records as cr

    rng = random.Random(1)
    t = 1_790_857_026_000_000_000
    records = []
    for i in range(1, n + 1):
        t += rng.randint(1000, 9000)
        records.append((cr.KERNEL, {"start": t, "end": t + rng.randint(900, 90000), "correlation_id": i,
                                    "name": rng.randint(1, 300), "device_id": 0, "context_id": 1, "stream_id": 7,
                                    "grid_x": 64, "grid_y": 1, "grid_z": 1, "block_x": 256, "block_y": 1,
                                    "block_z": 1, "registers_per_thread": 32, "static_shared_memory": 0,
                                    "dynamic_shared_memory": 0, "graph_id": 0}))
    with tempfile.TemporaryDirectory(prefix="bench_tracer_") as tmp:
        start = _clock()
        trace = cr.chrome_trace(records, kernel_name=lambda p: f"void kernel_{p}<float>(float*)",
                                api_name_of=lambda k, c: "x", pid=1)
        dict_wall, dict_cpu = _since(start)
        start = _clock()
        events = convert.from_dict(trace)
        convert.write_files(events, tmp, "c_", cpu=False)
        rows_wall, rows_cpu = _since(start)
        start = _clock()
        convert.write_chrome_trace(trace, os.path.join(tmp, "c_perfetto_trace.json"))
        json_wall, json_cpu = _since(start)
    print(json.dumps({"case": "cupti", "rows": n, "records_to_dict_s": dict_wall, "dict_to_csv_s": rows_wall,
                      "chrome_json_s": json_wall, "cpu_s": [dict_cpu, rows_cpu, json_cpu],
                      "rows_per_s_csv_wall": round(n / max(dict_wall + rows_wall, 1e-9))}))


class _Recorder:
    """The interposer as the backend reads it at write time: windows of raw records, names of its functions."""

    lost = 0
    NAMES = ("cudaLaunchKernel", "cudaGetDevice", "cudaStreamIsCapturing", "cudaGetLastError", "cudaMemcpyAsync",
             "cudaEventRecord")

    def __init__(self, windows: list) -> None:
        self.windows = windows

    def function(self, index: int) -> str:
        return self.NAMES[index % len(self.NAMES)]

    def records(self, pid: int) -> list:
        from madengine_rocprof.tracer import api_recorder

        return api_recorder.Interposer.records(self, pid)  # type: ignore[arg-type]


def cupti_records_mix(n: int, seed: int = 1):
    """(activity buffers, interposer windows, kernel name buffers to keep alive): about n records, seeded; a kernel
    or a copy comes with the runtime call that launched it."""
    import ctypes

    from madengine_rocprof.tracer import api_recorder
    from tests.wrapper.fakes import fake_cupti

    rng = random.Random(seed)
    names = []
    for i in range(300):
        text = f"kernel_{i}_gemm_bf16_tn"
        names.append(ctypes.create_string_buffer(f"_Z{len(text)}{text}PfS_i".encode()))  # demangled at write
    tick0, ns0 = 10_000_000, 1_790_857_026_000_000_000
    activity: list[bytes] = []
    calls: list[tuple] = []
    tick, i = tick0, 0
    while len(activity) + len(calls) < n:
        i += 1
        tick += rng.randint(300, 3000)
        r = rng.random()
        if r < 0.08:
            t = ns0 + (tick - tick0) // 2 + 4000
            activity.append(fake_cupti._pack(10, {
                "start": t, "end": t + rng.randint(900, 90000), "correlation_id": i,
                "name": ctypes.addressof(rng.choice(names)), "device_id": 0, "context_id": 1, "stream_id": 7,
                "grid_x": rng.randint(1, 4096), "grid_y": 1, "grid_z": 1, "block_x": 256, "block_y": 1, "block_z": 1,
                "registers_per_thread": 32, "static_shared_memory": 0, "dynamic_shared_memory": 1024, "graph_id": 0}))
            calls.append((tick, tick + 3000, i, 0, 4242, 3))
        elif r < 0.09:
            t = ns0 + (tick - tick0) // 2 + 4000
            activity.append(fake_cupti._pack(1, {"copy_kind": 1, "src_kind": 2, "dst_kind": 3, "bytes": 4096,
                                                 "start": t, "end": t + 2000, "device_id": 0, "stream_id": 7,
                                                 "correlation_id": i}))
            calls.append((tick, tick + 3000, i, 4, 4242, 3))
        else:
            calls.append((tick, tick + rng.randint(40, 400), 0, rng.randint(1, 5), rng.choice([4242, 4243]), 3))
    per_buffer = (32 << 20) // 216
    buffers = [b"".join(activity[i:i + per_buffer]) for i in range(0, len(activity), per_buffer)]
    record = api_recorder.RECORD
    last = (tick + 1, ns0 + (tick + 1 - tick0) // 2)  # 2 ticks a nanosecond
    window = api_recorder.Window(b"".join(record.pack(*c) for c in calls), (tick0, ns0), last)
    return buffers, [window], names


def _count_kind(raw: bytes, kind: int | None) -> int:
    """Records of `kind` (None: all) in one fake activity buffer (kernel 216 bytes, memcpy 96)."""
    pos = count = 0
    while pos < len(raw):
        k = int.from_bytes(raw[pos:pos + 4], "little")
        count += kind is None or k == kind
        pos += 216 if k == 10 else 96
    return count


def case_cupti_json(n: int) -> None:
    from madengine_rocprof.tracer import cupti_backend
    from tests.wrapper.fakes import fake_cupti

    buffers, windows, _names = cupti_records_mix(n)
    kernels = sum(_count_kind(raw, 10) for raw in buffers)
    calls = len(windows[0].raw) // 32
    n = sum(_count_kind(raw, None) for raw in buffers) + calls
    rows = {"records": n, "kernels": kernels, "api_calls": calls}
    options = {"cpu": False, "api": True, "memcpy": True, "stats": True}

    def backend(native: bool):
        fake_cupti.reset()
        lib = fake_cupti.FakeLib()
        lib.cuptiActivityGetNextRecord = fake_cupti.c_next_record()
        b = cupti_backend.CuptiBackend(fake_cupti, api=True, lib=lib, api_recorder_choice="activity")
        b.raw, b.recorder = list(buffers), _Recorder(windows)  # type: ignore[assignment]
        if native:
            b._choose_writer()
            assert b.trace_writer == "native (C)", b.trace_writer
        return b

    with tempfile.TemporaryDirectory(prefix="bench_tracer_") as tmp:
        folder = Path(tmp)
        (folder / "old").mkdir()
        (folder / "new").mkdir()
        b = backend(True)
        start = _clock()
        path, _counts = b.trace(str(folder / "new.json"), demangle_names=True)
        json_wall, json_cpu = _since(start)
        start = _clock()
        convert.write_files(path, str(folder / "new"), "p_", **options)
        csv_wall, csv_cpu = _since(start)
        size = os.path.getsize(path)
        print(json.dumps({"case": "cupti-json", "impl": "C writer + convert.write_files(path)", **rows,
                          "json_mb": round(size / 1e6, 1), "records_to_json_s": json_wall,
                          "records_to_json_cpu_s": json_cpu, "json_to_csv_s": csv_wall, "json_to_csv_cpu_s": csv_cpu,
                          "records_per_s_json_cpu": round(n / max(json_cpu, 1e-9)),
                          "records_per_s_cpu": round(n / max(json_cpu + csv_cpu, 1e-9)),
                          "peak_rss_mb_so_far": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}),
              flush=True)
        if os.environ.get("BENCH_SKIP_OLD"):
            return
        b = backend(False)
        start = _clock()
        trace, _seen = b.kineto(cupti_backend.Names(fake_cupti, b.recorder, True))
        dict_wall, dict_cpu = _since(start)
        start = _clock()
        convert.write_files(convert.from_dict(trace), str(folder / "old"), "p_", **options)
        rows_wall, rows_cpu = _since(start)
        start = _clock()
        convert.write_chrome_trace(trace, str(folder / "old.json"))
        old_json_wall, old_json_cpu = _since(start)
        identical = {p.name: p.read_bytes() == (folder / "new" / p.name).read_bytes()
                     for p in sorted((folder / "old").iterdir())}
        total_cpu = dict_cpu + rows_cpu + old_json_cpu
        print(json.dumps({"case": "cupti-json", "impl": "Python dict path (cupti_records.chrome_trace)", **rows,
                          "records_to_dict_s": dict_wall, "records_to_dict_cpu_s": dict_cpu,
                          "dict_to_csv_s": rows_wall, "dict_to_csv_cpu_s": rows_cpu, "chrome_json_s": old_json_wall,
                          "chrome_json_cpu_s": old_json_cpu, "records_per_s_cpu": round(n / max(total_cpu, 1e-9)),
                          "identical_csvs": identical,
                          "peak_rss_mb_so_far": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))


def case_v1(steps: int) -> None:
    """The product path on the CPU: the tracer armed in this process, TinyTransformer v1, finish() timed."""
    with tempfile.TemporaryDirectory(prefix="bench_tracer_v1_") as tmp:
        os.environ["MADENGINE_ROCPROF_TRACER_OUT"] = tmp
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
        from madengine_rocprof.tracer import runtime

        runtime.arm()
        tracer = runtime._TRACER
        assert tracer is not None
        timings: dict[str, float] = {}
        real_write = tracer._write

        def timed_write():
            start = _clock()
            real_write()
            timings["export_read_write_s"], timings["export_read_write_cpu_s"] = _since(start)

        tracer._write = timed_write  # type: ignore[method-assign]
        sys.argv = ["tiny_llama_v1.py", "--version", "v1", "--num-steps", str(steps), "--device", "cpu"]
        sys.path.insert(0, str(REPO / "scripts" / "tinytransformer"))
        import runpy

        with contextlib.suppress(SystemExit):
            runpy.run_path(str(REPO / "scripts" / "tinytransformer" / "tiny_llama_v1.py"), run_name="__main__")
        real_stop = tracer.prof.stop

        def timed_stop():
            start = _clock()
            real_stop()
            timings["profiler_stop_s"], timings["profiler_stop_cpu_s"] = _since(start)

        tracer.prof.stop = timed_stop
        start = _clock()
        tracer.finish()
        timings["finish_s"], timings["finish_cpu_s"] = _since(start)
        host = Path(tmp) / os.uname().nodename
        files = {p.name.split("_", 1)[1]: p.stat().st_size for p in host.iterdir()} if host.exists() else {}
        summary: dict = next((json.loads(p.read_text()) for p in host.glob("*_tracer_summary.json")), {})
    print(json.dumps({"case": "v1", "steps": steps, "rows": summary.get("kernel_rows"), **timings,
                      "file_bytes": files}), flush=True)


def case_in_memory(n: int) -> None:
    """The road not taken: reading Kineto's results in memory instead of its JSON (n `a + 1` CPU ops profiled)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    prof = profile(activities=[ProfilerActivity.CPU])
    prof.start()
    a = torch.ones(4)
    for _ in range(n):
        a = a + 1
    prof.stop()
    start = _clock()
    events = prof.profiler.kineto_results.events()  # type: ignore[union-attr]
    list_wall, list_cpu = _since(start)
    kind = type(events[0])
    start = _clock()
    names, starts = list(map(kind.name, events)), list(map(kind.start_ns, events))
    durations, threads = list(map(kind.duration_ns, events)), list(map(kind.start_thread_id, events))
    columns_wall, columns_cpu = _since(start)
    with tempfile.TemporaryDirectory(prefix="bench_tracer_") as tmp:
        path = os.path.join(tmp, "t.json")
        prof.export_chrome_trace(path)
        parsed = convert.read_kineto(path, cpu=True)
    ours = [parsed.base + s for s in parsed.op_start]
    kept = [i for i, e in enumerate(events) if kind.activity_type(e) == "cpu_op"]
    print(json.dumps({"case": "in-memory", "events": len(events), "list_s": list_wall, "list_cpu_s": list_cpu,
                      "four_columns_s": columns_wall, "four_columns_cpu_s": columns_cpu,
                      "start_ns_equal_to_json": sorted(starts[i] for i in kept) == sorted(ours),
                      "names_equal": sorted(names[i] for i in kept) == sorted(parsed.op_name),
                      "durations_equal": sorted(durations[i] for i in kept) == sorted(parsed.op_dur),
                      "thread_ids_equal": sorted(threads[i] for i in kept) == sorted(parsed.op_tid)}))


def main(argv: list[str]) -> int:
    if argv and argv[0].startswith("--"):
        import argparse

        parser = argparse.ArgumentParser(description="tracer.write: the suite's run of this script")
        parser.add_argument("--rounds", type=int, default=1)
        parser.add_argument("--out", type=Path, required=True)
        parser.add_argument("--file", type=Path, help="also a real Kineto export (e.g. the 400-step v1 trace)")
        args = parser.parse_args(argv)
        suite(args.rounds, args.out, args.file or (Path(os.environ["MRT_TRACE_FILE"])
                                                   if os.environ.get("MRT_TRACE_FILE") else None))
        return 0
    if len(argv) != 2 or argv[0] not in ("kineto", "kineto-gpu", "file", "cupti", "cupti-json", "v1",
                                                  "in-memory"):
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps({"versions": versions()}))
    case, value = argv
    if case == "file":
        case_kineto(0, False, Path(value))
    elif case == "cupti":
        case_cupti(int(value))
    elif case == "cupti-json":
        case_cupti_json(int(value))
    elif case == "v1":
        case_v1(int(value))
    elif case == "in-memory":
        case_in_memory(int(value))
    else:
        case_kineto(int(value), case == "kineto-gpu")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
