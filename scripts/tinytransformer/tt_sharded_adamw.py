"""Data parallelism for bf16 parameters with the optimizer sharded over the ranks (ZeRO stage 1), in place of
DistributedDataParallel (v4 on several ranks; tt_train.data_parallel picks it).

One step after the backward: every gradient lands in one flat bf16 buffer (the projections' weight-gradient products
write straight into it, the few others are copied in one launch), one reduce-scatter gives each rank the mean of its
1/world slice, each rank runs the one-kernel AdamW on its slice of the fp32 master weights and moments, and one
all-gather brings every rank the new bf16 weights (the flat buffer the parameters view). The links carry the bytes of
one all-reduce; each rank does 1/world of the AdamW work and keeps 1/world of the moments; and no hook runs inside the
backward, so the weight gradients keep their side stream. Everything is capturable in one CUDA graph."""
from __future__ import annotations

import torch
import torch.distributed as dist

from tt_optim import MasterWeights

# Shard boundaries and sizes are multiples of this many elements (16 bytes of bf16: the AdamW kernel's vector loads).
ALIGN = 8
# The flat buffer is exchanged in this many equal chunks, so that the AdamW of one chunk could run while the next
# chunk's reduce-scatter or the last chunk's all-gather is on the links (each rank owns 1/world of every chunk). One
# is fastest: on two H100s, v4 B8 S128, 1 / 2 / 4 chunks took 1.573-1.577 / 1.631-1.635 / 1.697-1.699 ms per step
# (benchmarks/tinytransformer/scaling_probe.py, modes sharded:kN): each extra pair of collectives costs more than
# the overlap gains.
COMM_CHUNKS = 1


def _pad(weights: MasterWeights, n_pad: int) -> None:
    """Grow the flat master and low-precision buffers to n_pad elements (zeros at the end) and re-point the parameters
    at the new low-precision buffer."""
    n = weights.master.numel()
    master = torch.zeros(n_pad, dtype=weights.master.dtype, device=weights.master.device)
    low = torch.zeros(n_pad, dtype=weights.low.dtype, device=weights.low.device)
    with torch.no_grad():
        master[:n].copy_(weights.master)
        low[:n].copy_(weights.low)
        offset = 0
        for p in weights.params:
            k = p.numel()
            p.data = low[offset:offset + k].view(p.shape)
            offset += k
    weights.master, weights.low = master, low


class ShardedMasterAdamW(torch.optim.Optimizer):
    """AdamW (tt_optim.MasterAdamW's update) over `group`'s ranks: reduce-scatter of the mean gradient, AdamW on this
    rank's slices, all-gather of the new bf16 weights, chunk by chunk (COMM_CHUNKS): rank r owns elements
    [k*C + r*C/world, k*C + (r+1)*C/world) of chunk k of C elements. Construct it on every rank at the same point (it
    broadcasts rank 0's weights, as DDP does). NCCL: reduce_scatter_tensor (mean) and all_gather_into_tensor in place,
    asynchronous, the device streams ordered by the work handles; gloo (CPU, no reduce-scatter): an all-reduce of the
    sum, then this rank's slice divided by the world size."""

    def __init__(self, weights: MasterWeights, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, group=None):
        super().__init__(weights.params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))
        import tt_kernels  # after the TRITON_INTERPRET decision
        self.kernels = tt_kernels
        self.weights, self.group = weights, group
        self.world, self.rank = dist.get_world_size(group), dist.get_rank(group)
        self.nccl = dist.get_backend(group) == "nccl"
        n = weights.master.numel()
        self.n_chunks = COMM_CHUNKS
        unit = ALIGN * self.world * self.n_chunks
        n_pad = -(-n // unit) * unit
        if n_pad != n:
            _pad(weights, n_pad)
        shard = n_pad // self.world
        chunk = n_pad // self.n_chunks
        self.part = chunk // self.world  # this rank's elements of one chunk
        self.owned = [(k * chunk + self.rank * self.part, k * chunk + (self.rank + 1) * self.part)
                      for k in range(self.n_chunks)]
        device = weights.master.device
        with torch.no_grad():  # every rank starts from rank 0's weights
            dist.broadcast(weights.master, 0, group=group)
            weights.low.copy_(weights.master)
        self.flat_grad = torch.zeros(n_pad, dtype=weights.low.dtype, device=device)
        self.grad_shard = torch.empty(shard, dtype=weights.low.dtype, device=device)
        self.exp_avg = torch.zeros(shard, dtype=torch.float32, device=device)
        self.exp_avg_sq = torch.zeros(shard, dtype=torch.float32, device=device)
        self.step_count = torch.zeros(1, dtype=torch.float32, device=device)
        # each parameter's place in the flat gradient buffer; the projections write their weight gradient there
        self.grad_views: list[torch.Tensor] = []
        offset = 0
        for p in weights.params:
            view = self.flat_grad[offset:offset + p.numel()].view(p.shape)
            setattr(p, tt_kernels.GRAD_BUFFER_ATTR, view)
            self.grad_views.append(view)
            offset += p.numel()
        # AdamW over this rank's part of a chunk as one flat "parameter": rows (0, first element, flat offset, count)
        block = tt_kernels.adamw_chunk_block()
        self.chunks = torch.tensor([(0, j, j, min(block, self.part - j)) for j in range(0, self.part, block)],
                                   dtype=torch.int64).to(device)
        self.grad_offsets = torch.zeros(1, dtype=torch.int64, device=device)

    def _gather_grads(self) -> None:
        grads = [p.grad for p in self.weights.params]
        missing = [i for i, g in enumerate(grads) if g is None]
        if missing:
            raise RuntimeError(f"ShardedMasterAdamW: {len(missing)} parameter(s) have no gradient (first: index "
                               f"{missing[0]}); every parameter must train")
        # a gradient already in its place (written there by its projection) is not copied
        pairs = [(view, g) for view, g in zip(self.grad_views, grads, strict=True)
                 if g is not None and g.data_ptr() != view.data_ptr()]
        if pairs:
            torch._foreach_copy_([v for v, _ in pairs], [g for _, g in pairs])

    @torch.no_grad()
    def step(self, closure=None):
        self._gather_grads()
        part, world = self.part, self.world
        chunk = part * world
        flat, shard, low = self.flat_grad, self.grad_shard, self.weights.low
        # every reduce-scatter queued first: the links work on chunk k+1 while AdamW updates chunk k
        pending = []
        for k in range(self.n_chunks):
            if self.nccl:
                pending.append(dist.reduce_scatter_tensor(shard[k * part:(k + 1) * part],
                                                          flat[k * chunk:(k + 1) * chunk], op=dist.ReduceOp.AVG,
                                                          group=self.group, async_op=True))
            else:
                pending.append(dist.all_reduce(flat[k * chunk:(k + 1) * chunk], group=self.group, async_op=True))
        self.step_count += 1
        g = self.param_groups[0]
        beta1, beta2 = g["betas"]
        gathers = []
        for k, ((lo, hi), work) in enumerate(zip(self.owned, pending, strict=True)):
            work.wait()
            grad = shard[k * part:(k + 1) * part]
            if not self.nccl:
                torch.div(flat[lo:hi], world, out=grad)
            self.kernels.adamw_step(self.weights.master[lo:hi], grad, self.grad_offsets, self.chunks, ALIGN,
                                    self.exp_avg[k * part:(k + 1) * part], self.exp_avg_sq[k * part:(k + 1) * part],
                                    low[lo:hi], self.step_count, g["lr"], beta1, beta2, g["eps"], g["weight_decay"])
            if self.nccl:
                gathers.append(dist.all_gather_into_tensor(low[k * chunk:(k + 1) * chunk], low[lo:hi],
                                                           group=self.group, async_op=True))
            else:
                gathers.append(dist.all_gather(list(low[k * chunk:(k + 1) * chunk].chunk(world)), low[lo:hi].clone(),
                                               group=self.group, async_op=True))
        for work in gathers:
            work.wait()
