"""Write a large synthetic PyTorch profiler (Kineto) trace, gzip-compressed, for the report benchmark.

Usage: python benchmarks/reports/make_kineto_trace.py OUT.json.gz [--gpu-events N] [--kernels K] [--seed S] [--rank R]

Laid out as torch.profiler's export_chrome_trace writes it: top-level schemaVersion, deviceProperties,
distributedInfo and baseTimeNanoseconds; then per GPU event the `cuda_runtime` launch on the host (with its
`ac2g` flow start and end), the GPU event (`kernel`, about 3% `gpu_memcpy` and 2% `gpu_memset`) with Kineto's args,
a `cpu_op` per 4 launches, and a `ProfilerStep#N` per 1,000 GPU events; `ts`/`dur` are microseconds with three
decimals relative to baseTimeNanoseconds. Kernels run back to back on 2 streams of device 0, with gaps.

Returns (in `write`) and prints the exact expected figures: GPU event count per category, per-kernel calls and total
ns, so a benchmark checks the report it times against them.

With `--from TRACE --kernels N` (`replicate`) it writes instead copies of a real trace, back to back, until it holds
at least N kernels: every event of the source (CPU operators, runtime calls, flows, annotations, memory events) in
the source's own text layout, with `ts` shifted per copy and the ids that link events (correlation, External id,
flow ids) and the step numbers made unique per copy. The realistic density for the report benchmark (issue 33:
about 12 events per kernel in a real DDP trace, against 4 in the synthetic one).
"""

from __future__ import annotations

import argparse
import decimal
import gzip
import json
import random
import re
import sys
from pathlib import Path

BASE_NS = 1_751_410_836_000_000_000
STEMS = (
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel_{}",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>) v{}",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, "
    "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*) v{}",
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, "
    "Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, "
    "false>(pytorch_flash::Flash_fwd_params) v{}",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*) v{}",
)
COPIES = ("Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)", "Memcpy DtoD (Device -> Device)")


def _us(ns: int) -> str:
    """Nanoseconds -> Kineto's microsecond text with three decimals."""
    return f"{ns // 1000}.{ns % 1000:03d}"


def write(path: Path, gpu_events: int, kernels: int = 200, seed: int = 0, rank: int = 0) -> dict:
    rng = random.Random(seed)
    names = [STEMS[i % len(STEMS)].format(i) for i in range(kernels)]
    expected: dict = {"gpu_events": gpu_events, "by_category": {}, "kernels": {}}
    path.parent.mkdir(parents=True, exist_ok=True)
    host_ns = 1_000_000  # relative to BASE_NS
    gpu_ns = {7: 2_000_000, 20: 2_000_000}
    step = 0
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=3) as fh:
        fh.write(json.dumps({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3",
                                                                        "totalGlobalMem": 85029158912}],
                             "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": 8}})[:-1])
        fh.write(f', "baseTimeNanoseconds": {BASE_NS}, "traceEvents": [\n')
        fh.write('  {"ph": "M", "name": "process_name", "pid": 4242, "tid": 0, "args": {"name": "python"}}')
        step_start = host_ns
        for i in range(gpu_events):
            if i % 1000 == 0:
                if i:
                    fh.write(f',\n  {{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", '
                             f'"pid": 4242, "tid": 4242, "ts": {_us(step_start)}, "dur": {_us(host_ns - step_start)}}}')
                step += 1
                step_start = host_ns
            corr = i + 1
            roll = rng.random()
            stream = 7 if rng.random() < 0.8 else 20
            if roll < 0.03:
                cat, name = "gpu_memcpy", COPIES[i % len(COPIES)]
            elif roll < 0.05:
                cat, name = "gpu_memset", "Memset (Device)"
            else:
                cat, name = "kernel", names[rng.randrange(kernels)]
            launch_dur = rng.randrange(2_000, 9_000)
            if i % 4 == 0:
                fh.write(f',\n  {{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 4242, "tid": 4242, '
                         f'"ts": {_us(host_ns)}, "dur": {_us(4 * launch_dur + 3_000)}, '
                         f'"args": {{"External id": {corr}, "Record function id": 0, "Ev Idx": {i}}}}}')
            fh.write(f',\n  {{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, '
                     f'"tid": 4242, "ts": {_us(host_ns)}, "dur": {_us(launch_dur)}, '
                     f'"args": {{"cbid": 211, "correlation": {corr}, "External id": {corr}}}}}')
            fh.write(f',\n  {{"ph": "s", "id": {corr}, "pid": 4242, "tid": 4242, "ts": {_us(host_ns)}, '
                     f'"cat": "ac2g", "name": "ac2g"}}')
            start = max(gpu_ns[stream] + rng.randrange(0, 4_000), host_ns + launch_dur)
            dur = rng.randrange(1_000, 60_000)
            if cat == "kernel":
                args = (f'"queued": 0, "device": 0, "context": 1, "stream": {stream}, "correlation": {corr}, '
                        f'"registers per thread": 128, "shared memory": 49152, "blocks per SM": 4.0, '
                        f'"warps per SM": 16.0, "grid": [528, 1, 1], "block": [128, 1, 1], '
                        f'"est. achieved occupancy %": 25')
            else:
                args = (f'"device": 0, "context": 1, "stream": {stream}, "correlation": {corr}, '
                        f'"bytes": 4194304, "memory bandwidth (GB/s)": 1024.5')
            fh.write(f',\n  {{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": 0, "tid": {stream}, '
                     f'"ts": {_us(start)}, "dur": {_us(dur)}, "args": {{{args}}}}}')
            fh.write(f',\n  {{"ph": "f", "id": {corr}, "pid": 0, "tid": {stream}, "ts": {_us(start)}, '
                     f'"cat": "ac2g", "name": "ac2g", "bp": "e"}}')
            gpu_ns[stream] = start + dur
            host_ns += launch_dur + rng.randrange(500, 3_000)
            expected["by_category"][cat] = expected["by_category"].get(cat, 0) + 1
            if cat == "kernel":
                entry = expected["kernels"].setdefault(name, [0, 0])
                entry[0] += 1
                entry[1] += dur
        fh.write(f',\n  {{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", "pid": 4242, '
                 f'"tid": 4242, "ts": {_us(step_start)}, "dur": {_us(host_ns - step_start)}}}')
        fh.write('\n], "traceName": "synthetic"}\n')
    expected["steps"] = step
    return expected


# the numbers of an event that a copy changes: its time, the ids that link events, its step number
_TS = re.compile(r'("ts"\s*:\s*)(-?[0-9]+(?:\.[0-9]+)?)')
_IDS = re.compile(r'("(?:id|correlation|External id)"\s*:\s*)([0-9]+)')
_BETWEEN = re.compile(r"[\s,]*")
_HOLES = re.compile(r'(?P<tsk>"ts"\s*:\s*)(?P<ts>-?[0-9]+(?:\.[0-9]+)?)'
                    r'|(?P<idk>"(?:id|correlation|External id)"\s*:\s*)(?P<id>[0-9]+)'
                    r'|(?P<stepk>"name"\s*:\s*"ProfilerStep#)(?P<step>[0-9]+)"')
_STEP = re.compile(r'("name"\s*:\s*"ProfilerStep#)([0-9]+)(")')


def _events_text(text: str) -> tuple[str, list[str], str]:
    """(text before the events, each event's own text, text after them) of a Kineto trace."""
    decoder = json.JSONDecoder()
    key = re.search(r'"traceEvents"\s*:\s*\[', text)
    assert key is not None, "not a Kineto trace"
    start = at = key.end()
    events: list[str] = []
    while True:
        at = _BETWEEN.match(text, at).end()  # type: ignore[union-attr]  # matches the empty string too
        if text[at] == "]":
            return text[:start], events, text[at:]
        _, end = decoder.raw_decode(text, at)
        events.append(text[at:end])
        at = end


def _ns(us: str) -> int:
    whole, _, frac = us.partition(".")
    return int(whole) * 1000 + int(frac.ljust(3, "0")[:3]) if not whole.startswith("-") else -_ns(us[1:])


def replicate(source: Path, path: Path | None, kernels: int) -> dict:
    """Copies of a real trace until it holds `kernels` kernels; the exact figures the report must give (only
    those when `path` is None)."""
    with gzip.open(source, "rt", encoding="utf-8") if source.name.endswith(".gz") else open(source) as fh:
        text = fh.read()
    head, events, tail = _events_text(text)
    parsed = [json.loads(e, parse_float=decimal.Decimal) for e in events]
    timed = [p for p in parsed if "ts" in p]
    first = min(int(p["ts"] * 1000) for p in timed)
    last = max(int(p["ts"] * 1000) + int(p.get("dur", 0) * 1000) for p in timed)
    shift = last - first + 1_000_000  # 1 ms between copies
    ids = [int(m.group(2)) for e in events for m in _IDS.finditer(e)]
    id_step = max(ids, default=0) + 1
    steps = [int(m.group(2)) for e in events for m in _STEP.finditer(e)]
    step_step = max(steps, default=0) + 1
    per_copy = sum(1 for p in parsed if p.get("ph") == "X" and p.get("cat") == "kernel")
    copies = -(-kernels // per_copy)
    once = [e for e, p in zip(events, parsed, strict=True) if p.get("ph") == "M" or p.get("cat") == "Trace"]
    templates = []
    for event, parsed_event in zip(events, parsed, strict=True):
        if parsed_event.get("ph") == "M" or parsed_event.get("cat") == "Trace":
            continue
        fields: list[tuple[str, int]] = []

        def fill(m: re.Match, fields=fields) -> str:  # one pass: the holes in the order of the text
            if m.group("ts") is not None:
                fields.append(("ts", _ns(m.group("ts"))))
                return m.group("tsk") + "%s"
            if m.group("id") is not None:
                fields.append(("id", int(m.group("id"))))
                return m.group("idk") + "%s"
            fields.append(("step", int(m.group("step"))))
            return m.group("stepk") + "%s" + '"'

        templates.append((_HOLES.sub(fill, event.replace("%", "%%")), fields))
    expected: dict = {"source": str(source), "copies": copies, "by_category": {}, "kernels": {}}
    for p in parsed:
        if p.get("ph") == "X" and p.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            expected["by_category"][p["cat"]] = expected["by_category"].get(p["cat"], 0) + copies
            if p["cat"] == "kernel":
                entry = expected["kernels"].setdefault(p["name"], [0, 0])
                entry[0] += copies
                entry[1] += copies * (int(p["ts"] * 1000 + p["dur"] * 1000) - int(p["ts"] * 1000))
    expected["gpu_events"] = sum(expected["by_category"].values())
    expected["steps"] = len(steps) * copies
    expected["events"] = len(once) + len(templates) * copies
    if path is None:
        return expected
    path.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=3) as fh:
        fh.write(head + "\n")
        for k in range(copies):
            offsets = {"ts": k * shift, "id": k * id_step, "step": k * step_step}
            lines = []
            for tmpl, fields in templates:
                values = tuple(_us(v + offsets["ts"]) if kind == "ts" else v + offsets[kind] for kind, v in fields)
                lines.append(tmpl % values)
            if k == 0:
                lines = once + lines
            fh.write(("" if k == 0 else ",\n") + ",\n".join(lines))
            written += len(lines)
        fh.write("\n" + tail)
    assert written == expected["events"]
    return expected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--gpu-events", type=int, default=1_000_000)
    parser.add_argument("--kernels", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--from", dest="source", type=Path, help="replicate this real trace (--kernels: at least)")
    args = parser.parse_args(argv)
    if args.source:
        expected = replicate(args.source, args.out, args.kernels)
        print(f"{args.out}: {args.out.stat().st_size / 2**20:.1f} MiB gzip, {expected['copies']} copies of "
              f"{args.source.name}: {expected['events']:,} events, {expected['by_category']}")
        return 0
    expected = write(args.out, args.gpu_events, args.kernels, args.seed, args.rank)
    print(f"{args.out}: {args.out.stat().st_size / 2**20:.1f} MiB gzip, {expected['gpu_events']:,} GPU events "
          f"{expected['by_category']}, {expected['steps']} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
