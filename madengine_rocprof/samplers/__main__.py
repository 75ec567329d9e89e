"""`python3 -m madengine_rocprof.samplers power|vram [options]`; defaults come from madengine's env vars
(POWER_DEVICE, POWER_SAMPLING_RATE, POWER_OUTPUT_FILE; VRAM_* likewise).

Exit codes: 0 sampled and stopped cleanly; 2 bad option; 3 no GPU telemetry here (NVML/amdsmi missing or no GPU:
the CSV holds the header only and the reason is printed).
"""
from __future__ import annotations

import argparse
import os
import sys

from madengine_rocprof.atomic import atomic_write
from madengine_rocprof.samplers.backends import NoBackend, open_backend
from madengine_rocprof.samplers.sampler import MODES, StopFlag, parse_devices, run

EXIT_NO_TELEMETRY = 3


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python3 -m madengine_rocprof.samplers", description="GPU power / VRAM sampler")
    p.add_argument("mode", choices=MODES)
    p.add_argument("--device", help="'all' or indices such as 0,2-3 (env <MODE>_DEVICE, default all)")
    p.add_argument("--rate", type=float, help="seconds between samples (env <MODE>_SAMPLING_RATE, default 0.1)")
    p.add_argument("--output", help="CSV file (env <MODE>_OUTPUT_FILE, default gpu_info_<mode>_profiler_output.csv)")
    p.add_argument("--stop-file", help="stop when this file appears")
    p.add_argument("--duration", type=float, help="stop after this many seconds")
    p.add_argument("--backend", default=os.environ.get("MADENGINE_ROCPROF_SAMPLER_BACKEND", "auto"),
                   choices=("auto", "nvml", "amdsmi"))
    args = p.parse_args(argv)
    env = args.mode.upper()
    args.device = args.device or os.environ.get(f"{env}_DEVICE", "all")
    if args.rate is None:
        raw = os.environ.get(f"{env}_SAMPLING_RATE", "0.1")
        try:
            args.rate = float(raw)
        except ValueError:
            p.error(f"{env}_SAMPLING_RATE='{raw}' is not a number of seconds")
    if not 0 < args.rate <= 3600:  # NaN fails this too (time.sleep refuses it, Infinity never wakes)
        p.error(f"sampling period must be a number of seconds in (0, 3600], got {args.rate}")
    args.output = args.output or os.environ.get(f"{env}_OUTPUT_FILE", f"gpu_info_{args.mode}_profiler_output.csv")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stop = StopFlag(args.stop_file)
    stop.install()
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    try:
        backend = open_backend(args.backend)
    except NoBackend as err:
        atomic_write(args.output, "time\n")  # the header only: readers see a CSV, never a half-written one
        print(f"gpu_info_{args.mode}_profiler: {err}", file=sys.stderr)
        return EXIT_NO_TELEMETRY
    try:
        try:
            devices = parse_devices(args.device, backend.device_count())
        except ValueError as err:
            print(f"gpu_info_{args.mode}_profiler: {args.mode.upper()}_DEVICE: {err}", file=sys.stderr)
            return 2
        print(f"gpu_info_{args.mode}_profiler: {backend.name}, devices {devices}, every {args.rate}s -> {args.output}",
              file=sys.stderr)
        with open(args.output, "w", newline="") as out:
            rows = run(backend, args.mode, devices, args.rate, out, stop, args.duration)
        print(f"gpu_info_{args.mode}_profiler: stopped after {rows} samples", file=sys.stderr)
        return 0
    finally:
        backend.close()


if __name__ == "__main__":
    sys.exit(main())
