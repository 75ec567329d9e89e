"""TinyTransformer v1-v4 benchmark: validation gates on the device, then every version x both configs in one process
(one run, so ratios are fair), a short table last, and one JSON with every result.

    python benchmarks/tinytransformer/bench.py --out DIR [--gates] [--diagnose] [--configs B8_S128,B32_S512]
        [--only B8_S128/v4,B32_S512/v1,...] [--kernel-settings JSON] [--smoke]

Configs (hidden 512, 8 layers, 8 heads / 4 kv heads, vocab 1000): B8 S128 and B32 S512.
Under torchrun (`python -m torch.distributed.run --standalone --nproc_per_node 2 bench.py ...`) every rank runs the
same sequence of runs in one process group (data parallel, the batch size per rank), each rank bound to its own share
of the cores (scripts/tinytransformer/tt_affinity.py; TT_CPU_BINDING=off leaves them); rank 0 writes the results.
Exits non-zero when a run or a gate fails; the targets are reported, not enforced (see README.md)."""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts" / "tinytransformer"))

import torch  # noqa: E402

import tt_harness  # noqa: E402

CONFIGS = {"B8_S128": dict(batch=8, seq=128, steps=100, warmup=10),
           "B32_S512": dict(batch=32, seq=512, steps=50, warmup=8)}
RUNS = [("v1", []), ("v2", []), ("v3", []), ("v4", []), ("v4", ["--attention", "sdpa"])]
SMOKE = False
TARGETS = ("B8 S128: v4 >= 750,000 tok/s (goal 1,000,000); B32 S512: v4 >= 40% bf16 MFU (goal 45%), peak memory "
           "<= 35% of v1; no regression of v1-v3 (device-step figures)")


def label(version, extra):
    return version + ("-sdpa" if "sdpa" in extra else "")


def pct(x, digits=1):
    return "n/a" if x is None or x != x else f"{100 * x:.{digits}f}%"


def mib(x):
    return "n/a" if x is None else f"{x / 2**20:,.0f} MiB"


def rank() -> int:
    import torch.distributed as dist
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def one_run(version, extra, cfg, out_dir: Path, gates: bool):
    json_path = out_dir / f"run_{label(version, extra)}_{cfg['batch']}_{cfg['seq']}.json"
    argv = ["--version", version, "--batch-size", str(cfg["batch"]), "--seq-len", str(cfg["seq"]),
            "--num-steps", str(cfg["steps"]), "--warmup-steps", str(cfg["warmup"]), "--json-out", str(json_path),
            "--tiny" if SMOKE else "--full"] + extra + (["--validate"] if gates else [])
    t0 = time.time()
    try:
        rc = tt_harness.main(argv)
    except Exception:  # record and go on: one broken version must not hide the others' numbers
        traceback.print_exc()
        rc = -1
    gc.collect()
    torch.cuda.empty_cache()
    if rank() != 0:  # only rank 0 writes (and removes) the JSON; another rank's own verdict is its exit code
        return {"rc": rc, "wall_s": time.time() - t0, "result": {"rank": rank()}}
    result = json.loads(json_path.read_text()) if json_path.exists() else None
    if json_path.exists():
        json_path.unlink()  # the combined JSON holds it; the device tool returns few files
    return {"rc": rc, "wall_s": time.time() - t0, "result": result}


def diagnose(out_dir: Path):
    """Top GPU kernels of one eager v4 step per config (what bounds v4)."""
    from torch.profiler import ProfilerActivity, profile

    import tt_model
    import tt_train
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    for name, c in CONFIGS.items():
        cfg = tt_model.ModelConfig(max_seq_len=c["seq"])
        if SMOKE:
            cfg = tt_model.ModelConfig(hidden_dim=64, num_layers=2, num_heads=4, max_seq_len=c["seq"])
        dtype = "bf16" if device.type == "cuda" else "fp32"
        model = tt_train.build_model("v4", cfg, device, 0, "triton", dtype=dtype)
        opt = tt_train.make_optimizer(model, "v4", 3e-4, device, capturable=False)
        step = tt_train.TrainStep(model, opt, device, dtype)
        x, y = tt_train.split_batches(tt_train.make_tokens("random", 1, c["batch"], c["seq"], 1000, 0, device)[0])
        for _ in range(3):
            step(x, y)
        tt_train.sync(device)
        with profile(activities=acts) as prof:
            for _ in range(3):
                step(x, y)
            tt_train.sync(device)
        n_kernels = sum(1 for e in prof.events() if e.device_type.name == "CUDA") / 3
        print(f"\n=== v4 eager step {name}: {n_kernels:.0f} GPU kernels per step; top kernels (3 steps)")
        sort_by = "cuda_time_total" if device.type == "cuda" else "cpu_time_total"
        print(prof.key_averages().table(sort_by=sort_by, row_limit=22, max_name_column_width=60))
        del model, opt, step
        gc.collect()
        torch.cuda.empty_cache()


def _fixed_attn_blocks(blocks: dict, default):
    def attn_blocks(D, S=0):
        return blocks if D <= 64 else default(D, S)
    return attn_blocks


SETTING_PREFIXES = ("NORM_BWD_", "ADAMW_", "DKDV_", "PDL", "WGRAD_", "RESIDUAL_")


def apply_kernel_settings(settings: dict):
    """Override tt_kernels' module constants whose names start with one of SETTING_PREFIXES, and the attention tiles
    ("attn_blocks": {fwd, dkdv, dq}: each [BLOCK_M, BLOCK_N, warps, stages], for head_dim <= 64, any length)."""
    import tt_kernels
    for name, value in settings.items():
        if name == "attn_blocks":
            tt_kernels._attn_blocks = _fixed_attn_blocks({part: tuple(cfg) for part, cfg in value.items()},
                                                          tt_kernels._attn_blocks)
        elif name.startswith(SETTING_PREFIXES) and hasattr(tt_kernels, name):
            setattr(tt_kernels, name, value)
        else:
            raise SystemExit(f"--kernel-settings: unknown setting {name!r} (known: "
                             f"{', '.join(p + '*' for p in SETTING_PREFIXES)}, attn_blocks)")
    print("kernel settings:", settings, flush=True)


def write_summary(out: Path, results: dict, argv) -> dict:
    """bench_results.json: every result so far (what benchmarks/cases.py reads)."""
    any_res = next((r["result"] for r in results.values() if r["result"]), None)
    failed = [key for key, r in results.items() if r["rc"] != 0 or r["result"] is None]
    launcher = ("python -m torch.distributed.run --standalone --nproc_per_node " + os.environ["WORLD_SIZE"] + " "
                if int(os.environ.get("WORLD_SIZE", "1")) > 1 else "python ")
    summary = {"targets": TARGETS, "device": any_res and any_res["device"], "versions": any_res and any_res["versions"],
               "command": launcher + "benchmarks/tinytransformer/bench.py " + " ".join(argv or sys.argv[1:]),
               "results": results, "failed": failed}
    (out / "bench_results.json").write_text(json.dumps(summary, indent=1))
    return summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True)
    p.add_argument("--gates", action="store_true", help="run the validation gates (B8 S128 runs)")
    p.add_argument("--diagnose", action="store_true", help="print v4's top kernels per config")
    p.add_argument("--configs", default=",".join(CONFIGS))
    p.add_argument("--only", help="run only these CONFIG/version keys (e.g. B8_S128/v4,B32_S512/v4-sdpa); a config's "
                   "memory ratio needs its v1 run")
    p.add_argument("--smoke", action="store_true", help="tiny model, few steps (checks the script on a CPU)")
    p.add_argument("--kernel-settings", help="JSON file of tt_kernels launch settings to use instead of the defaults "
                   "(A/B against earlier settings, e.g. settings/round5.json)")
    args = p.parse_args(argv)
    if args.kernel_settings:
        apply_kernel_settings(json.loads(Path(args.kernel_settings).read_text()))
    global SMOKE
    SMOKE = args.smoke
    if SMOKE:
        for c in CONFIGS.values():
            c.update(batch=2, seq=16, steps=2, warmup=1)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:  # one process group for every run of this process (tt_harness uses it and leaves it)
        tt_harness.setup_distributed(argparse.Namespace(device="cuda" if torch.cuda.is_available() else "cpu"))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    keys = {f"{c}/{label(v, e)}" for c in CONFIGS for v, e in RUNS}
    only = set(args.only.split(",")) if args.only else None
    if only and only - keys:
        p.error(f"--only: unknown run(s) {', '.join(sorted(only - keys))}; known: {', '.join(sorted(keys))}")
    results = {}
    for cname in args.configs.split(","):
        cfg = CONFIGS[cname]
        for version, extra in RUNS:
            key = f"{cname}/{label(version, extra)}"
            if only and key not in only:
                continue
            print(f"\n##### {key}", flush=True)
            results[key] = one_run(version, extra, cfg, out, gates=args.gates and cname == "B8_S128")
            if rank() == 0:  # after every run: a job stopped later still leaves what it measured
                write_summary(out, results, argv)
            if world > 1 and results[key]["rc"] == -1:
                # a run that raised may leave the other ranks waiting in a collective: end this rank, and torchrun
                # ends the job (a failed gate is rc 1: every rank goes on)
                print(f"rank {rank()}: {key} raised; stopping (torchrun ends the other ranks)", flush=True)
                return 1
    if args.diagnose and world == 1:
        diagnose(out)
    if world > 1:
        import torch.distributed as dist
        me = rank()
        dist.destroy_process_group()
        if me != 0:  # torchrun fails the whole job when any rank exits non-zero
            return 1 if any(r["rc"] != 0 for r in results.values()) else 0

    rows, failed = [], []
    for key, r in results.items():
        res = r["result"]
        if r["rc"] != 0 or res is None:
            failed.append(key)
        if res is None:
            rows.append(f"| {key} | FAILED rc={r['rc']} | | | | | | |")
            continue
        m = res["metrics"]
        cname = key.split("/")[0]
        v1 = results.get(f"{cname}/v1", {}).get("result")
        speedup = m["tokens_per_second"] / v1["metrics"]["tokens_per_second"] if v1 else float("nan")
        mem_ratio = (m["peak_memory_allocated_bytes"] / v1["metrics"]["peak_memory_allocated_bytes"]
                     if v1 and m["peak_memory_allocated_bytes"] else float("nan"))
        gates = res.get("validation") or {}
        gate_txt = ("all pass" if all(g["passed"] for g in gates.values()) else
                    "FAIL: " + ",".join(k for k, g in gates.items() if not g["passed"])) if gates else "-"
        e2e = m.get("tokens_per_second_end_to_end")
        rows.append(f"| {key} | {m['tokens_per_second']:,.0f} | {e2e:,.0f} | {m['step_time_ms']['median']:.3f} "
                    f"({m['step_time_ms']['p10']:.3f}-{m['step_time_ms']['p90']:.3f}) | {speedup:.1f}x | "
                    f"{pct(m['mfu'])} | {mib(m['peak_memory_allocated_bytes'])} ({pct(mem_ratio, 0)}) | "
                    f"{gate_txt} |")
    summary = write_summary(out, results, argv)
    print(f"\ndevice: {summary['device']}\nversions: {summary['versions']}\ntargets: {TARGETS}")
    print("| run | tokens/s device step | tokens/s end-to-end | step ms median (p10-p90) | vs v1 | MFU (bf16 peak) | "
          "peak alloc (vs v1) | gates |")
    print("|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if failed:
        print("FAILED: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
