"""bf16 parameters with fp32 master weights (v4 with --dtype bf16).

use_low_precision_params() turns a model's parameters into bf16 views of ONE flat buffer, so autocast has no weight to
cast in the forward and no gradient to cast back in the backward. MasterAdamW keeps the fp32 master weights and the
AdamW moments in flat fp32 buffers; its step updates every parameter, reading the bf16 gradients where autograd left
them (a table of their places in memory, no gather copy) and writing the new bf16 weights, in one Triton kernel
(tt_kernels.adamw_step). OptimizerInBackward runs that update one transformer layer at a time during the backward, on a
side stream, as soon as the layer's gradients are complete (the GPU default for v4)."""
from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch


@dataclass
class MasterWeights:
    params: list[torch.nn.Parameter]  # the model's parameters, now views of `low`
    master: torch.Tensor              # flat fp32 master weights (the numbers AdamW updates)
    low: torch.Tensor                 # flat low-precision buffer the parameters view


def use_low_precision_params(model: torch.nn.Module, dtype=torch.bfloat16) -> MasterWeights:
    """Re-point every trainable parameter of `model` at a `dtype` view of one flat buffer; the fp32 master copy keeps
    the exact current values. Stored as model.master_weights (make_optimizer picks MasterAdamW from it)."""
    params = [p for p in model.parameters() if p.requires_grad]
    n = sum(p.numel() for p in params)
    device = params[0].device
    master = torch.empty(n, dtype=torch.float32, device=device)
    low = torch.empty(n, dtype=dtype, device=device)
    offset = 0
    with torch.no_grad():
        for p in params:
            k = p.numel()
            master[offset:offset + k].copy_(p.reshape(-1))
            p.data = low[offset:offset + k].view(p.shape)
            offset += k
        low.copy_(master)
    weights = MasterWeights(params, master, low)
    object.__setattr__(model, "master_weights", weights)  # a plain attribute, not a submodule or buffer
    return weights


class _GradTable:
    """Where one set of gradients lies in memory, for the AdamW kernel: a device int64 vector indexed by parameter
    number (the kernel's chunk rows name parameters by number) holding each gradient's distance in elements from the
    set's first gradient, which is the kernel's base pointer. Entries of parameters outside the set stay 0."""

    def __init__(self, n_params: int, indices: list[int], align: int, device):
        self.n_params, self.indices, self.align = n_params, indices, align
        self.offsets = torch.zeros(n_params, dtype=torch.int64, device=device)
        self._addrs: tuple[int, ...] | None = None  # the addresses `offsets` was computed for, when known
        # Pinned host tables that captured CUDA graphs copy into `offsets` at every replay (kept for good), and one
        # spare for the next capture: it is allocated in an eager step, since a capture must not allocate pinned memory.
        self._graph_tables: dict[tuple[int, ...], torch.Tensor] = {}
        self._spare: torch.Tensor | None = None

    def point_at(self, grads: list[torch.Tensor]) -> int:
        """Load the distances of `grads` (one per index of the set, in order) into `offsets`; returns the alignment hint
        valid for them. Eager steps copy only when the addresses changed (and always once a graph exists: its replays
        overwrite `offsets`); a CUDA graph capture records a copy from a pinned table that stays as it is for the
        graph's life."""
        size = grads[0].element_size()
        for g in grads:
            if not g.is_contiguous() or g.dtype != grads[0].dtype:
                raise RuntimeError("MasterAdamW: gradients must be contiguous and of one dtype, got "
                                   f"{g.dtype} with strides {g.stride()}")
        addrs = tuple(g.data_ptr() for g in grads)
        distances = [(a - addrs[0]) // size for a in addrs]  # exact: every address is a multiple of the element size
        align = math.gcd(self.align, *distances)
        table = [0] * self.n_params
        for i, d in zip(self.indices, distances, strict=True):
            table[i] = d
        on_gpu = self.offsets.is_cuda
        if on_gpu and torch.cuda.is_current_stream_capturing():
            host = self._graph_tables.get(addrs)
            if host is None:
                if self._spare is None:
                    raise RuntimeError("MasterAdamW: run one eager step before capturing a CUDA graph (it allocates "
                                       "the pinned table the graph copies from)")
                host, self._spare = self._spare, None
                host.copy_(torch.tensor(table, dtype=torch.int64))
                self._graph_tables[addrs] = host
            self.offsets.copy_(host, non_blocking=True)
            return align
        if on_gpu and self._spare is None:
            self._spare = torch.empty(self.n_params, dtype=torch.int64, pin_memory=True)
        if addrs != self._addrs or self._graph_tables:
            host = torch.tensor(table, dtype=torch.int64)
            self.offsets.copy_(host.pin_memory() if on_gpu else host, non_blocking=True)
            self._addrs = addrs
        return align


class MasterAdamW(torch.optim.Optimizer):
    """AdamW (torch.optim.AdamW's update, one parameter group) on fp32 master weights for low-precision parameters.
    Capturable in a CUDA graph: the step count lives on the device. step() updates every parameter in one launch;
    begin_step() + step_part(k) update one part of the parameters at a time (see OptimizerInBackward)."""

    def __init__(self, weights: MasterWeights, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
        super().__init__(weights.params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        import tt_kernels  # after the TRITON_INTERPRET decision
        self.kernels = tt_kernels
        self.weights = weights
        self.exp_avg = torch.zeros_like(weights.master)
        self.exp_avg_sq = torch.zeros_like(weights.master)
        self.step_count = torch.zeros(1, dtype=torch.float32, device=weights.master.device)
        self._rows, self.align = self._chunk_rows(weights, tt_kernels.adamw_chunk_block())
        self.chunks = self._device_rows(self._rows)
        n = len(weights.params)
        self._all = _GradTable(n, list(range(n)), self.align, weights.master.device)
        self._parts: list[tuple[_GradTable, torch.Tensor]] = []  # set by split()

    @staticmethod
    def _chunk_rows(weights: MasterWeights, block: int) -> tuple[list[tuple[int, int, int, int]], int]:
        """Chunk table rows (parameter index, first element, flat offset, count) and the largest power of two <= 8
        that divides every flat offset and size (the kernel's alignment hint)."""
        rows, offset, align = [], 0, 8
        for i, p in enumerate(weights.params):
            n = p.numel()
            rows += [(i, j, offset + j, min(block, n - j)) for j in range(0, n, block)]
            align = math.gcd(align, offset, n)
            offset += n
        return rows, align

    def _device_rows(self, rows) -> torch.Tensor:
        return torch.tensor(rows, dtype=torch.int64).reshape(-1, 4).to(self.weights.master.device)

    def split(self, parts: list[list[int]]):
        """Divide the parameters (by index) into parts that step_part() updates one at a time."""
        flat = sorted(i for part in parts for i in part)
        if flat != list(range(len(self.weights.params))):
            raise ValueError("MasterAdamW.split: the parts must hold every parameter index exactly once")
        device = self.weights.master.device
        self._parts = []
        for part in parts:
            members = set(part)
            rows = self._device_rows([r for r in self._rows if r[0] in members])
            self._parts.append((_GradTable(len(self.weights.params), list(part), self.align, device), rows))

    def _grads(self, indices) -> list[torch.Tensor]:
        grads = [self.weights.params[i].grad for i in indices]
        missing = [i for i, g in zip(indices, grads, strict=True) if g is None]
        if missing:
            raise RuntimeError(f"MasterAdamW: {len(missing)} parameter(s) have no gradient (first: index {missing[0]})"
                               "; every parameter must train")
        return grads

    def _launch(self, table: _GradTable, chunks: torch.Tensor, grads: list[torch.Tensor]):
        align = table.point_at(grads)
        group = self.param_groups[0]
        beta1, beta2 = group["betas"]
        self.kernels.adamw_step(self.weights.master, grads[0], table.offsets, chunks, align, self.exp_avg,
                                self.exp_avg_sq, self.weights.low, self.step_count, group["lr"], beta1, beta2,
                                group["eps"], group["weight_decay"])

    @torch.no_grad()
    def step(self, closure=None):
        grads = self._grads(self._all.indices)
        self.begin_step()
        self._launch(self._all, self.chunks, grads)

    @torch.no_grad()
    def begin_step(self):
        """Advance the step count (on the device); once per step, before the first step_part()."""
        self.step_count += 1

    @torch.no_grad()
    def step_part(self, k: int):
        """Update part k of split(): its parameters' gradients must all be there."""
        table, chunks = self._parts[k]
        self._launch(table, chunks, self._grads(table.indices))


def layer_parts(model: torch.nn.Module, weights: MasterWeights) -> list[list[int]]:
    """MasterWeights parameter indices grouped by transformer layer (`layers.<n>.`), plus one part for the rest
    (embedding, final norm), in the order the backward completes them: last layer first, the rest last."""
    index = {id(p): i for i, p in enumerate(weights.params)}
    layers: dict[int, list[int]] = {}
    rest: list[int] = []
    for name, p in model.named_parameters():
        if id(p) not in index:
            continue
        parts = name.split(".")
        if len(parts) > 2 and parts[0] == "layers" and parts[1].isdigit():
            layers.setdefault(int(parts[1]), []).append(index[id(p)])
        else:
            rest.append(index[id(p)])
    ordered = [layers[n] for n in sorted(layers, reverse=True)]
    return ordered + ([rest] if rest else [])


class OptimizerInBackward:
    """Runs MasterAdamW one part of the parameters (a transformer layer) at a time, as soon as autograd has accumulated
    that part's last gradient, on a side stream: the update of the last layers overlaps the backward of the first ones,
    so AdamW (about 0.2 ms per step for 32M parameters, bound by memory traffic) is mostly hidden behind the small,
    latency-bound backward kernels. On a CPU the parts run inline, in the same order.

        with overlap.step():
            loss.backward()      # every parameter is updated when the block exits

    Safe because a part is complete only when nothing later in the backward reads its weights (the tied embedding's
    gradient is accumulated once, at the very end), and the caller's stream waits for the side stream on exit, so
    the next forward sees the new weights. Not for DDP: a gradient is final only after the reducer's all-reduce."""

    def __init__(self, opt: MasterAdamW, parts: list[list[int]]):
        self.opt, self.parts = opt, parts
        opt.split(parts)
        params = opt.weights.params
        part_of = {i: k for k, part in enumerate(parts) for i in part}
        device = opt.weights.master.device
        self.side = torch.cuda.Stream(device) if device.type == "cuda" else None
        self._left: list[int] | None = None  # per part, gradients still to come (None: outside step())
        self.launched: list[int] = []        # parts updated in the current / last step, in order
        self._hooks = [p.register_post_accumulate_grad_hook(self._hook(part_of[i])) for i, p in enumerate(params)]

    def _hook(self, k: int):
        def ready(_param):
            if self._left is None:  # a backward outside step() (a gate's gradient check): not an optimizer step
                return
            self._left[k] -= 1
            if self._left[k] == 0:
                self._update(k)
        return ready

    def _update(self, k: int):
        first = not self.launched
        self.launched.append(k)
        if self.side is None:
            if first:
                self.opt.begin_step()
            self.opt.step_part(k)
            return
        self.side.wait_stream(torch.cuda.current_stream())  # the part's gradients are queued on the caller's stream
        with torch.cuda.stream(self.side):
            if first:
                self.opt.begin_step()
            self.opt.step_part(k)

    @contextlib.contextmanager
    def step(self):
        self.launched = []
        self._left = [len(part) for part in self.parts]
        try:
            yield
        finally:
            left, self._left = self._left, None
            if self.side is not None:
                torch.cuda.current_stream().wait_stream(self.side)
        missing = [k for k, n in enumerate(left) if n]
        if missing:
            raise RuntimeError(f"OptimizerInBackward: {len(missing)} part(s) of the parameters got no gradient "
                               f"(first: part {missing[0]}, parameter indices {self.parts[missing[0]][:4]}...); every "
                               "parameter must train")

    def remove(self):
        for h in self._hooks:
            h.remove()
