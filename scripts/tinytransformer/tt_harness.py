"""One harness for TinyTransformer v1..v4: CLI, seeded data, timed training, validation gates, madengine's
`performance:` line and one JSON result. Under torchrun (WORLD_SIZE > 1) it trains with DistributedDataParallel; a
version whose step is one CUDA graph keeps it on several ranks, the gradient all-reduce captured inside.

    python tt_harness.py --version v4 --batch-size 8 --seq-len 128 --json-out result.json --validate

Any failure (a raised error, a failed gate, a non-finite loss) exits non-zero."""
from __future__ import annotations

import argparse
import datetime
import faulthandler
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
from pathlib import Path


def _no_gpu_expected(argv) -> bool:
    """True when the run will be on the CPU: no GPU device node, or an explicit `--device cpu`."""
    explicit_cpu = any(a == "--device=cpu" or (a == "--device" and argv[i + 1:i + 2] == ["cpu"])
                       for i, a in enumerate(argv))
    return explicit_cpu or not any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/kfd"))


# Triton has no CPU backend: on a CPU its kernels run only in the interpreter, and TRITON_INTERPRET must be set
# before ANYTHING imports triton. Under the embedded tracer torch.profiler starts (and imports triton) as soon as
# torch is imported, so the decision is made here, before `import torch`.
if _no_gpu_expected(sys.argv[1:]):
    os.environ.setdefault("TRITON_INTERPRET", "1")

import torch  # noqa: E402

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

SCHEMA_VERSION = 1
# a rank that waits this long on its peers (connecting, or in a collective) fails instead of hanging
GLOO_TIMEOUT_S = 600

# Size defaults: the public versions' CLI defaults on a GPU, a tiny model on a CPU (seconds on 2 cores).
FULL = dict(batch_size=8, seq_len=256, num_steps=50, warmup_steps=5, hidden_dim=512, num_layers=8, num_heads=8)
TINY = dict(batch_size=4, seq_len=32, num_steps=10, warmup_steps=2, hidden_dim=64, num_layers=2, num_heads=4)

# Dense bf16 tensor-core peak per GPU (TFLOP/s, vendor data sheets), matched by substring of the device name.
PEAK_BF16_TFLOPS = (("H200", 989.4), ("H100 PCIe", 756.0), ("H100", 989.4), ("H20", 148.0), ("A100", 312.0),
                    ("MI325X", 1307.4), ("MI300X", 1307.4), ("MI300A", 980.6), ("MI250X", 383.0), ("MI210", 181.0),
                    ("L40S", 362.1), ("7900 XTX", 122.8))


class HarnessError(Exception):
    """Bad input to the harness (stdlib-only counterpart of madengine_rocprof.errors.UserError)."""


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--version", choices=("v1", "v2", "v3", "v4"), required=True)
    for name in ("batch-size", "seq-len", "num-steps", "warmup-steps", "hidden-dim", "num-layers", "num-heads"):
        p.add_argument(f"--{name}", type=int, default=None, help="default: public CLI value on a GPU, tiny on a CPU")
    p.add_argument("--num-kv-heads", type=int, default=0, help="0 = num_heads // 2")
    p.add_argument("--vocab-size", type=int, default=1000)
    p.add_argument("--learning-rate", type=float, default=3e-4)
    p.add_argument("--dtype", choices=("fp32", "bf16"), default=None,
                   help="matmul precision (bf16 = autocast, fp32 master weights); default: fp32, v4 bf16 on a GPU")
    p.add_argument("--use-amp", action="store_true", help="same as --dtype bf16 (public CLI name)")
    p.add_argument("--compile", action="store_true", help="torch.compile the model")
    p.add_argument("--cuda-graphs", choices=("auto", "on", "off"), default="auto",
                   help="capture the whole step in one CUDA graph (auto: v4 on one GPU)")
    p.add_argument("--attention", choices=("auto", "sdpa", "triton"), default="auto",
                   help="v4 attention: our Triton flash attention fused with RoPE (default) or PyTorch SDPA")
    p.add_argument("--task", choices=("random", "learnable"), default="random")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--full", action="store_true", help="full-size defaults also on a CPU")
    p.add_argument("--tiny", action="store_true", help="tiny defaults also on a GPU")
    p.add_argument("--validate", action="store_true", help="run the validation gates first; any failure exits 1")
    p.add_argument("--peak-tflops", type=float, default=None, help="peak used for MFU (default: table by GPU name)")
    p.add_argument("--json-out", default=None, help="write the JSON result here")
    p.add_argument("--cpu-binding", choices=("cores", "off"), default=None,
                   help="under torchrun, bind each rank to its own share of the cores (tt_affinity; default: "
                        "$TT_CPU_BINDING, else cores); off leaves the affinity alone; one rank keeps every core")
    args = p.parse_args(argv)
    if args.use_amp:
        args.dtype = "bf16"
    return args


def resolve(args):
    """Fill the defaults that depend on the device and version; returns the torch device."""
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.device == "cuda" and not torch.cuda.is_available():
        raise HarnessError("--device cuda: no CUDA/ROCm device is visible to torch")
    if args.device == "cpu":
        # Triton kernels run only in the interpreter on a CPU; this must be set before triton is imported.
        os.environ["TRITON_INTERPRET"] = "1"
    sizes = TINY if (args.tiny or (args.device == "cpu" and not args.full)) else FULL
    for key, value in sizes.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    from tt_versions import VERSIONS
    spec = VERSIONS[args.version]
    if args.dtype is None:
        args.dtype = spec.cuda_dtype if args.device == "cuda" else "fp32"
    if args.attention == "auto":
        args.attention = "triton" if args.version == "v4" else ""
    elif args.version != "v4":
        raise HarnessError(f"--attention applies to v4 only (v1 explicit, v2 SDPA, v3 Triton); got {args.version}")
    for key in ("batch_size", "seq_len", "num_steps", "hidden_dim", "num_layers", "num_heads"):
        if getattr(args, key) <= 0:
            raise HarnessError(f"--{key.replace('_', '-')} must be positive, got {getattr(args, key)}")
    if args.warmup_steps < 0:
        raise HarnessError("--warmup-steps must be >= 0")
    import tt_affinity
    try:
        args.cpu_binding = tt_affinity.resolve_mode(args.cpu_binding)
    except ValueError as e:
        raise HarnessError(str(e)) from None


def setup_distributed(args):
    """(rank, world_size, device). torchrun sets WORLD_SIZE/RANK/LOCAL_RANK; NCCL on GPUs, gloo on CPUs. A process
    group that already exists (bench.py runs several harness runs in one process per rank) is used as it is."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1, torch.device(args.device)
    import torch.distributed as dist

    import tt_affinity
    tt_affinity.bind(getattr(args, "cpu_binding", None))  # before the process group starts NCCL's threads
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if dist.is_initialized():
        device = torch.device("cuda", local) if args.device == "cuda" else torch.device("cpu")
        return dist.get_rank(), dist.get_world_size(), device
    if args.device == "cuda":
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
        dist.init_process_group("nccl", device_id=device)
    else:
        device = torch.device("cpu")
        _gloo_on_loopback_when_single_node(world)
        dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=GLOO_TIMEOUT_S))
    return dist.get_rank(), world, device


def _gloo_on_loopback_when_single_node(world: int) -> None:
    """gloo binds to the address the host name resolves to; where that address takes connections nowhere (a known
    pitfall in containers and sandboxes), the ranks wait on each other until the timeout. When every rank is on this
    machine, loopback is the right interface; an explicit GLOO_SOCKET_IFNAME always wins."""
    if os.environ.get("GLOO_SOCKET_IFNAME") or int(os.environ.get("LOCAL_WORLD_SIZE", "0")) != world:
        return
    import socket
    names = {name for _, name in socket.if_nameindex()}
    if "lo" in names:
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"


def _binding_of_every_rank(args, world: int):
    """tt_affinity's record of this process (binding it now if setup_distributed has not), or under torchrun the list
    of every rank's record, rank order."""
    import tt_affinity
    mine = tt_affinity.bind(args.cpu_binding)
    if world <= 1:
        return mine
    import torch.distributed as dist
    records: list = [None] * world
    dist.all_gather_object(records, mine)
    return records


def peak_host_rss_bytes() -> int | None:
    """Peak resident set size of this process on the host (Linux reports KiB, macOS bytes); None where unknown."""
    try:
        import resource
    except ImportError:  # not on Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def git_sha() -> str:
    if os.environ.get("GIT_SHA"):
        return os.environ["GIT_SHA"]
    try:
        out = subprocess.run(["git", "-C", str(HERE), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def device_info(device) -> dict:
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return {"type": "cuda", "name": props.name, "index": device.index, "total_memory_bytes": props.total_memory,
                "multiprocessors": props.multi_processor_count, "capability": f"{props.major}.{props.minor}",
                "runtime": ("hip " + torch.version.hip) if torch.version.hip else ("cuda " + str(torch.version.cuda))}
    return {"type": "cpu", "name": platform.processor() or platform.machine(), "threads": torch.get_num_threads()}


def versions_info() -> dict:
    info: dict[str, str | None] = {"python": platform.python_version(), "torch": torch.__version__}
    try:
        import triton
        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    return info


def peak_flops(args, device):
    if args.peak_tflops:
        return args.peak_tflops * 1e12, "--peak-tflops"
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        for key, tflops in PEAK_BF16_TFLOPS:
            if key in name:
                return tflops * 1e12, f"dense bf16 peak of {key} ({tflops} TFLOP/s)"
    return None, "unknown peak (pass --peak-tflops)"


def release_leftovers(device):
    """Free what earlier work in this process (the gates, an earlier run of bench.py) left allocated, so the peak
    memory of the timed run counts only its own: cached blocks, and the cuBLAS workspaces that torch keeps per stream
    used (seen: +64 MiB per new stream on an H200), which stay counted in memory_allocated."""
    import gc
    torch.cuda.synchronize(device)
    gc.collect()
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear is not None:
        clear()
    torch.cuda.empty_cache()


def write_json_atomic(path: str, data: dict):
    target = Path(path).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp_", suffix=".json", dir=str(target.parent))
    try:
        umask = os.umask(0o022)  # read the umask (setting it is the only way) and put it straight back
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp's 0600 would differ from every other output (open() gives this)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
        os.replace(tmp, target)
    except BaseException:
        os.unlink(tmp)
        raise


def main(argv=None) -> int:
    try:
        args = parse_args(argv)
        resolve(args)
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    import torch.distributed as dist

    import tt_model
    import tt_train
    from tt_versions import VERSIONS
    owns_group = not (dist.is_available() and dist.is_initialized())  # else bench.py made it and destroys it
    rank, world, device = setup_distributed(args)
    spec = VERSIONS[args.version]
    graphs = device.type == "cuda" and (
        args.cuda_graphs == "on" or (args.cuda_graphs == "auto" and spec.cuda_graphs)) and not args.compile
    if args.cuda_graphs == "on" and device.type != "cuda":
        print("warning: --cuda-graphs on ignored: not a GPU run", file=sys.stderr)
    warmup_eager = tt_train.DDP_WARMUP_EAGER if world > 1 else 3  # eager steps before the capture
    warmup = max(args.warmup_steps, warmup_eager + 2) if graphs else args.warmup_steps
    cfg = tt_model.ModelConfig(vocab_size=args.vocab_size, hidden_dim=args.hidden_dim, num_layers=args.num_layers,
                               num_heads=args.num_heads, num_kv_heads=args.num_kv_heads, max_seq_len=args.seq_len)
    settings = {k: v for k, v in vars(args).items()}
    settings.update(tf32_matmuls=spec.tf32 and args.dtype == "fp32" and device.type == "cuda",
                    cuda_graphs_used=graphs, warmup_steps_used=warmup, world_size=world,
                    model_config=cfg.as_dict(), cpu_binding=_binding_of_every_rank(args, world),
                    nccl_env={k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")})
    say = print if rank == 0 else (lambda *a, **k: None)
    say(f"TinyTransformer {args.version}: {spec.description}")
    say(f"device {device} | dtype {args.dtype} | B{args.batch_size} S{args.seq_len} | hidden {cfg.hidden_dim} "
        f"layers {cfg.num_layers} heads {cfg.num_heads}/{cfg.num_kv_heads} vocab {cfg.vocab_size} | "
        f"CUDA graph {graphs} | world {world}"
        + (" | Triton interpreter (TRITON_INTERPRET=1)" if device.type == "cpu" and args.version in ("v3", "v4")
           else ""))

    validation = {}
    if args.validate:
        import tt_gates
        if rank == 0:
            validation = tt_gates.run_gates(args.version, cfg, device, args.dtype, args.attention, args.seed, graphs,
                                            small=device.type == "cpu")
            for name, outcome in validation.items():
                extra = {k: v for k, v in outcome.items() if k not in ("passed", "losses", "ref_losses",
                                                                         "gpu_kernels_seen", "limits")}
                say(f"gate {name}: {'PASS' if outcome['passed'] else 'FAIL'} {extra}")
        if world > 1:  # every rank takes part: the 2-rank trajectory against one rank with the whole batch
            import tt_gates
            outcome = tt_gates.gate_data_parallel(args.version, cfg, device, args.dtype, args.attention, args.seed,
                                                  graphs, small=device.type == "cpu")
            validation["data_parallel_vs_one_rank"] = outcome
            say(f"gate data_parallel_vs_one_rank: {'PASS' if outcome['passed'] else 'FAIL'} "
                f"{ {k: v for k, v in outcome.items() if k not in ('passed', 'losses', 'ref_losses')} }")

    model = tt_train.build_model(args.version, cfg, device, args.seed, args.attention, dtype=args.dtype)
    n_params = tt_model.count_params(model)
    if args.compile:
        model = torch.compile(model)
    side = torch.cuda.Stream(device) if graphs and world > 1 else None  # DDP, warm-up and capture on one stream
    if world > 1:
        model = tt_train.data_parallel(model, device, stream=side)
        settings["data_parallel"] = tt_train.data_parallel_kind(model)
    opt = tt_train.make_optimizer(model, args.version, args.learning_rate, device, capturable=graphs)
    step = tt_train.TrainStep(model, opt, device, args.dtype, graphs=graphs, tf32=spec.tf32, stream=side,
                              warmup_eager=warmup_eager)
    n_batches = min(warmup + args.num_steps, 64)
    tokens = tt_train.make_tokens(args.task, n_batches, args.batch_size, args.seq_len, cfg.vocab_size,
                                  args.seed + 1009 * (rank + 1), "cpu")
    feed = tt_train.BatchFeed(tokens, device)
    if device.type == "cuda":
        release_leftovers(device)
        torch.cuda.reset_peak_memory_stats(device)
    times, losses, wall = tt_train.timed_run(step, feed, warmup, args.num_steps, device)

    median = tt_train.percentile(times, 50)
    rank_medians = [median]
    if world > 1:  # the slowest rank sets the pace of a synchronous data-parallel step
        each = torch.zeros(world, dtype=torch.float64, device=device)
        each[rank] = median
        dist.all_reduce(each)  # every rank's own median, to see which one waits
        rank_medians = [float(v) for v in each]
        t = torch.tensor([median, wall], dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        median, wall = float(t[0]), float(t[1])
    tokens_per_step = args.batch_size * args.seq_len * world
    tokens_per_second = tokens_per_step / (median / 1e3)
    tokens_per_second_e2e = tokens_per_step * len(times) / wall
    flops = tt_model.flops_per_step(cfg, args.batch_size * world, args.seq_len)
    peak, peak_source = peak_flops(args, device)
    mfu = flops / (median / 1e3) / (peak * world) if peak else None
    mem_alloc = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    mem_reserved = torch.cuda.max_memory_reserved(device) if device.type == "cuda" else None
    host_rss = peak_host_rss_bytes()
    finite = all(v == v and abs(v) != float("inf") for v in losses)
    gates_ok = all(g["passed"] for g in validation.values())
    status = "ok" if finite and gates_ok else "failed"

    result = {
        "schema_version": SCHEMA_VERSION, "model": f"tiny_llama_{args.version}", "version": args.version,
        "description": spec.description, "git_sha": git_sha(), "versions": versions_info(),
        "device": device_info(device), "settings": settings, "world_size": world,
        "metrics": {
            "tokens_per_second": tokens_per_second,
            "tokens_per_second_mean": tokens_per_step * len(times) / (sum(times) / 1e3),
            "tokens_per_second_end_to_end": tokens_per_second_e2e, "end_to_end_seconds": wall,
            "performance_line": "tokens_per_second",
            "step_time_ms": {"median": median, "p10": tt_train.percentile(times, 10),
                             "p90": tt_train.percentile(times, 90), "min": min(times), "max": max(times)},
            "step_time_ms_median_per_rank": rank_medians,
            "samples_per_second": args.batch_size * world / (median / 1e3),
            "peak_memory_allocated_bytes": mem_alloc, "peak_memory_reserved_bytes": mem_reserved,
            "peak_host_rss_bytes": host_rss,
            "mfu": mfu, "flops_per_step": flops, "peak_flops": peak, "peak_flops_source": peak_source,
            "flops_formula": "6 * N_matmul * tokens + 12 * layers * hidden * seq * tokens (PaLM)",
            "parameters": n_params, "tokens_per_step": tokens_per_step,
            "timing": "device events around each whole step (forward, loss, backward, optimizer), warm-up excluded;"
                      " tokens_per_second = tokens_per_step / median step time",
            "timing_end_to_end": "wall clock over the timed steps (from before the first timed batch is fetched to "
                                 "the device sync after the last step: batch feed, host work, launches included; "
                                 "the synthetic token set is generated once before); tokens_per_second_end_to_end = "
                                 "tokens_per_step * steps / wall seconds",
            "memory": "torch.cuda.max_memory_allocated / max_memory_reserved after reset_peak_memory_stats, "
                      "warm-up and timed steps included; peak_host_rss_bytes: the process's peak resident set size "
                      "on the host over its whole life (getrusage ru_maxrss; imports and model build included)",
        },
        "step_times_ms": times, "losses": losses, "validation": validation, "status": status,
    }
    if rank == 0:
        say(f"step time ms: median {median:.3f} p10 {result['metrics']['step_time_ms']['p10']:.3f} "
            f"p90 {result['metrics']['step_time_ms']['p90']:.3f} over {len(times)} steps (warm-up {warmup} excluded)")
        say(f"loss: first {losses[0]:.4f} last {losses[-1]:.4f}")
        if mem_alloc is not None and mem_reserved is not None:
            say(f"peak memory: allocated {mem_alloc / 2**20:.1f} MiB, reserved {mem_reserved / 2**20:.1f} MiB")
        say(f"FLOPs/step {flops:.4g} ({result['metrics']['flops_formula']}); peak {peak_source}; "
            f"MFU {'n/a' if mfu is None else f'{100 * mfu:.2f}%'}")
        # madengine parses the `performance:` line: the device-step figure (metrics.tokens_per_second); the
        # end-to-end figure is printed right after it.
        say(f"performance: {tokens_per_second:.2f} tokens_per_second")
        say(f"end-to-end: {tokens_per_second_e2e:.2f} tokens_per_second ({len(times)} timed steps in {wall:.4f} s "
            f"wall clock, host work included; device-step figure above)")
        if args.json_out:
            write_json_atomic(args.json_out, result)
    if world > 1:
        import gc
        # Free DDP (its Reducer holds the process group) while the group is still registered. A Reducer freed after
        # destroy_process_group() destroys the gloo group while holding the GIL, and a gloo thread that needs the GIL
        # to free its last work then waits on it forever (seen: 1 run in 8 on 2 CPU cores, hung until the timeout).
        del step, opt, model
        gc.collect()
        if owns_group:
            dist.destroy_process_group()
    if status != "ok":
        why = "non-finite loss" if not finite else "failed gates: " + ", ".join(
            k for k, g in validation.items() if not g["passed"])
        print(f"error: {args.version} {why}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    # A run stopped by SIGTERM (a runner's timeout, torchrun ending its workers) prints every thread's stack first,
    # so the log of a hang says where it hung; the handler before this one (the tracer's flush, or the default
    # exit) still runs after it.
    faulthandler.register(signal.SIGTERM, all_threads=True, chain=True)
    sys.exit(main())
