"""Training machinery shared by the harness and the validation gates: seeded data, model + optimizer construction, the
training step (eager, or captured whole into one CUDA graph), and device-event timing."""
from __future__ import annotations

import contextlib
import sys
import time
from typing import Any

import torch

import tt_model
from tt_versions import VERSIONS

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


# ------------------------------------------------------------------------------------------------------- data
def make_tokens(task: str, n_batches: int, batch: int, seq: int, vocab: int, seed: int, device) -> torch.Tensor:
    """(n_batches, batch, seq + 1) token ids, seeded and generated on the CPU so every device sees the same data.
    random: uniform ids (speed runs; the loss cannot fall much below ln(vocab)).
    learnable: each sequence counts up from a random start with a random stride of 1 or 2, modulo 32 (or vocab if
    smaller); the stride is visible from the first two tokens, so a working model drives the loss far below
    ln(vocab)."""
    g = torch.Generator().manual_seed(seed)
    if task == "random":
        tokens = torch.randint(0, vocab, (n_batches, batch, seq + 1), generator=g)
    elif task == "learnable":
        period = min(vocab, 32)  # few distinct tokens: every one is seen often even in tiny batches
        start = torch.randint(0, period, (n_batches, batch, 1), generator=g)
        stride = torch.randint(1, 3, (n_batches, batch, 1), generator=g)
        tokens = (start + stride * torch.arange(seq + 1)) % period
    else:
        raise ValueError(f"unknown task {task!r} (known: random, learnable)")
    return tokens.to(device)


def split_batches(tokens: torch.Tensor):
    """Single label shift: inputs are tokens[:-1], targets tokens[1:] of the same sequence."""
    return tokens[..., :-1].contiguous(), tokens[..., 1:].contiguous()


# ------------------------------------------------------------------------------------------ model and optimizer
def build_model(version: str, cfg: tt_model.ModelConfig, device, seed: int, attention: str = "",
                reference: dict | None = None, dtype: str = "fp32"):
    """The version's model on `device`, initialised from `seed` (v1 layout) or from a v1-layout state dict.
    Versions with bf16_params get bf16 parameters (fp32 master weights kept for the optimizer) when dtype is bf16."""
    spec = VERSIONS[version]
    torch.manual_seed(seed)
    model = tt_model.TinyLlama(cfg, spec.make_ops(attention))
    if reference is None and version != "v1":
        # Same seed -> same initial weights in every version: initialise a v1 model and copy its numbers.
        torch.manual_seed(seed)
        reference = tt_model.reference_state(tt_model.TinyLlama(cfg, tt_model.Ops()))
    if reference is not None:
        tt_model.load_reference_state(model, reference)
    model = model.to(device)
    if spec.bf16_params and dtype == "bf16":
        import tt_optim
        tt_optim.use_low_precision_params(model)
    return model


def make_optimizer(model, version: str, lr: float, device, capturable: bool):
    weights = getattr(base_model(model), "master_weights", None)
    if weights is not None and getattr(base_model(model), SHARDED_ATTR, False):  # data parallel, sharded AdamW
        import tt_sharded_adamw
        return tt_sharded_adamw.ShardedMasterAdamW(weights, lr=lr, weight_decay=0.01)
    if weights is not None:  # bf16 parameters: AdamW on the fp32 master weights, one kernel
        import tt_optim
        return tt_optim.MasterAdamW(weights, lr=lr, weight_decay=0.01)
    kwargs: dict[str, Any] = dict(lr=lr, weight_decay=0.01)
    if device.type == "cuda" and VERSIONS[version].fused_adam:
        kwargs["fused"] = True
    if capturable:
        kwargs["capturable"] = True
    return torch.optim.AdamW(model.parameters(), **kwargs)


# DDP does host-side setup (bucket rebuilding, logging) in its first 10 iterations: the whole-step CUDA graph of a
# data-parallel run is captured only after this many eager steps (torch.cuda "Usage with DistributedDataParallel").
DDP_WARMUP_EAGER = 11
# DDP's gradient bucket size (MiB), DDP's default. Smaller buckets did not help v4 B8 S128 on two H100s
# (benchmarks/tinytransformer/scaling_probe.py: 25, 8, 4, 2 MiB -> 1.718, 1.718, 1.715, 1.789 ms per step).
DDP_BUCKET_MB = 25.0
# bf16 parameters with fp32 master weights (v4) on several ranks: no DDP; the optimizer is sharded over the ranks
# (tt_sharded_adamw: reduce-scatter, 1/world of the AdamW on each rank, all-gather of the bf16 weights). False: DDP,
# as v1-v3. On two H100s, v4 B8 S128: see docs/tinytransformer.md#multi-gpu.
SHARDED_OPTIMIZER = True
SHARDED_ATTR = "shard_optimizer"  # set on the model that make_optimizer must give the sharded optimizer


def data_parallel_kind(model) -> str:
    """How a model returned by data_parallel() trains on several ranks: "sharded_adamw" or "ddp"."""
    return "sharded_adamw" if getattr(base_model(model), SHARDED_ATTR, False) else "ddp"


def data_parallel(model, device, stream=None):
    """`model` ready for the harness's runs of several ranks. bf16 parameters with master weights (and
    SHARDED_OPTIMIZER): the model itself, marked so that make_optimizer gives it the sharded optimizer. Otherwise
    DistributedDataParallel: static_graph: every step runs the same parameters in the same order, so DDP plans its
    buckets once; gradient_as_bucket_view: the gradients are views of the all-reduce buckets (no copy back);
    broadcast_buffers off: the only buffers are the constant RoPE tables. `stream`: for a captured step, DDP is built
    on the stream the warm-up and the capture use (its gradient accumulators are bound to the stream they were created
    on)."""
    if SHARDED_OPTIMIZER and getattr(base_model(model), "master_weights", None) is not None:
        object.__setattr__(base_model(model), SHARDED_ATTR, True)
        return model
    from torch.nn.parallel import DistributedDataParallel as DDP
    kwargs: dict[str, Any] = dict(static_graph=True, gradient_as_bucket_view=True, broadcast_buffers=False,
                                  bucket_cap_mb=DDP_BUCKET_MB)
    if device.type == "cuda":
        kwargs["device_ids"] = [device.index]
    kernels = sys.modules.get("tt_kernels")  # loaded by the versions whose projections may use its side stream
    if kernels is not None:  # DDP's hooks read each weight gradient as autograd hands it over: not on a side stream
        for p in model.parameters():
            setattr(p, kernels.GRAD_HOOKED_ATTR, True)
    with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
        wrapped = DDP(model, **kwargs)
    if stream is not None:
        torch.cuda.current_stream(device).wait_stream(stream)
    return wrapped


def autocast(device, dtype: str, cache_enabled: bool = True):
    if dtype == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=DTYPES[dtype], cache_enabled=cache_enabled)


def base_model(model):
    """The TinyLlama inside DDP / torch.compile wrappers."""
    model = getattr(model, "module", model)
    return getattr(model, "_orig_mod", model)


@contextlib.contextmanager
def tf32_mode(enabled: bool):
    """fp32 matmuls on TF32 tensor cores inside the block (a process-wide switch: restored on exit)."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


def compute_loss(model, x, y, device, dtype: str, cache_enabled: bool = True):
    with autocast(device, dtype, cache_enabled):
        logits = model(x)
    return base_model(model).ops.loss(logits, y)


class TrainStep:
    """One optimizer step per call: zero grads, forward, loss, backward, AdamW.

    With graphs=True (CUDA) the first `warmup_eager` calls run eagerly on a side stream (lazy initialisation: Triton
    compilation, cuBLAS workspaces, optimizer state), the next call captures the whole step into one CUDA graph and
    replays it, and later calls copy the batch into the static inputs and replay. Every call, eager or replayed, is
    one real training step on the batch it is given. `stream`: the side stream to warm up AND capture on (a
    data-parallel step: DDP was built on it, and its gradient all-reduce is captured with the rest); without it the
    capture uses torch's own capture stream."""

    # the captured step's inputs and output (set when the CUDA graph is captured)
    static_x: torch.Tensor
    static_y: torch.Tensor
    static_loss: torch.Tensor

    def __init__(self, model, optimizer, device, dtype: str, graphs: bool = False, warmup_eager: int = 3,
                 tf32: bool = False, stream: torch.cuda.Stream | None = None):
        self.model, self.opt, self.device, self.dtype = model, optimizer, device, dtype
        self.tf32 = tf32 and dtype == "fp32"
        self.graphs = graphs and device.type == "cuda"
        self.warmup_eager = warmup_eager
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.side: torch.cuda.Stream | None = stream  # ONE side stream for the eager warm-up: each new stream keeps
        # its own cuBLAS workspace
        self.capture_on_side = stream is not None

    def eager(self, x, y):
        with tf32_mode(self.tf32):
            self.opt.zero_grad(set_to_none=True)
            loss = compute_loss(self.model, x, y, self.device, self.dtype, cache_enabled=not self.graphs)
            loss.backward()
            self.opt.step()
        return loss.detach()

    def __call__(self, x, y):
        if not self.graphs:
            return self.eager(x, y)
        if self.graph is not None:
            self.static_x.copy_(x)
            self.static_y.copy_(y)
            self.graph.replay()
            return self.static_loss
        if self.calls < self.warmup_eager:
            self.calls += 1
            if self.side is None:
                self.side = torch.cuda.Stream()
            self.side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(self.side):
                loss = self.eager(x, y)
            torch.cuda.current_stream().wait_stream(self.side)
            return loss
        self.static_x, self.static_y = x.clone(), y.clone()
        self.opt.zero_grad(set_to_none=True)  # grads are then allocated inside the graph's memory pool
        graph = self.graph = torch.cuda.CUDAGraph()
        # on the side stream, other threads (NCCL's watchdog) may keep making their own CUDA calls during the capture
        capture = (torch.cuda.graph(graph, stream=self.side, capture_error_mode="thread_local")
                   if self.capture_on_side else torch.cuda.graph(graph))
        with capture, tf32_mode(self.tf32):
            loss = compute_loss(self.model, self.static_x, self.static_y, self.device, self.dtype,
                                cache_enabled=False)
            loss.backward()
            self.opt.step()
        self.static_loss = loss.detach()
        graph.replay()  # capture records without running: run this step now
        return self.static_loss


# ------------------------------------------------------------------------------------------------------ timing
def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class BatchFeed:
    """The timed loop's batches, prepared ahead: inputs/targets are split once on the host and pinned; on a GPU, batch
    i+1 is copied to the device on a side stream while step i runs (double buffer), so neither side waits."""

    def __init__(self, tokens_cpu: torch.Tensor, device):
        xs, ys = split_batches(tokens_cpu.cpu())
        self.n, self.i, self.device = xs.shape[0], 0, device
        self.cuda = device.type == "cuda"
        if not self.cuda:
            self.xs, self.ys = xs.to(device), ys.to(device)
            return
        self.xs, self.ys = xs.pin_memory(), ys.pin_memory()
        self.stream = torch.cuda.Stream(device)
        self.slots = [(torch.empty(xs.shape[1:], dtype=xs.dtype, device=device),
                       torch.empty(ys.shape[1:], dtype=ys.dtype, device=device)) for _ in range(2)]
        self.ready = [torch.cuda.Event() for _ in range(2)]
        self.free = [torch.cuda.Event() for _ in range(2)]
        self._prefetch(0)

    def _prefetch(self, i: int):
        slot = i % 2
        with torch.cuda.stream(self.stream):
            self.stream.wait_event(self.free[slot])  # the steps that read this slot before are done with it
            bx, by = self.slots[slot]
            bx.copy_(self.xs[i % self.n], non_blocking=True)
            by.copy_(self.ys[i % self.n], non_blocking=True)
            self.ready[slot].record(self.stream)

    def next(self):
        """(inputs, targets) of the next batch, on the device."""
        i = self.i
        self.i += 1
        if not self.cuda:
            return self.xs[i % self.n], self.ys[i % self.n]
        main = torch.cuda.current_stream(self.device)
        self.free[(i + 1) % 2].record(main)  # all work queued so far (up to step i-1) has read the other slot
        self._prefetch(i + 1)
        main.wait_event(self.ready[i % 2])
        return self.slots[i % 2]


def timed_run(step: TrainStep, feed: BatchFeed, warmup: int, steps: int, device):
    """Runs warmup + steps training steps; returns (per-step milliseconds of the timed steps, all losses, wall-clock
    seconds of the timed steps). GPU: CUDA/HIP events around each whole step, no host sync inside the loop. The wall
    clock runs from before the first timed step's batch is fetched to the device sync after the last step, so it
    also holds the host work (batch feed, Python, launches, loss record) whenever the device would wait for it."""
    losses = torch.empty(warmup + steps, device=device)
    for i in range(warmup):
        losses[i] = step(*feed.next())
    sync(device)
    times = []
    if device.type == "cuda":
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(steps)]
        wall0 = time.perf_counter()
        for i in range(steps):
            x, y = feed.next()
            starts[i].record()
            loss = step(x, y)
            ends[i].record()
            losses[warmup + i] = loss
        sync(device)
        wall = time.perf_counter() - wall0
        times = [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]
    else:
        wall0 = time.perf_counter()
        for i in range(steps):
            x, y = feed.next()
            t0 = time.perf_counter()
            losses[warmup + i] = step(x, y)
            times.append((time.perf_counter() - t0) * 1e3)
        wall = time.perf_counter() - wall0
    return times, losses.tolist(), wall


def percentile(values, q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100]) of a non-empty list."""
    s = sorted(values)
    pos = (len(s) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)
