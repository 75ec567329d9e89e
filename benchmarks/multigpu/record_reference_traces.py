"""Reference traces recorded on real GPUs for the report analyses (collectives across ranks, per-operator efficiency
from shapes, idle-time causes, launch latency): the workloads and the ncu post-processing that
record_reference_traces.sh runs, one subcommand each (not a benchmark: the traces are test inputs).

    tt    TinyTransformer training steps under torch.profiler (CPU + CUDA, record_shapes=True, schedule wait 0 /
          warmup 1 / active N), optionally under torchrun with DDP or FSDP2 (fully_shard); one Kineto trace per rank
          (DIR/NAME_rank<r>.pt.trace.json.gz, or DIR/NAME.pt.trace.json.gz on one process) and a .meta.json beside it
    gemm  a fixed list of mm / addmm / bmm / linear calls in bf16, fp16 and fp32 (TF32 on and off); `--mode kineto`
          records each call REPS times under torch.profiler with record_shapes=True, each inside a record_function
          named after its label; `--mode ncu` runs each call once between cudaProfilerStart/Stop (for
          `ncu --profile-from-start off`), each preceded by a one-element fill kernel that marks where its kernels
          begin; both write DIR/gemm_ops.json (labels, shapes, dtypes, 2*M*N*K FLOPs per call)
    pick-metrics  reads `ncu --query-metrics` output, prints the comma-separated metric list that counts tensor-core
          and FP-pipe work (every sm__ops_path_tensor_* base name, the FP add/mul/fma thread-instruction counters,
          DRAM bytes, duration); `--small` gives the fallback set
    ncu-json  ncu raw CSV (`ncu --import R --csv --page raw --print-units base`) + gemm_ops.json -> one JSON row per
          kernel with its GEMM label (by the marker kernels), grid/block, every metric value and the duration
"""
from __future__ import annotations

import argparse
import csv
import functools
import json
import os
import platform
import re
import sys
import time


def _repo_root() -> str:
    """The checkout holding scripts/tinytransformer: above this file (benchmarks/multigpu/), else the working
    directory (the script may travel in a side folder of the checkout)."""
    for root in (os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), os.getcwd()):
        if os.path.isdir(os.path.join(root, "scripts", "tinytransformer")):
            return root
    raise SystemExit("error: scripts/tinytransformer not found; run from the repository root")


REPO = _repo_root()
TT_DIR = os.path.join(REPO, "scripts", "tinytransformer")


# --------------------------------------------------------------------------------------------------- versions
def versions() -> dict:
    import torch
    info: dict = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
                  "hip": torch.version.hip}
    try:
        info["nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version()) if torch.cuda.is_available() else None
    except Exception as e:  # noqa: BLE001 - recorded, not fatal
        info["nccl"] = f"unknown ({e})"
    try:
        import triton
        info["triton"] = triton.__version__
    except ImportError:
        info["triton"] = None
    if torch.cuda.is_available():
        info["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return info


# -------------------------------------------------------------------------------------------- TinyTransformer
def run_tt(a) -> int:
    if a.device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports triton
    sys.path.insert(0, TT_DIR)
    from torch.profiler import ProfilerActivity, profile, schedule

    import tt_harness
    import tt_model
    import tt_train
    from tt_versions import VERSIONS

    argv = ["--version", a.version, "--batch-size", str(a.batch_size), "--seq-len", str(a.seq_len),
            "--device", a.device]
    if a.dtype:
        argv += ["--dtype", a.dtype]
    if a.tiny:
        argv += ["--tiny"]
    args = tt_harness.parse_args(argv)
    tt_harness.resolve(args)
    rank, world, device = tt_harness.setup_distributed(args)
    spec = VERSIONS[a.version]
    graphs = (world == 1 and device.type == "cuda" and a.parallel == "none"
              and (a.cuda_graphs == "on" or (a.cuda_graphs == "auto" and spec.cuda_graphs)))
    cfg = tt_model.ModelConfig(vocab_size=args.vocab_size, hidden_dim=args.hidden_dim, num_layers=args.num_layers,
                               num_heads=args.num_heads, num_kv_heads=args.num_kv_heads, max_seq_len=args.seq_len)
    model = tt_train.build_model(a.version, cfg, device, args.seed, args.attention, dtype=args.dtype)
    sharding = None
    if a.parallel == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    elif a.parallel == "fsdp":
        sharding = shard_fsdp2(model)
    opt = tt_train.make_optimizer(model, a.version, args.learning_rate, device, capturable=graphs)
    step = tt_train.TrainStep(model, opt, device, args.dtype, graphs=graphs, tf32=spec.tf32)
    tokens = tt_train.make_tokens("random", 16, args.batch_size, args.seq_len, cfg.vocab_size,
                                  args.seed + 1009 * (rank + 1), "cpu")
    feed = tt_train.BatchFeed(tokens, device)
    for _ in range(a.warmup_steps):  # untimed warm-up (a CUDA graph is captured here)
        step(*feed.next())
    tt_train.sync(device)

    os.makedirs(a.out, exist_ok=True)
    stem = f"{a.name}_rank{rank}" if world > 1 else a.name
    path = os.path.join(a.out, f"{stem}.pt.trace.json.gz")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    host_ms = []
    with profile(activities=activities, schedule=schedule(wait=0, warmup=1, active=a.active, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(path), record_shapes=True) as prof:
        for _ in range(a.active + 1):  # the schedule's one warm-up step, then the active ones
            t0 = time.perf_counter()
            step(*feed.next())
            prof.step()
            host_ms.append((time.perf_counter() - t0) * 1e3)
    tt_train.sync(device)
    meta = {"name": a.name, "rank": rank, "world_size": world, "parallel": a.parallel, "sharding": sharding,
            "version": a.version, "batch_size_per_rank": args.batch_size, "seq_len": args.seq_len,
            "dtype": args.dtype, "cuda_graphs": graphs, "tf32": spec.tf32 and args.dtype == "fp32",
            "model_config": cfg.as_dict(), "warmup_steps_unprofiled": a.warmup_steps,
            "profiler": {"activities": [str(x) for x in activities], "record_shapes": True,
                         "schedule": {"wait": 0, "warmup": 1, "active": a.active, "repeat": 1}},
            "host_ms_per_step_incl_profiler_warmup": host_ms, "trace": os.path.basename(path),
            "trace_bytes": os.path.getsize(path), "argv": sys.argv, "versions": versions(),
            "env": {k: os.environ.get(k) for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "CUDA_VISIBLE_DEVICES",
                                                    "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST")}}
    with open(os.path.join(a.out, f"{stem}.meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"rank {rank}: {path} ({meta['trace_bytes']} bytes), host ms/step {[round(x, 2) for x in host_ms]}")
    if world > 1:
        import gc

        import torch.distributed as dist
        del step, opt, model  # free DDP's reducer while the group exists (see tt_harness)
        gc.collect()
        dist.destroy_process_group()
    return 0


def shard_fsdp2(model) -> str:
    """FSDP2: each block's attention and feed-forward module its own group (TinyLlama.forward calls those modules,
    not Block.forward, and reads the blocks' norm weights itself), then the root: embedding, tied lm_head, norms."""
    from torch.distributed.fsdp import fully_shard
    for block in model.layers:
        fully_shard(block.attn)
        fully_shard(block.ffn)
    fully_shard(model)
    return "fully_shard per Block.attn and Block.ffn, then the root (embedding, tied lm_head, norm weights)"


# ------------------------------------------------------------------------------------------------------- GEMMs
# (label, op, shapes): mm/addmm (M, K, N); bmm (batch, M, K, N); linear: x (B, S, K) @ W(N, K)^T + b.
GEMMS = [
    ("mm_8192", "mm", (8192, 8192, 8192)),
    ("mm_4096", "mm", (4096, 4096, 4096)),
    ("addmm_2048x8192x1024", "addmm", (2048, 8192, 1024)),
    ("linear_8x512x1024_to_4096", "linear", (8, 512, 1024, 4096)),
    ("bmm_32x1024x128x1024", "bmm", (32, 1024, 128, 1024)),
]
SMALL = {"mm_8192": (64, 64, 64), "mm_4096": (32, 32, 32), "addmm_2048x8192x1024": (16, 64, 8),
         "linear_8x512x1024_to_4096": (2, 4, 8, 16), "bmm_32x1024x128x1024": (2, 8, 4, 8)}
# (precision label, torch dtype name, allow_tf32)
PRECISIONS = [("bf16", "bfloat16", False), ("fp16", "float16", False), ("fp32_tf32", "float32", True),
              ("fp32", "float32", False)]


def gemm_calls(small: bool, device):
    """[(label, precision, op, dims, M, N, K, batch, fn)] with inputs already allocated."""
    import torch
    import torch.nn.functional as F
    calls = []
    g = torch.Generator(device=device).manual_seed(0)
    for prec, dtname, tf32 in PRECISIONS:
        dt = getattr(torch, dtname)
        for label, op, dims in GEMMS:
            dims = SMALL[label] if small else dims

            def rnd(*shape, dt=dt):
                return torch.randn(*shape, generator=g, device=device, dtype=dt)
            if op in ("mm", "addmm"):
                M, K, N = dims
                batch = 1
                A, B = rnd(M, K), rnd(K, N)
                if op == "mm":
                    fn = functools.partial(torch.mm, A, B)
                else:
                    bias = rnd(N)
                    fn = functools.partial(torch.addmm, bias, A, B)
            elif op == "bmm":
                batch, M, K, N = dims
                A, B = rnd(batch, M, K), rnd(batch, K, N)
                fn = functools.partial(torch.bmm, A, B)
            else:  # linear
                b0, s0, K, N = dims
                batch, M = 1, b0 * s0
                X, W, bias = rnd(b0, s0, K), rnd(N, K), rnd(N)
                fn = functools.partial(F.linear, X, W, bias)
            calls.append(dict(label=f"{prec}/{label}", precision=prec, dtype=dtname, allow_tf32=tf32, op=op,
                              dims=list(dims), M=M, N=N, K=K, batch=batch, flops=2 * batch * M * N * K, fn=fn))
    return calls


def run_gemm(a) -> int:
    import torch
    device = torch.device(a.device)
    small = a.small or device.type == "cpu"
    calls = gemm_calls(small, device)
    os.makedirs(a.out, exist_ok=True)

    def call(c):
        torch.backends.cuda.matmul.allow_tf32 = c["allow_tf32"]
        return c["fn"]()

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for c in calls:  # warm-up: cuBLAS handles, workspaces, heuristics; outside every recorded window
        call(c)
    sync()
    if a.mode == "kineto":
        from torch.profiler import ProfilerActivity, profile, record_function
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        path = os.path.join(a.out, "gemm_shapes.pt.trace.json.gz")
        with profile(activities=activities, record_shapes=True) as prof:
            for c in calls:
                for _ in range(a.reps):
                    with record_function(c["label"]):
                        call(c)
                sync()
        prof.export_chrome_trace(path)
        print(f"{path}: {os.path.getsize(path)} bytes")
    else:  # ncu: only the window between cudaProfilerStart/Stop is profiled (ncu --profile-from-start off)
        marker = torch.zeros(1, device=device)
        torch.cuda.cudart().cudaProfilerStart()
        for c in calls:
            marker.fill_(1.0)  # one small elementwise kernel: the next kernels belong to call c
            call(c)
            sync()
        marker.fill_(2.0)  # closing marker
        sync()
        torch.cuda.cudart().cudaProfilerStop()
    torch.backends.cuda.matmul.allow_tf32 = False
    ops = [{k: v for k, v in c.items() if k != "fn"} for c in calls]
    with open(os.path.join(a.out, "gemm_ops.json"), "w") as f:
        json.dump({"mode": a.mode, "reps": a.reps if a.mode == "kineto" else 1, "small": small,
                   "flops_formula": "2 * batch * M * N * K (addmm/linear bias adds not counted)",
                   "marker": "ncu mode: a fill_ kernel on a 1-element tensor before each call and one after the last",
                   "versions": versions(), "ops": ops}, f, indent=1)
    return 0


# ---------------------------------------------------------------------------------------------- ncu handling
FP_OPS = ("fadd", "fmul", "ffma", "hadd", "hmul", "hfma", "dadd", "dmul", "dfma")


def metric_names(query_text: str) -> set[str]:
    """Base metric names in `ncu --query-metrics` output (the first word of each table row)."""
    names = set()
    for line in query_text.splitlines():
        m = re.match(r"\s*([a-z0-9_]+__[A-Za-z0-9_.]+)\s", line + " ")
        if m:
            names.add(m.group(1))
    return names


def pick_metrics(query_text: str, small: bool = False) -> list[str]:
    names = metric_names(query_text)
    chosen = ["gpu__time_duration.sum"]
    tensor = sorted(n for n in names if re.fullmatch(r"sm__ops_path_tensor_\w+", n))
    if small:
        tensor = [n for n in tensor if re.fullmatch(r"sm__ops_path_tensor_src_(bf16|fp16|tf32)_dst_fp(16|32)", n)]
    chosen += [f"{n}.sum" for n in tensor]
    for op in (("ffma", "hfma") if small else FP_OPS):
        for prefix in ("smsp__", "sm__"):
            base = f"{prefix}sass_thread_inst_executed_op_{op}_pred_on"
            if base in names:
                chosen.append(f"{base}.sum")
                break
    if not small:
        chosen += [f"{n}.sum" for n in ("dram__bytes_read", "dram__bytes_write") if n in names]
        chosen += [n for n in ("sm__cycles_elapsed.avg.per_second",) if n.split(".")[0] in names]
    return chosen


# The disjoint top-level tensor-core paths (sm__ops_path_tensor_src_<in>[_dst_<out>]): the op_hgmma/op_hmma
# variants and the _sparsity_on/off splits count the same operations again.
TENSOR_PATH = re.compile(r"sm__ops_path_tensor_src_[a-z0-9]+(_dst_[a-z0-9]+)?\.sum")


def tensor_flops(metrics: dict) -> int:
    """Tensor-core operations (a multiply-add counts 2) summed over the disjoint source-type paths."""
    return sum(int(v) for n, v in metrics.items() if TENSOR_PATH.fullmatch(n) and isinstance(v, (int, float)))


def fp32_pipe_flops(metrics: dict) -> int:
    """FP32 FLOPs on the FMA pipe from thread-level SASS counts: 2 per FFMA, 1 per FADD / FMUL."""
    def get(op):
        v = metrics.get(f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum")
        return int(v) if isinstance(v, (int, float)) else 0
    return 2 * get("ffma") + get("fadd") + get("fmul")


def _number(text: str):
    t = text.replace(",", "").strip()
    if t in ("", "n/a"):
        return None
    try:
        v = float(t)
    except ValueError:
        return text
    return int(v) if v.is_integer() and abs(v) < 2**63 else v


def ncu_json(raw_csv: str, ops_json: str) -> dict:
    """Rows of ncu's raw page, labelled with the GEMM call whose marker precedes them."""
    with open(raw_csv, newline="") as f:
        lines = [ln for ln in f if ln.startswith('"')]  # ncu prints ==PROF== lines before the table
    table = list(csv.reader(lines))
    header, rows = table[0], table[1:]
    units = {}
    if rows and rows[0] and rows[0][0] == "" and not rows[0][header.index("Kernel Name")]:
        units = dict(zip(header, rows[0], strict=False))  # the units row
        rows = rows[1:]
    with open(ops_json) as f:
        ops = json.load(f)["ops"]
    fixed = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
             "Grid Size", "Device", "CC")
    kernels, op_i = [], -1
    for r in rows:
        rec = dict(zip(header, r, strict=False))
        name = rec.get("Kernel Name", "")
        label: str | None
        is_marker = "fill" in name.lower() or ("elementwise" in name.lower() and "gemm" not in name.lower())
        if is_marker and rec.get("Grid Size", "").replace(" ", "") in ("(1,1,1)", "1,1,1"):
            op_i += 1
            label = "marker"
        else:
            label = ops[op_i]["label"] if 0 <= op_i < len(ops) else None
        metrics = {k: _number(v) for k, v in rec.items() if k not in fixed}
        kernels.append({"id": _number(rec.get("ID", "")), "kernel_name": name, "op_label": label,
                        "grid": rec.get("Grid Size"), "block": rec.get("Block Size"), "stream": rec.get("Stream"),
                        "device": rec.get("Device"), "cc": rec.get("CC"), "metrics": metrics})
    per_op = []
    for i, op in enumerate(ops):
        ks = [k for k in kernels if k["op_label"] == op["label"]]
        tensor = sum(tensor_flops(k["metrics"]) for k in ks)
        fp32 = sum(fp32_pipe_flops(k["metrics"]) for k in ks)
        duration = sum(k["metrics"].get("gpu__time_duration.sum") or 0 for k in ks)
        counted = tensor + fp32
        per_op.append({"index": i, "label": op["label"], "expected_flops": op["flops"], "kernels": len(ks),
                       "kernel_names": [k["kernel_name"] for k in ks], "tensor_flops": tensor,
                       "fp32_pipe_flops": fp32, "counted_over_expected": counted / op["flops"] if op["flops"] else None,
                       "duration_ns": duration,
                       "counted_tflops_per_s": counted / duration / 1e3 if duration else None})
    return {"source": os.path.basename(raw_csv), "units": units, "kernels": kernels, "per_op": per_op,
            "markers_seen": sum(1 for k in kernels if k["op_label"] == "marker"), "ops_expected": len(ops)}


# ------------------------------------------------------------------------------------------------------- CLI
def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tt")
    t.add_argument("--version", required=True)
    t.add_argument("--batch-size", type=int, default=8)
    t.add_argument("--seq-len", type=int, default=128)
    t.add_argument("--dtype", choices=("fp32", "bf16"), default=None)
    t.add_argument("--cuda-graphs", choices=("auto", "on", "off"), default="auto")
    t.add_argument("--parallel", choices=("none", "ddp", "fsdp"), default="none")
    t.add_argument("--active", type=int, default=4)
    t.add_argument("--warmup-steps", type=int, default=6)
    t.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    t.add_argument("--tiny", action="store_true", help="the harness's tiny model (CPU checks)")
    t.add_argument("--name", required=True)
    t.add_argument("--out", required=True)
    g = sub.add_parser("gemm")
    g.add_argument("--mode", choices=("kineto", "ncu"), required=True)
    g.add_argument("--reps", type=int, default=3)
    g.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    g.add_argument("--small", action="store_true")
    g.add_argument("--out", required=True)
    m = sub.add_parser("pick-metrics")
    m.add_argument("query_file")
    m.add_argument("--small", action="store_true")
    n = sub.add_parser("ncu-json")
    n.add_argument("raw_csv")
    n.add_argument("ops_json")
    n.add_argument("--out", required=True)
    a = p.parse_args(argv)
    if a.cmd == "tt":
        return run_tt(a)
    if a.cmd == "gemm":
        return run_gemm(a)
    if a.cmd == "pick-metrics":
        with open(a.query_file) as f:
            chosen = pick_metrics(f.read(), a.small)
        print(",".join(chosen))
        return 0 if len(chosen) > 1 else 1
    data = ncu_json(a.raw_csv, a.ops_json)
    with open(a.out, "w") as f:
        json.dump(data, f, indent=1)
    print(f"{a.out}: {len(data['kernels'])} kernels, {data['markers_seen']} markers, {data['ops_expected']} ops")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
